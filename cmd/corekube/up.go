package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func newUpCommand() *cobra.Command {
	var (
		cfg   server.Config
		nodes int
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything in one process on an embedded etcd: API server, controllers, node agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 0 {
				return fmt.Errorf("--nodes must be 0 or more, got %d", nodes)
			}
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("create data dir: %w", err)
			}
			cfg.DataDir, _ = filepath.Abs(cfg.DataDir)
			if nodes > 0 {
				// Node agents are not part of this build yet; say so rather
				// than pretend.
				slog.Warn("--nodes: simulated node agents are not implemented yet; running without nodes", "nodes", nodes)
			}
			return runServer(cmd.Context(), server.Config{
				Listen:  cfg.Listen,
				DataDir: filepath.Join(cfg.DataDir, "etcd"),
			}, filepath.Join(cfg.DataDir, "kubeconfig"), true)
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "./data", "directory for etcd data and the admin kubeconfig")
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address the API server listens on")
	cmd.Flags().IntVar(&nodes, "nodes", 0, "number of simulated nodes to run (0 = none)")
	return cmd
}

// runServer starts the API server and its control loops (all of them for
// `up`, only the namespace controller for `apiserver`), writes the
// kubeconfig (if path is set), and serves until ctx ends (SIGINT/SIGTERM),
// then shuts down cleanly: loops first, then the server, then etcd.
func runServer(ctx context.Context, cfg server.Config, kubeconfig string, allLoops bool) error {
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if kubeconfig != "" {
		if err := writeKubeconfig(kubeconfig, srv.URL()); err != nil {
			return errors.Join(err, srv.Shutdown(context.Background()))
		}
		slog.Info("admin kubeconfig written", "path", kubeconfig)
	}
	loops, err := controlLoops(&rest.Config{Host: srv.URL(), QPS: -1}, allLoops)
	if err != nil {
		return errors.Join(err, srv.Shutdown(context.Background()))
	}
	loopsCtx, stopLoops := context.WithCancel(ctx)
	waitLoops := runLoops(loopsCtx, loops)

	<-ctx.Done()
	slog.Info("shutting down")
	stopLoops()
	waitLoops()
	return srv.Shutdown(context.Background())
}

// writeKubeconfig writes an admin kubeconfig for the server at url.
func writeKubeconfig(path, url string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["corekube"] = &clientcmdapi.Cluster{Server: url}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["corekube"] = &clientcmdapi.Context{Cluster: "corekube", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "corekube"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
