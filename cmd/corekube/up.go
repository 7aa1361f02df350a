package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/corekube/corekube/agent"
	"github.com/corekube/corekube/server"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func newUpCommand() *cobra.Command {
	var (
		cfg            server.Config
		agentOpts      agentOptions
		nodeIdentities bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything in one process on an embedded etcd: API server, controllers, node agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentOpts.cfg.Nodes < 0 {
				return fmt.Errorf("--nodes must be 0 or more, got %d", agentOpts.cfg.Nodes)
			}
			agentCfg, err := agentOpts.config()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("create data dir: %w", err)
			}
			cfg.DataDir, _ = filepath.Abs(cfg.DataDir)
			if err := upServiceAccountKey(&cfg); err != nil {
				return err
			}
			// The flags filled cfg; the data directory holds etcd's data,
			// the certificates and the kubeconfig side by side.
			dataDir := cfg.DataDir
			cfg.DataDir = filepath.Join(dataDir, "etcd")
			cfg.CertDir = filepath.Join(dataDir, "pki")
			if nodeIdentities {
				agentCfg.NodeConfig = inProcessNodeIdentity
			}
			cfg.Verbosity, _ = cmd.Flags().GetInt("v")
			return runServer(cmd.Context(), cfg, filepath.Join(dataDir, "kubeconfig"), true, &agentCfg)
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "./data", "directory for etcd data and the admin kubeconfig")
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address the API server listens on")
	addAPIFlags(cmd.Flags(), &cfg)
	cmd.Flags().IntVar(&agentOpts.cfg.Nodes, "nodes", 3, "number of simulated nodes to run in-process (0 = none)")
	agentOpts.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&nodeIdentities, "node-identities", true,
		"each in-process node authenticates as itself (a client certificate of system:node:NAME in system:nodes from the server's CA, one TLS connection per node), so that the Node authorizer and NodeRestriction apply; false: all nodes share the server's loopback identity and connection")
	return cmd
}

// inProcessNodeIdentity marks an agent configuration whose nodes take
// their identities from the in-process server: runServer replaces it with
// the server's NodeClientConfig once the server runs.
func inProcessNodeIdentity(string) (*rest.Config, error) {
	return nil, errors.New("no in-process server issues node identities")
}

// runServer starts the API server and its control loops (all of them for
// `up`, only the namespace and ServiceAccounts controllers for
// `apiserver`) and, when agentCfg asks for nodes, simulated node agents;
// writes the kubeconfig (if path is set), and serves until ctx ends
// (SIGINT/SIGTERM), then shuts down cleanly: loops and agents first, then
// the server, then etcd.
func runServer(ctx context.Context, cfg server.Config, kubeconfig string, allLoops bool, agentCfg *agent.Config) error {
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if kubeconfig != "" {
		if err := writeKubeconfig(kubeconfig, srv.AdminConfig()); err != nil {
			return errors.Join(err, srv.Shutdown(context.Background()))
		}
		slog.Info("admin kubeconfig written", "path", kubeconfig)
	}
	// The loops' metrics join the server's on its one /metrics.
	loops, err := controlLoops(srv.LoopbackConfig(), allLoops, srv.Metrics())
	if err != nil {
		return errors.Join(err, srv.Shutdown(context.Background()))
	}
	if allLoops {
		// The CSR approver and signer, with the server's CA.
		ca, err := upSigningCA(cfg.CertDir)
		if err == nil {
			var certs []loop
			certs, err = certificatesLoops(srv.LoopbackConfig(), ca, slog.Default(), srv.Metrics())
			loops = append(loops, certs...)
		}
		if err != nil {
			return errors.Join(err, srv.Shutdown(context.Background()))
		}
	}
	if agentCfg != nil && agentCfg.Nodes > 0 {
		acfg := *agentCfg
		// One /metrics for everything: the kubelet metrics go into the
		// API server's registry (the kubelet port serves it too).
		acfg.Metrics = srv.Metrics()
		if acfg.NodeConfig != nil {
			acfg.NodeConfig = srv.NodeClientConfig
			if _, err := srv.NodeClientConfig(""); err != nil {
				// Without TLS (or trusting another CA) the nodes share the
				// loopback identity, as with --node-identities=false.
				slog.Warn("nodes share the server's identity", "reason", err)
				acfg.NodeConfig = nil
			}
		}
		loops = append(loops, loop{name: "node agents", start: func(ctx context.Context) error {
			return agent.Run(ctx, srv.LoopbackConfig(), acfg)
		}})
	}
	loopsCtx, stopLoops := context.WithCancel(ctx)
	waitLoops := runLoops(loopsCtx, loops)

	<-ctx.Done()
	// As kube-apiserver: /readyz fails at once and everything keeps
	// being served for --shutdown-delay-duration; then the loops stop and
	// the server drains.
	srv.BeginShutdown(context.Background())
	slog.Info("shutting down")
	stopLoops()
	waitLoops()
	return srv.Shutdown(context.Background())
}

// writeKubeconfig writes an admin kubeconfig (0600: it holds the admin's
// key) from the admin client config: the server's URL and CA, the admin's
// client certificate and key, all embedded.
func writeKubeconfig(path string, admin *rest.Config) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["corekube"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertData, ClientKeyData: admin.KeyData}
	cfg.Contexts["corekube"] = &clientcmdapi.Context{Cluster: "corekube", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "corekube"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	// Through a temporary file and a rename, so that a reader (or another
	// server writing the same path) never sees half a file.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err := errors.Join(err, tmp.Close()); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
