package nodelifecycle

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/controllers/record"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// noExecuteTaintingPeriod is how often queued nodes get their NoExecute
// taint (kube's nodeEvictionPeriod).
const noExecuteTaintingPeriod = 100 * time.Millisecond

// byNode indexes pods by spec.nodeName. The name is qualified: the pod
// informer is shared, and an indexer name is taken once per informer.
const byNode = "nodelifecycle/spec.nodeName"

// Controller watches node health and taints, and evicts pods from nodes
// with NoExecute taints. Create it with New or NewForConfig on the
// process's shared informer factory and run it with Start.
type Controller struct {
	client kubernetes.Interface
	cfg    Config
	log    *slog.Logger
	events *record.Recorder

	nodes      corelisters.NodeLister
	leases     coordlisters.LeaseLister
	pods       sharedinformers.PodLister // with the byNode index
	synced     []cache.InformerSynced    // this controller's handlers and caches
	noSchedule workqueue.TypedRateLimitingInterface[string]
	evictor    *evictor

	mu         sync.Mutex
	health     map[string]*nodeHealth
	known      map[string]*v1.Node // nodes seen by the monitor
	zoneStates map[string]zoneState
	tainters   map[string]*zoneTainter
	retryPods  map[string]bool // nodes whose pods still need marking not ready
	started    worker.Once
}

// New returns a controller that reads nodes, node leases and pods from
// factory's informers and writes through client. It registers its event
// handlers and its pod index there: factory's owner starts the factory
// after New and shuts it down after Start returned, and Start must run
// (its queues live until it returns). factory's transform must keep what
// this controller reads (sharedinformers.Transform does) and must leave
// nodes whole: node status is written from the cached copy.
//
// The pod informer is the factory's, of all pods: kube's node lifecycle
// controller selects spec.nodeName!= instead, but pod GC needs the
// unscheduled pods too, and one cache of all pods costs less than a second
// cache and watch of the bound ones. The handlers and the index skip
// unbound pods.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("controller", "nodelifecycle")
	c := &Controller{
		client:     client,
		cfg:        cfg,
		log:        log,
		events:     record.New(client, cfg.Clock, log, record.Options{}),
		health:     map[string]*nodeHealth{},
		known:      map[string]*v1.Node{},
		zoneStates: map[string]zoneState{},
		tainters:   map[string]*zoneTainter{},
		retryPods:  map[string]bool{},
	}
	c.noSchedule = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "node_lifecycle_controller", Clock: cfg.Clock, MetricsProvider: cfg.QueueMetrics})
	c.evictor = newEvictor(c)
	if err := c.register(factory); err != nil {
		c.shutDownQueues()
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	return c, nil
}

// register takes the informers from factory and adds the pod index and
// the event handlers.
func (c *Controller) register(factory informers.SharedInformerFactory) error {
	nodeInformer := factory.Core().V1().Nodes()
	// All namespaces, as kube's: the lister is read in kube-node-lease only,
	// and the other leases (leader election) are few.
	leaseInformer := factory.Coordination().V1().Leases()
	podInformer, pods := sharedinformers.PodsOf(factory)
	if err := podInformer.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if pod, ok := obj.(*sharedinformers.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	c.nodes = nodeInformer.Lister()
	c.leases = leaseInformer.Lister()
	c.pods = pods

	nodeReg, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if node, ok := obj.(*v1.Node); ok {
				c.noSchedule.Add(node.Name)
				c.evictor.nodeChanged(nil, node)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*v1.Node)
			node, ok2 := obj.(*v1.Node)
			if ok1 && ok2 {
				c.noSchedule.Add(node.Name)
				c.evictor.nodeChanged(old, node)
			}
		},
	})
	if err != nil {
		return err
	}
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.evictor.podChanged,
		UpdateFunc: func(_, obj any) { c.evictor.podChanged(obj) },
		DeleteFunc: c.evictor.podDeleted,
	})
	if err != nil {
		return err
	}
	c.synced = []cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced, leaseInformer.Informer().HasSynced}
	return nil
}

func (c *Controller) shutDownQueues() {
	c.noSchedule.ShutDown()
	c.evictor.queue.ShutDown()
}

// NewForConfig returns New with a client of its own (user agent
// node-lifecycle-controller unless set) for the server restConfig points at.
func NewForConfig(restConfig *rest.Config, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	client, err := useragent.NewClient(restConfig, useragent.For(useragent.KubeControllerManager, "node-lifecycle-controller"))
	if err != nil {
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	return New(client, factory, cfg)
}

// Start runs the controller until ctx ends, once its informers have
// synced (the factory's owner starts them). It returns nil when ctx ends
// and an error when it cannot start; it runs once. Every goroutine it
// started has returned when it returns.
func (c *Controller) Start(ctx context.Context) error {
	return c.started.Run(ctx, "node lifecycle controller", c.shutDownQueues, c.run)
}

// run is Start's body, in the frame worker.Once.Run gives it.
func (c *Controller) run(ctx context.Context, wg *sync.WaitGroup) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	c.log.Info("node lifecycle controller started", "gracePeriod", c.cfg.GracePeriod)

	c.events.Run(ctx, wg)
	if err := c.runWorkers(ctx, wg, "noschedule-taint-node", 2, c.noSchedule, c.syncNoScheduleTaints); err != nil {
		return fmt.Errorf("node lifecycle controller: %w", err)
	}
	if err := c.runWorkers(ctx, wg, "node-eviction", 2, c.evictor.queue, c.evictor.process); err != nil {
		return fmt.Errorf("node lifecycle controller: %w", err)
	}
	c.every(ctx, wg, "noexecute-tainting", noExecuteTaintingPeriod, c.noExecuteTaintingPass)
	c.every(ctx, wg, "node-monitor", c.cfg.MonitorPeriod, c.monitor)
	<-ctx.Done()
	return nil
}

// runWorkers drains queue with n goroutines; failures are retried with
// the queue's back-off.
func (c *Controller) runWorkers(ctx context.Context, wg *sync.WaitGroup, name string, n int, queue workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) error {
	l := &worker.Loop[string]{Name: name, Queue: queue, Workers: n, Log: c.log, Sync: worker.NoResult(sync),
		OnError: func(key string, err error) { c.log.Info("retrying", "key", key, "err", err) }}
	return l.Start(ctx, wg)
}

// every runs f now and then every period (with up to 10% jitter) until
// ctx ends, in one goroutine.
func (c *Controller) every(ctx context.Context, wg *sync.WaitGroup, name string, period time.Duration, f func(context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		worker.Every(ctx, c.cfg.Clock, c.log, name, period, 0.1, f)
	}()
}

// podsOnNode lists the pods bound to node from the cache.
func (c *Controller) podsOnNode(node string) []*sharedinformers.Pod {
	return c.pods.ByIndex(byNode, node)
}
