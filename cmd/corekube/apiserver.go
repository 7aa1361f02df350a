package main

import (
	"errors"
	"strings"

	"github.com/corekube/corekube/registry/events"
	"github.com/corekube/corekube/server"
	"github.com/spf13/cobra"
)

func newAPIServerCommand() *cobra.Command {
	var (
		cfg         server.Config
		etcdServers string
		kubeconfig  string
	)
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the API server alone, on an embedded etcd (--data-dir) or an external cluster (--etcd-servers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if etcdServers != "" {
				cfg.EtcdServers = strings.Split(etcdServers, ",")
			}
			if cfg.DataDir == "" && len(cfg.EtcdServers) == 0 {
				return errors.New("one of --data-dir or --etcd-servers is required")
			}
			return runServer(cmd.Context(), cfg, kubeconfig, false, nil)
		},
	}
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address to listen on")
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "", "directory of the embedded etcd (when --etcd-servers is not set)")
	cmd.Flags().StringVar(&etcdServers, "etcd-servers", "", "comma-separated client URLs of an external etcd cluster, e.g. http://a:2379,http://b:2379")
	cmd.Flags().StringVar(&kubeconfig, "write-kubeconfig", "", "write an admin kubeconfig for this server to this path")
	cmd.Flags().DurationVar(&cfg.EventTTL, "event-ttl", events.DefaultTTL, "how long an event is kept after its last write (negative: forever)")
	return cmd
}
