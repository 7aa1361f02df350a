package garbagecollector

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/controllers/record"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// eventSource is the component kube's garbage collector records events as.
const eventSource = "garbage-collector-controller"

// Config configures a Controller. Zero fields take kube's defaults.
type Config struct {
	// Logger receives the controller's logs; nil is slog.Default().
	Logger *slog.Logger
	// Workers is how many objects are deleted, and how many owners
	// orphaned, at once: kube's --concurrent-gc-syncs, 20.
	Workers int
	// ResyncPeriod is how often discovery is read again for resources to
	// add: 30s, as kube-controller-manager's.
	ResyncPeriod time.Duration
	// QueueMetrics gives the controller's workqueues kube's workqueue_*
	// metrics under kube's queue names (workqueuemetrics.For); nil: none.
	QueueMetrics workqueue.MetricsProvider
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Workers <= 0 {
		c.Workers = 20
	}
	if c.ResyncPeriod <= 0 {
		c.ResyncPeriod = 30 * time.Second
	}
	return c
}

// ignoredResources are never collected nor watched, as in kube: events
// are many, short-lived and never owners.
var ignoredResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// absentOwnersSize bounds the absent-owner cache (kube's: 500).
const absentOwnersSize = 500

// Controller is the garbage collector. Create it with New or NewForConfig
// and run it with Start.
type Controller struct {
	cfg       Config
	log       *slog.Logger
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	events    *record.Recorder

	// mu guards the graph (uidToNode and every node's fields), the
	// absent-owner cache and the resource mapping.
	mu           sync.RWMutex
	uidToNode    map[types.UID]*node
	absentOwners *absentCache
	kinds        map[schema.GroupVersionKind]resourceInfo

	// monitored are the resources watched so far; only Start's goroutines
	// touch it.
	monitored map[schema.GroupVersionResource]cache.SharedIndexInformer

	graphChanges    workqueue.TypedRateLimitingInterface[*event]
	attemptToDelete workqueue.TypedRateLimitingInterface[*node]
	attemptToOrphan workqueue.TypedRateLimitingInterface[*node]

	started worker.Once
	synced  atomic.Bool
}

// resourceInfo is what a kind is served as.
type resourceInfo struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// sharedResources are the resources whose informers the collector takes
// from the process's shared factory, as kube's takes the typed informers
// its controller-manager shares: one cache and one watch of pods (the
// most numerous objects), nodes, leases and budgets for every controller.
// Their transform must keep ownerReferences, finalizers and
// deletionTimestamp (sharedinformers.Transform does).
var sharedResources = []schema.GroupVersionResource{
	{Version: "v1", Resource: "pods"},
	{Version: "v1", Resource: "nodes"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
}

// New returns a collector that reads metadata through md, discovers
// resources through disc and records events through client. When factory
// is not nil, the collector takes the informers of sharedResources from
// it (its owner starts it after New and shuts it down after Start
// returned); it watches the other resources' metadata itself.
func New(md metadata.Interface, disc discovery.DiscoveryInterface, client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("controller", "garbagecollector")
	c := &Controller{
		cfg:          cfg,
		log:          log,
		metadata:     md,
		discovery:    disc,
		events:       record.New(client, clock.RealClock{}, log, record.Options{}),
		uidToNode:    map[types.UID]*node{},
		absentOwners: newAbsentCache(absentOwnersSize),
		kinds:        map[schema.GroupVersionKind]resourceInfo{},
		monitored:    map[schema.GroupVersionResource]cache.SharedIndexInformer{},
	}
	// The queues exist from the start: the shared informers' handlers
	// may deliver before Start.
	rl := func(name string) workqueue.TypedRateLimitingQueueConfig[*node] {
		return workqueue.TypedRateLimitingQueueConfig[*node]{Name: name, MetricsProvider: cfg.QueueMetrics}
	}
	c.graphChanges = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[*event](),
		workqueue.TypedRateLimitingQueueConfig[*event]{Name: "garbage_collector_graph_changes", MetricsProvider: cfg.QueueMetrics})
	c.attemptToDelete = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[*node](), rl("garbage_collector_attempt_to_delete"))
	c.attemptToOrphan = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[*node](), rl("garbage_collector_attempt_to_orphan"))
	if factory == nil {
		return c, nil
	}
	for _, gvr := range sharedResources {
		generic, err := factory.ForResource(gvr)
		if err != nil {
			c.shutDownQueues()
			return nil, fmt.Errorf("garbage collector: shared informer of %s: %w", gvr.Resource, err)
		}
		gvk := schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version}
		switch gvr.Resource {
		case "pods":
			gvk.Kind = "Pod"
		case "nodes":
			gvk.Kind = "Node"
		case "leases":
			gvk.Kind = "Lease"
		case "poddisruptionbudgets":
			gvk.Kind = "PodDisruptionBudget"
		}
		informer := generic.Informer()
		if _, err := informer.AddEventHandler(c.handler(gvk)); err != nil {
			c.shutDownQueues()
			return nil, fmt.Errorf("garbage collector: %w", err)
		}
		c.monitored[gvr] = informer
	}
	return c, nil
}

// NewForConfig returns New with clients of its own (user agent
// generic-garbage-collector, kube's, unless set) for the server
// restConfig points at.
func NewForConfig(restConfig *rest.Config, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	rc := useragent.Config(restConfig, useragent.For(useragent.KubeControllerManager, "generic-garbage-collector"))
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("garbage collector: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("garbage collector: %w", err)
	}
	return New(md, client.Discovery(), client, factory, cfg)
}

func (c *Controller) shutDownQueues() {
	c.graphChanges.ShutDown()
	c.attemptToDelete.ShutDown()
	c.attemptToOrphan.ShutDown()
}

// handler feeds the graph with the changes of one resource's informer,
// typed or metadata-only.
func (c *Controller) handler(gvk schema.GroupVersionKind) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m := asMetadata(obj); m != nil {
				c.graphChanges.Add(&event{typ: addEvent, obj: m, gvk: gvk})
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			if m := asMetadata(obj); m != nil {
				c.graphChanges.Add(&event{typ: updateEvent, obj: m, old: asMetadata(oldObj), gvk: gvk})
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m := asMetadata(obj); m != nil {
				c.graphChanges.Add(&event{typ: deleteEvent, obj: m, gvk: gvk})
			}
		},
	}
}

// asMetadata is what the graph keeps of an informer's object (nil when it
// has no metadata).
func asMetadata(obj any) *metav1.PartialObjectMetadata {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		DeletionTimestamp: m.GetDeletionTimestamp(), OwnerReferences: m.GetOwnerReferences(), Finalizers: m.GetFinalizers(),
	}}
}

// Synced reports whether every monitored resource's informer has listed
// once and the workers run.
func (c *Controller) Synced() bool { return c.synced.Load() }

// Start runs the collector until ctx ends: it discovers the resources,
// watches their metadata, and once every informer has synced runs the
// workers. It returns nil when ctx ends; it runs once.
func (c *Controller) Start(ctx context.Context) error {
	if err := c.started.Start("garbage collector"); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := metadatainformer.NewSharedInformerFactoryWithOptions(c.metadata, 0, metadatainformer.WithTransform(stripMetadata))
	defer factory.Shutdown()
	defer c.shutDownQueues()
	c.events.Run(ctx, &wg)

	// The graph is built from the first event on, workers wait for it to
	// be complete.
	graph := &worker.Loop[*event]{Name: "garbage_collector_graph_changes", Queue: c.graphChanges, Workers: 1, Log: c.log,
		Sync: func(_ context.Context, e *event) (worker.Result, error) {
			c.processGraphChange(e)
			return worker.Result{}, nil
		}}
	if err := graph.Start(ctx, &wg); err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}

	var resources []resourceInfo
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		resources, err = c.discover()
		if err != nil {
			c.log.Warn("garbage collector: discovery failed, retrying", "err", err)
		}
		return err == nil, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	c.monitor(factory, resources)
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.informersSynced()...) {
		return nil
	}
	c.synced.Store(true)
	c.log.Info("garbage collector started", "resources", len(c.monitored), "workers", c.cfg.Workers)

	deleter := &worker.Loop[*node]{Name: "garbage_collector_attempt_to_delete", Queue: c.attemptToDelete, Workers: c.cfg.Workers,
		Log: c.log, Sync: worker.NoResult(c.syncAttemptToDelete), OnError: c.attemptToDeleteFailed}
	orphaner := &worker.Loop[*node]{Name: "garbage_collector_attempt_to_orphan", Queue: c.attemptToOrphan, Workers: c.cfg.Workers,
		Log: c.log, Sync: worker.NoResult(c.orphanDependents), OnError: c.attemptToOrphanFailed}
	if err := deleter.Start(ctx, &wg); err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	if err := orphaner.Start(ctx, &wg); err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}

	// Resources served later (none in corekube today, but discovery is
	// the source of truth) get monitors at the next resync.
	worker.Tick(ctx, clock.RealClock{}, c.log, "garbage_collector_discovery", c.cfg.ResyncPeriod, func(ctx context.Context) {
		resources, err := c.discover()
		if err != nil {
			c.log.Warn("garbage collector: discovery failed", "err", err)
			return
		}
		if c.monitor(factory, resources) {
			factory.Start(ctx.Done())
		}
	})
	return nil
}

// discover reads the served resources: it refreshes the kind mapping
// (every served version, for ownerReferences) and returns the preferred
// version of each resource the collector monitors (list, watch and
// delete).
func (c *Controller) discover() ([]resourceInfo, error) {
	_, all, err := c.discovery.ServerGroupsAndResources()
	if err != nil {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	kinds := map[schema.GroupVersionKind]resourceInfo{}
	for _, list := range all {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if slices.Contains([]rune(r.Name), '/') {
				continue // a subresource
			}
			kinds[gv.WithKind(r.Kind)] = resourceInfo{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced}
		}
	}
	c.mu.Lock()
	c.kinds = kinds
	c.mu.Unlock()

	preferred, err := c.discovery.ServerPreferredResources()
	if err != nil {
		return nil, fmt.Errorf("discover preferred resources: %w", err)
	}
	var out []resourceInfo
	for _, list := range preferred {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if slices.Contains([]rune(r.Name), '/') || ignoredResources[schema.GroupResource{Group: gv.Group, Resource: r.Name}] {
				continue
			}
			if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, resourceInfo{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced})
		}
	}
	return out, nil
}

// monitor adds a metadata informer feeding the graph for each resource
// not watched yet; it reports whether it added any.
func (c *Controller) monitor(factory metadatainformer.SharedInformerFactory, resources []resourceInfo) bool {
	added := false
	for _, r := range resources {
		if _, ok := c.monitored[r.gvr]; ok {
			continue
		}
		gvk, ok := c.kindOf(r.gvr)
		if !ok {
			continue
		}
		informer := factory.ForResource(r.gvr).Informer()
		_, err := informer.AddEventHandler(c.handler(gvk))
		if err != nil {
			c.log.Warn("garbage collector: cannot monitor", "resource", r.gvr.String(), "err", err)
			continue
		}
		c.monitored[r.gvr] = informer
		added = true
	}
	return added
}

// kindOf is the kind the preferred version of gvr serves.
func (c *Controller) kindOf(gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for gvk, info := range c.kinds {
		if info.gvr == gvr {
			return gvk, true
		}
	}
	return schema.GroupVersionKind{}, false
}

func (c *Controller) informersSynced() []cache.InformerSynced {
	out := make([]cache.InformerSynced, 0, len(c.monitored))
	for _, inf := range c.monitored {
		out = append(out, inf.HasSynced)
	}
	return out
}

// stripMetadata keeps of each object what the collector reads, so that
// its metadata informers' caches hold no managedFields, labels or
// annotations.
func stripMetadata(obj any) (any, error) {
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
		return obj, nil
	}
	return asMetadata(obj), nil
}
