package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/corekube/corekube/controllers/disruption"
	"github.com/corekube/corekube/controllers/garbagecollector"
	"github.com/corekube/corekube/controllers/namespace"
	"github.com/corekube/corekube/controllers/nodelifecycle"
	"github.com/corekube/corekube/controllers/podgc"
	"github.com/corekube/corekube/controllers/scheduler"
	"github.com/corekube/corekube/controllers/serviceaccount"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/controllers/workqueuemetrics"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// loop is a long-running part of the process (a controller, the node
// agents): Start blocks until ctx ends.
type loop struct {
	name  string
	start func(ctx context.Context) error
	// warm, when set, fills the loop's caches without acting; a process
	// that waits for a lease runs it first, so that its standby is ready
	// to act the moment it leads (kube-scheduler's behaviour).
	warm func(ctx context.Context) error
}

// loopSet selects the control loops a process runs.
type loopSet uint8

const (
	// namespaceLoop is the namespace controller and the ServiceAccounts
	// controller (the default ServiceAccount of every namespace, without
	// which no pod is admitted).
	namespaceLoop loopSet = 1 << iota
	// schedulerLoop is the scheduler.
	schedulerLoop
	// controllerLoops are the node lifecycle, pod GC, disruption and
	// garbage collector controllers and the loop that runs the informers
	// they share.
	controllerLoops
)

// controlLoops returns the control loops for a server at cfg: the
// namespace and ServiceAccounts controllers always (namespaces are never
// deleted without the one, pods never admitted without the other);
// with all, also the scheduler, node lifecycle, pod GC and disruption
// controllers, as `up` runs them in one process. Their metrics go to
// metrics (the server's registry, so that its /metrics has them).
func controlLoops(cfg *rest.Config, all bool, metrics prometheus.Registerer) ([]loop, error) {
	set := namespaceLoop
	if all {
		set |= schedulerLoop | controllerLoops
	}
	return newLoops(cfg, set, slog.Default(), metrics)
}

// newLoops returns the loops of set for a server at cfg, logging to log
// and registering their metrics (the scheduler's, the workqueues') on
// metrics (nil: none). Everything is constructed before it returns, so
// the shared informers (started by their loop in runLoops) start after
// every controller has registered its handlers.
func newLoops(cfg *rest.Config, set loopSet, log *slog.Logger, metrics prometheus.Registerer) ([]loop, error) {
	queues, err := workqueuemetrics.For(metrics)
	if err != nil {
		return nil, err
	}
	var loops []loop
	if set&namespaceLoop != 0 {
		ns, err := namespace.New(cfg, log, queues)
		if err != nil {
			return nil, err
		}
		loops = append(loops, loop{name: "namespace controller", start: ns.Start})
	}
	if set&schedulerLoop != 0 {
		// The scheduler keeps its informers, even beside the controllers
		// (`up`): its pod informer selects the non-terminal pods and keeps
		// what scheduling reads (requests, affinity, host ports, ...).
		// Sharing would put the terminated pods (pod GC keeps up to 12,500)
		// in its cache and its fields in every controller's pods, and
		// would tie `corekube scheduler` to the controllers' informers.
		sched, err := scheduler.NewForConfig(cfg, scheduler.Config{Logger: log, Metrics: metrics})
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		loops = append(loops, loop{name: "scheduler", start: sched.Start, warm: sched.Warm})
	}
	if set&(namespaceLoop|controllerLoops) != 0 {
		ctrls, err := sharedInformerLoops(cfg, set, log, queues)
		if err != nil {
			return nil, err
		}
		loops = append(loops, ctrls...)
	}
	return loops, nil
}

// sharedInformerLoops returns the controllers of set that share one
// informer factory (one cache and one watch of pods, of nodes, ...), as
// kube-controller-manager's share its SharedInformerFactory, and the loop
// that owns the factory: it starts it and, once ctx ended, shuts it down.
// queues gives their workqueues metrics (nil: none).
func sharedInformerLoops(cfg *rest.Config, set loopSet, log *slog.Logger, queues workqueue.MetricsProvider) ([]loop, error) {
	factory, err := sharedinformers.NewFactoryForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var loops []loop
	// release lets the controllers built so far go when a later one cannot
	// be: Start with an ended context returns at once and frees their
	// queues.
	release := func(err error) ([]loop, error) {
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		for _, l := range loops {
			_ = l.start(ended)
		}
		return nil, err
	}
	if set&namespaceLoop != 0 {
		sa, err := serviceaccount.NewForConfig(cfg, factory, serviceaccount.Config{Logger: log, QueueMetrics: queues})
		if err != nil {
			return release(err)
		}
		loops = append(loops, loop{name: "service account controller", start: sa.Start})
	}
	if set&controllerLoops == 0 {
		return withFactory(loops, factory), nil
	}
	lifecycle, err := nodelifecycle.NewForConfig(cfg, factory, nodelifecycle.Config{Logger: log, QueueMetrics: queues})
	if err != nil {
		return release(err)
	}
	loops = append(loops, loop{name: "node lifecycle controller", start: lifecycle.Start})
	gc, err := podgc.NewForConfig(cfg, factory, podgc.Config{Logger: log, QueueMetrics: queues})
	if err != nil {
		return release(err)
	}
	loops = append(loops, loop{name: "pod GC", start: gc.Start})
	budgets, err := disruption.NewForConfig(cfg, factory, disruption.Config{Logger: log, QueueMetrics: queues})
	if err != nil {
		return release(err)
	}
	loops = append(loops, loop{name: "disruption controller", start: budgets.Start})
	// The garbage collector takes the factory's pods, nodes, leases and
	// budgets, and watches the metadata of the other resources itself.
	collector, err := garbagecollector.NewForConfig(cfg, factory, garbagecollector.Config{Logger: log, QueueMetrics: queues})
	if err != nil {
		return release(err)
	}
	loops = append(loops, loop{name: "garbage collector", start: collector.Start})
	return withFactory(loops, factory), nil
}

// withFactory appends to loops the loop that runs factory.
func withFactory(loops []loop, factory informers.SharedInformerFactory) []loop {
	return append(loops, loop{name: "shared informers", start: func(ctx context.Context) error {
		sharedinformers.Run(ctx, factory)
		return nil
	}})
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
