// Command corekube is a Kubernetes-compatible API server for Pods and
// Nodes on etcd, with node agents and control loops, in one binary.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// The first SIGINT or SIGTERM starts a graceful shutdown; a second one
	// exits at once, as kube-apiserver. The goroutine lives as long as the
	// process.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		stop()
		<-signals
		fmt.Fprintln(os.Stderr, "corekube: second signal, exiting without finishing the shutdown")
		os.Exit(1)
	}()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "corekube:", err)
		os.Exit(1)
	}
}
