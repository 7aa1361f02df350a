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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "corekube:", err)
		os.Exit(1)
	}
}
