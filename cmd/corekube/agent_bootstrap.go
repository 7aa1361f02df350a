package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/agent"
	"github.com/corekube/corekube/agent/bootstrap"
)

// runBootstrappedAgents runs cfg's nodes each as itself, as kubelets
// started with --bootstrap-kubeconfig: every node without a valid
// certificate in certDir gets one through a CSR made with the bootstrap
// identity; then each node runs as an agent of its own with its own client
// config (a client certificate cannot be shared by nodes, nor a
// connection), and renews its certificate before it expires. Each agent
// serves its own kubelet API, so --kubelet-listen must pick a free port
// (its default, port 0) when there are several nodes.
func runBootstrappedAgents(ctx context.Context, boot *rest.Config, certDir string, cfg agent.Config) error {
	if certDir == "" {
		return errors.New("--bootstrap-kubeconfig needs --cert-dir")
	}
	if cfg.Nodes > 1 && !strings.HasSuffix(cfg.KubeletListen, ":0") {
		return fmt.Errorf("--kubelet-listen %s: with --bootstrap-kubeconfig every node serves its own kubelet API, so the port must be 0", cfg.KubeletListen)
	}
	if cfg.ClusterCA == nil {
		cfg.ClusterCA = boot.TLSClientConfig.CAData
		if cfg.ClusterCA == nil && boot.TLSClientConfig.CAFile != "" {
			ca, err := os.ReadFile(boot.TLSClientConfig.CAFile)
			if err != nil {
				return fmt.Errorf("read the cluster CA: %w", err)
			}
			cfg.ClusterCA = ca
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	prefix := cfg.NodeNamePrefix
	if prefix == "" {
		prefix = agent.DefaultNodeNamePrefix
	}
	first := max(cfg.FirstNode, 1)
	managers := make([]*bootstrap.Manager, cfg.Nodes)
	for i := range managers {
		managers[i] = bootstrap.New(boot, certDir, fmt.Sprintf("%s-%d", prefix, first+i), log)
	}

	// Certificates first, a few nodes at a time.
	workers := cfg.NodeWorkers
	if workers <= 0 {
		workers = agent.DefaultNodeWorkers(cfg.Nodes)
	}
	sem := make(chan struct{}, workers)
	errs := make([]error, len(managers))
	var wg sync.WaitGroup
	for i, m := range managers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = m.Ensure(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErrs := make(chan error, len(managers))
	for i, m := range managers {
		rc, err := m.ClientConfig()
		if err != nil {
			return err
		}
		nodeCfg := cfg
		nodeCfg.Nodes, nodeCfg.FirstNode, nodeCfg.NodeNamePrefix = 1, first+i, prefix
		wg.Add(2)
		go func() {
			defer wg.Done()
			m.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			if err := agent.Run(ctx, rc, nodeCfg); err != nil && ctx.Err() == nil {
				runErrs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(runErrs)
	var all []error
	for err := range runErrs {
		all = append(all, err)
	}
	return errors.Join(all...)
}
