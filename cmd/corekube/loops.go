package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/corekube/corekube/controllers/disruption"
	"github.com/corekube/corekube/controllers/namespace"
	"github.com/corekube/corekube/controllers/nodelifecycle"
	"github.com/corekube/corekube/controllers/podgc"
	"github.com/corekube/corekube/controllers/scheduler"
	"k8s.io/client-go/rest"
)

// loop is a long-running part of the process (a controller, the node
// agents): Start blocks until ctx ends.
type loop struct {
	name  string
	start func(ctx context.Context) error
}

// controlLoops returns the control loops for a server at cfg: the
// namespace controller always (namespaces are never deleted without it);
// with all, also the scheduler, node lifecycle, pod GC and disruption
// controllers, as `up` runs them in one process.
func controlLoops(cfg *rest.Config, all bool) ([]loop, error) {
	ns, err := namespace.New(cfg, slog.Default())
	if err != nil {
		return nil, err
	}
	loops := []loop{{"namespace controller", ns.Start}}
	if !all {
		return loops, nil
	}
	sched, err := scheduler.NewForConfig(cfg, scheduler.Config{})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	lifecycle, err := nodelifecycle.NewForConfig(cfg, nodelifecycle.Config{})
	if err != nil {
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	gc, err := podgc.NewForConfig(cfg, podgc.Config{})
	if err != nil {
		return nil, fmt.Errorf("pod GC: %w", err)
	}
	budgets, err := disruption.New(cfg, disruption.Config{})
	if err != nil {
		return nil, fmt.Errorf("disruption controller: %w", err)
	}
	return append(loops,
		loop{"scheduler", sched.Start},
		loop{"node lifecycle controller", lifecycle.Start},
		loop{"pod GC", gc.Start},
		loop{"disruption controller", budgets.Start},
	), nil
}

// runLoops starts every loop in a goroutine of its own; the returned
// function waits until all have returned (after ctx ends). A loop that
// fails before ctx ends is logged; the others go on.
func runLoops(ctx context.Context, loops []loop) (wait func()) {
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.start(ctx); err != nil && ctx.Err() == nil {
				slog.Error("stopped", "loop", l.name, "err", err)
			}
		}()
	}
	return wg.Wait
}
