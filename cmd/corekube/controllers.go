package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
)

// restConfigFrom loads a kubeconfig (the default loading rules when path
// is empty) for the commands that run against an API server.
func restConfigFrom(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.QPS = -1
	return cfg, nil
}

// protobufContentType is the default of kube's components'
// --kube-api-content-type (kubelet, kube-controller-manager; the
// scheduler's clientConnection.contentType): they write and read the API
// in protobuf, accepting JSON for a response that has no protobuf form.
// It is the API server's cheapest encoding too: the objects it stores as
// protobuf are sent as they are kept.
const protobufContentType = "application/vnd.kubernetes.protobuf"

// addContentTypeFlag adds --kube-api-content-type, as kube's components
// have it.
func addContentTypeFlag(f *pflag.FlagSet, contentType *string) {
	f.StringVar(contentType, "kube-api-content-type", protobufContentType,
		"content type of requests sent to the API server: "+protobufContentType+" or application/json")
}

// setContentType makes c speak contentType to the API server.
func setContentType(c *rest.Config, contentType string) error {
	switch contentType {
	case protobufContentType:
		c.ContentType, c.AcceptContentTypes = protobufContentType, protobufContentType+",application/json"
	case "application/json":
		c.ContentType, c.AcceptContentTypes = contentType, contentType
	default:
		return fmt.Errorf("--kube-api-content-type %q: want %s or application/json", contentType, protobufContentType)
	}
	return nil
}

// newLoopsCommand is a command that runs the control loops of set against
// the API server a kubeconfig names, until SIGINT/SIGTERM.
// With --leader-elect (the default, as kube-scheduler's and
// kube-controller-manager's), only the holder of the Lease leaseName in
// kube-system runs them; `up` runs the same loops in-process without.
// Every process, leading or not, serves /healthz, /livez, /readyz and
// /metrics over HTTPS on port (kube's --secure-port; 0: not at all).
func newLoopsCommand(use, short string, set loopSet, leaseName string, port int) *cobra.Command {
	var (
		kubeconfig  string
		contentType string
		signing     signingOptions
		election    leaderElection
		serving     servingOptions
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfigFrom(kubeconfig)
			if err != nil {
				return err
			}
			if err := setContentType(cfg, contentType); err != nil {
				return err
			}
			reg := newComponentRegistry()
			loops, err := newLoops(cfg, set, slog.Default(), reg)
			if err != nil {
				return err
			}
			if set&controllerLoops != 0 {
				ca, err := signing.ca()
				if err != nil {
					return err
				}
				certs, err := certificatesLoops(cfg, ca, slog.Default(), reg)
				if err != nil {
					return err
				}
				loops = append(loops, certs...)
			}
			// kube's leaderElection health check: a leader whose lease
			// has not been renewed for its duration plus 20 s is unhealthy
			// (a standby or an unelected process always passes).
			var checks []healthCheck
			var watchdog *leaderelection.HealthzAdaptor
			if election.enabled {
				watchdog = leaderelection.NewLeaderHealthzAdaptor(leaderHealthTimeout)
				checks = append(checks, watchdog)
			}
			waitServing, err := serving.serve(cmd.Context(), cfg, reg, slog.Default(), checks...)
			if err != nil {
				return err
			}
			defer waitServing()
			if election.enabled {
				id, err := electionIdentity()
				if err != nil {
					return err
				}
				election.watchdog = watchdog
				return runElected(cmd.Context(), cfg, election, id, loops, slog.Default())
			}
			wait := runLoops(cmd.Context(), loops)
			<-cmd.Context().Done()
			wait()
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server")
	addContentTypeFlag(cmd.Flags(), &contentType)
	election.addFlags(cmd.Flags(), leaseName)
	serving.addFlags(cmd.Flags(), port)
	if set&controllerLoops != 0 {
		signing.addFlags(cmd.Flags())
	}
	return cmd
}

func newSchedulerCommand() *cobra.Command {
	return newLoopsCommand("scheduler", "Run the scheduler against an API server", schedulerLoop, "kube-scheduler", schedulerSecurePort)
}

func newControllersCommand() *cobra.Command {
	return newLoopsCommand("controllers", "Run the controllers (namespace, service account, node lifecycle, pod GC, garbage collector, ...) against an API server",
		namespaceLoop|controllerLoops, "kube-controller-manager", controllersSecurePort)
}
