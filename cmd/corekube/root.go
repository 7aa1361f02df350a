package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	var (
		logLevel    string
		verbosity   int
		memoryLimit string
	)
	root := &cobra.Command{
		Use:           "corekube",
		Short:         "A Kubernetes-compatible API server for Pods and Nodes on etcd",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			// Every subcommand: GOMEMLIMIT from the flag or the cgroup's limit.
			return setMemoryLimit(slog.Default(), memoryLimit)
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: "+strings.Join([]string{"debug", "info", "warn", "error"}, ", "))
	root.PersistentFlags().IntVarP(&verbosity, "v", "v", 0, "kube's log verbosity number: from 3 on, the API server logs every request's line (kube's httplog) at info level instead of debug; requests slower than 1s are logged with their trace whatever the level")
	root.PersistentFlags().StringVar(&memoryLimit, "memory-limit", "",
		"the Go runtime's soft memory limit, as GOMEMLIMIT (which it overrides), e.g. 1536Mi: near it the garbage collector works harder rather than let the heap grow to twice its live data, trading CPU for memory; it does not count the pages of etcd's database file the process maps. Default: GOMEMLIMIT, else 90% of the cgroup's memory limit, else none")
	root.AddCommand(newUpCommand(), newAPIServerCommand(), newAgentCommand(), newSchedulerCommand(), newControllersCommand())
	return root
}
