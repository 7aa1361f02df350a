package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/controllers/internal/events"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// byNode indexes pods by spec.nodeName.
const byNode = "node"

// Controller watches node health and taints, and evicts pods from nodes
// with NoExecute taints. Create it with New or NewForConfig and run it
// with Start.
type Controller struct {
	client kubernetes.Interface
	cfg    Config
	log    *slog.Logger
	events *events.Writer

	// set by Start
	nodes      corelisters.NodeLister
	leases     coordlisters.LeaseLister
	pods       cache.Indexer
	noSchedule workqueue.TypedRateLimitingInterface[string]
	evictor    *evictor

	mu         sync.Mutex
	health     map[string]*nodeHealth
	known      map[string]*v1.Node // nodes seen by the monitor
	zoneStates map[string]zoneState
	tainters   map[string]*zoneTainter
	retryPods  map[string]bool // nodes whose pods still need marking not ready
	started    atomic.Bool
}

// New returns a controller that talks to the API server through client.
func New(client kubernetes.Interface, cfg Config) *Controller {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("controller", "nodelifecycle")
	return &Controller{
		client:     client,
		cfg:        cfg,
		log:        log,
		events:     events.NewWriter(client, cfg.Clock, log, 0),
		health:     map[string]*nodeHealth{},
		known:      map[string]*v1.Node{},
		zoneStates: map[string]zoneState{},
		tainters:   map[string]*zoneTainter{},
		retryPods:  map[string]bool{},
	}
}

// NewForConfig returns a controller for the server restConfig points at.
func NewForConfig(restConfig *rest.Config, cfg Config) (*Controller, error) {
	rc := rest.CopyConfig(restConfig)
	if rc.UserAgent == "" {
		rc.UserAgent = "node-lifecycle-controller"
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("node lifecycle controller: %w", err)
	}
	return New(client, cfg), nil
}

// Start runs the controller until ctx ends. It returns nil when ctx ends
// and an error when it cannot start; it runs once.
func (c *Controller) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("node lifecycle controller: already started")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	c.noSchedule = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: c.cfg.Clock})
	c.evictor = newEvictor(c)

	nodeFactory := informers.NewSharedInformerFactory(c.client, 0)
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(v1.NamespaceNodeLease))
	podFactory := informers.NewSharedInformerFactoryWithOptions(c.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" }),
		informers.WithTransform(stripPod))
	nodeInformer := nodeFactory.Core().V1().Nodes()
	leaseInformer := leaseFactory.Coordination().V1().Leases()
	podInformer := podFactory.Core().V1().Pods().Informer()
	if err := podInformer.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("node lifecycle controller: %w", err)
	}
	c.nodes = nodeInformer.Lister()
	c.leases = leaseInformer.Lister()
	c.pods = podInformer.GetIndexer()

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
		return fmt.Errorf("node lifecycle controller: %w", err)
	}
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.evictor.podChanged,
		UpdateFunc: func(_, obj any) { c.evictor.podChanged(obj) },
		DeleteFunc: c.evictor.podDeleted,
	})
	if err != nil {
		return fmt.Errorf("node lifecycle controller: %w", err)
	}
	leaseSynced := leaseInformer.Informer().HasSynced

	var wg sync.WaitGroup
	defer func() {
		cancel()
		c.noSchedule.ShutDown()
		c.evictor.queue.ShutDown()
		wg.Wait()
		nodeFactory.Shutdown()
		leaseFactory.Shutdown()
		podFactory.Shutdown()
	}()
	nodeFactory.Start(ctx.Done())
	leaseFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeReg.HasSynced, podReg.HasSynced, leaseSynced) {
		return nil
	}
	c.log.Info("node lifecycle controller started", "gracePeriod", c.cfg.GracePeriod)

	c.events.Run(ctx, &wg)
	c.runWorkers(ctx, &wg, 2, c.noSchedule, c.syncNoScheduleTaints)
	c.runWorkers(ctx, &wg, 2, c.evictor.queue, c.evictor.process)
	c.every(ctx, &wg, noExecuteTaintingPeriod, c.noExecuteTaintingPass)
	c.every(ctx, &wg, c.cfg.MonitorPeriod, c.monitor)
	<-ctx.Done()
	return nil
}

// runWorkers drains queue with n goroutines; failures are retried with
// the queue's back-off.
func (c *Controller) runWorkers(ctx context.Context, wg *sync.WaitGroup, n int, queue workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := sync(ctx, key); err != nil && ctx.Err() == nil {
					c.log.Info("retrying", "key", key, "err", err)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
}

// every runs f now and then every period (with up to 10% jitter) until
// ctx ends, in one goroutine.
func (c *Controller) every(ctx context.Context, wg *sync.WaitGroup, period time.Duration, f func(context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			f(ctx)
			t := c.cfg.Clock.NewTimer(wait.Jitter(period, 0.1))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}()
}

// podsOnNode lists the pods bound to node from the cache.
func (c *Controller) podsOnNode(node string) []*v1.Pod {
	objs, err := c.pods.ByIndex(byNode, node)
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*v1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out
}

// stripPod keeps, of a pod the informer stores, what this controller reads.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec:   v1.PodSpec{NodeName: pod.Spec.NodeName, Tolerations: pod.Spec.Tolerations},
		Status: v1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.PodReady || cond.Type == v1.DisruptionTarget {
			out.Status.Conditions = append(out.Status.Conditions, cond)
		}
	}
	return out, nil
}
