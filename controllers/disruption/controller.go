package disruption

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/controllers/record"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller keeps PodDisruptionBudget status current. It is an ordinary
// API client: informers on pods and budgets, status written through
// poddisruptionbudgets/status.
type Controller struct {
	client  kubernetes.Interface
	cfg     Config
	log     *slog.Logger
	events  *record.Recorder
	started worker.Once

	pods       sharedinformers.PodLister
	pdbs       policylisters.PodDisruptionBudgetLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string] // budget keys
	staleQueue workqueue.TypedRateLimitingInterface[string] // pod keys
}

// NewForConfig returns New with a client of its own (user
// agent disruption-controller unless set) for the server restConfig points
// at.
func NewForConfig(restConfig *rest.Config, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	client, err := newClient(restConfig)
	if err != nil {
		return nil, err
	}
	return New(client, factory, cfg)
}

func newClient(restConfig *rest.Config) (kubernetes.Interface, error) {
	client, err := useragent.NewClient(restConfig, useragent.For(useragent.KubeControllerManager, "disruption-controller"))
	if err != nil {
		return nil, fmt.Errorf("disruption controller: %w", err)
	}
	return client, nil
}

// New returns a controller that reads pods and budgets from
// factory's informers and writes through client. It registers its event
// handlers there: factory's owner starts the factory after this and shuts
// it down after Start returned, and Start must run (its queues live until
// it returns). factory's transform must keep what the controller reads of
// pods (sharedinformers.Transform does).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("controller", "disruption")
	c := &Controller{
		client: client,
		cfg:    cfg,
		log:    log,
		events: record.New(client, cfg.Clock, log, record.Options{QueueSize: cfg.EventQueueSize}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "disruption", Clock: cfg.Clock, MetricsProvider: cfg.QueueMetrics}),
		staleQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "stale_pod_disruption", Clock: cfg.Clock, MetricsProvider: cfg.QueueMetrics}),
	}
	if err := c.register(factory); err != nil {
		c.shutDownQueues()
		return nil, fmt.Errorf("disruption controller: %w", err)
	}
	return c, nil
}

func (c *Controller) shutDownQueues() {
	c.queue.ShutDown()
	c.staleQueue.ShutDown()
}

// register takes the pod and budget informers from factory and adds the
// event handlers.
func (c *Controller) register(factory informers.SharedInformerFactory) error {
	podInformer, pods := sharedinformers.PodsOf(factory)
	pdbInformer := factory.Policy().V1().PodDisruptionBudgets()
	c.pods = pods
	c.pdbs = pdbInformer.Lister()
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: c.podDeleted,
	})
	if err != nil {
		return err
	}
	pdbReg, err := pdbInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueBudget,
		UpdateFunc: func(_, obj any) { c.enqueueBudget(obj) },
		DeleteFunc: c.enqueueBudget,
	})
	if err != nil {
		return err
	}
	c.synced = []cache.InformerSynced{podReg.HasSynced, pdbReg.HasSynced}
	return nil
}

// Start runs the controller until ctx ends, once its informers have
// synced; it returns nil then, and an error if it cannot start. Every
// goroutine it starts has ended when it returns (the informers are the
// factory owner's). A Controller runs once.
func (c *Controller) Start(ctx context.Context) error {
	return c.started.Run(ctx, "disruption controller", c.shutDownQueues, c.run)
}

// run is Start's body, in the frame worker.Once.Run gives it.
func (c *Controller) run(ctx context.Context, wg *sync.WaitGroup) error {
	c.events.Run(ctx, wg)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil // ctx ended first
	}
	c.log.Info("disruption controller started")
	budgets := &worker.Loop[string]{Name: "disruption", Queue: c.queue, Workers: c.cfg.Workers, Log: c.log,
		Sync: worker.NoResult(c.sync), OnError: c.budgetFailed}
	stale := &worker.Loop[string]{Name: "stale_pod_disruption", Queue: c.staleQueue, Workers: 1, Log: c.log,
		Sync: worker.NoResult(c.syncStalePod), OnError: func(key string, err error) {
			c.log.Warn("resetting a stale DisruptionTarget condition failed, requeuing", "pod", key, "err", err)
		}}
	if err := budgets.Start(ctx, wg); err != nil {
		return fmt.Errorf("disruption controller: %w", err)
	}
	if err := stale.Start(ctx, wg); err != nil {
		return fmt.Errorf("disruption controller: %w", err)
	}
	if c.cfg.ResyncPeriod > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.resync(ctx)
		}()
	}
	<-ctx.Done()
	return nil
}

// resync enqueues every budget each ResyncPeriod until ctx ends. It is not
// the informers' resync: the shared factory has none, and client-go checks
// a handler's own resync period only as often as its factory's default, so
// AddEventHandlerWithResyncPeriod on it would never resync.
func (c *Controller) resync(ctx context.Context) {
	worker.Tick(ctx, c.cfg.Clock, c.log, "disruption-resync", c.cfg.ResyncPeriod, func(context.Context) {
		pdbs, err := c.pdbs.List(labels.Everything())
		if err != nil {
			return
		}
		for _, pdb := range pdbs {
			c.queue.Add(pdb.Namespace + "/" + pdb.Name)
		}
	})
}

func (c *Controller) enqueueBudget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
		c.queue.Add(pdb.Namespace + "/" + pdb.Name)
	}
}

// podChanged enqueues the budgets that select the pod now and, when its
// labels changed, those that selected it before; and schedules the reset
// of a stale DisruptionTarget condition.
func (c *Controller) podChanged(oldObj, obj any) {
	pod, ok := obj.(*sharedinformers.Pod)
	if !ok {
		return
	}
	c.enqueueBudgetsOf(pod, true)
	if old, ok := oldObj.(*sharedinformers.Pod); ok && !labels.Equals(old.Labels, pod.Labels) {
		c.enqueueBudgetsOf(old, false)
	}
	if stale, after := c.staleDisruptionCondition(pod.DeletionTimestamp, pod.Status.Phase, pod.Status.Conditions); stale {
		c.staleQueue.AddAfter(pod.Namespace+"/"+pod.Name, after)
	}
}

func (c *Controller) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*sharedinformers.Pod); ok {
		c.enqueueBudgetsOf(pod, false)
	}
}

// enqueueBudgetsOf enqueues every budget that selects pod. kube enqueues
// one of several and warns; corekube warns the same way but keeps every
// budget's status current.
func (c *Controller) enqueueBudgetsOf(pod *sharedinformers.Pod, warn bool) {
	pdbs, err := c.budgetsFor(pod)
	if err != nil || len(pdbs) == 0 {
		return
	}
	if len(pdbs) > 1 && warn {
		msg := fmt.Sprintf("Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
		c.log.Info(msg)
		c.events.Eventf(record.PodRef(pod), eventSource, v1.EventTypeWarning, "MultiplePodDisruptionBudgets", "%s", msg)
	}
	for _, pdb := range pdbs {
		c.queue.Add(pdb.Namespace + "/" + pdb.Name)
	}
}

// budgetsFor returns the budgets whose selector matches pod, by name.
func (c *Controller) budgetsFor(pod *sharedinformers.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	all, err := c.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range all {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// budgetFailed logs a failed budget sync before its retry.
func (c *Controller) budgetFailed(key string, err error) {
	if apierrors.IsConflict(err) {
		c.log.Debug("budget changed meanwhile, requeuing", "budget", key)
	} else {
		c.log.Warn("syncing budget failed, requeuing", "budget", key, "err", err)
	}
}

// sync brings the status of the budget key up to date. A conflict is
// returned for a requeue; any other failure writes the fail-safe status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbs.PodDisruptionBudgets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.trySync(ctx, pdb)
	if err == nil || apierrors.IsConflict(err) || ctx.Err() != nil {
		return err
	}
	c.log.Warn("computing budget status failed", "budget", key, "err", err)
	return c.failSafe(ctx, pdb, err)
}

func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	ref := pdbRef(pdb.Namespace, pdb.Name, pdb.UID, pdb.ResourceVersion)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		c.events.Eventf(ref, eventSource, v1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	pods := c.pods.ListNamespace(pdb.Namespace, sel)
	if len(pods) == 0 {
		c.events.Eventf(ref, eventSource, v1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, err := expectedAndDesired(&pdb.Spec, len(pods))
	if err != nil {
		c.events.Eventf(ref, eventSource, v1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	now := c.cfg.Clock.Now()
	disrupted, expired, recheck := disruptedPods(pods, pdb.Status.DisruptedPods, now, c.cfg.DeletionTimeout)
	for _, pod := range expired {
		c.log.Info("pod was expected to be deleted but it wasn't", "pod", pod.Namespace+"/"+pod.Name, "budget", pdb.Namespace+"/"+pdb.Name)
		c.events.Eventf(record.PodRef(pod), eventSource, v1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
	}
	healthy := countHealthy(pods, disrupted, now, c.cfg.DeletionTimeout)
	if st, changed := newStatus(pdb, healthy, desired, expected, disrupted, now); changed {
		if err := c.writeStatus(ctx, pdb, st); err != nil {
			return err
		}
	}
	if recheck != nil {
		// Drop the entry when it times out.
		c.queue.AddAfter(pdb.Namespace+"/"+pdb.Name, recheck.Sub(now)+time.Millisecond)
	}
	return nil
}

// failSafe allows no disruption when the status cannot be computed: the
// eviction subresource then refuses rather than guesses.
func (c *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, cause error) error {
	st, changed := failSafeStatus(pdb, cause, c.cfg.Clock.Now())
	if !changed {
		return nil
	}
	return c.writeStatus(ctx, pdb, st)
}

// writeStatus writes st as the status of pdb as the controller read it:
// its resourceVersion makes a concurrent change (an eviction) a conflict.
func (c *Controller) writeStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, st policyv1.PodDisruptionBudgetStatus) error {
	out := pdb.DeepCopy()
	out.Status = st
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	return err
}
