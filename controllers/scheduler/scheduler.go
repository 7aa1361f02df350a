package scheduler

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// nonTerminalPods is the pod informer's field selector: terminated pods
// hold no resources, and leaving the selection removes them from the cache.
const nonTerminalPods = "status.phase!=" + string(v1.PodSucceeded) + ",status.phase!=" + string(v1.PodFailed)

// Scheduler places pods on nodes. Create it with New or NewForConfig and
// run it with Start.
type Scheduler struct {
	client kubernetes.Interface
	cfg    Config
	log    *slog.Logger
	events *recorder

	mu      sync.Mutex
	cache   *nodeCache
	pending map[string]*podEntry // pods to place, by namespace/name
	waiting map[string]*podEntry // the pending pods parked or failing
	dirty   map[string]struct{}  // nodes that changed since the last move pass
	// nsLabels are the namespaces' labels, by name, for inter-pod
	// affinity's namespaceSelector.
	nsLabels map[string]map[string]string
	// dirtyEvent is kube's event label for the latest change in dirty
	// (scheduler_queue_incoming_pods_total).
	dirtyEvent string
	// scheduling scratch and round-robin state (scheduling goroutine, under mu)
	nextStart int
	tie       int
	feasible  []*nodeInfo
	failures  []failure
	buf       scoreBuf
	sim       nodeInfo // filterNode's copy of a node with nominated pods
	// preemptOffset rotates where preemption's dry run starts (kube
	// starts at a random node).
	preemptOffset int

	metrics *schedulerMetrics

	queue *podQueue
	// nominated are the pending pods nominated to a node by preemption,
	// by node: their requests count against pods of lower priority there.
	nominated map[string][]*podEntry
	// pdbs lists the PodDisruptionBudgets preemption tries not to violate.
	pdbs    policylisters.PodDisruptionBudgetLister
	moveCh  chan struct{}
	apiCh   chan func(context.Context)
	started worker.Once
	// warmMu guards warmed: the informers Warm started (and their stop),
	// which Start then uses instead of starting its own.
	warmMu sync.Mutex
	warmed *runningInformers
}

// runningInformers are the scheduler's running informers and how to stop them.
type runningInformers struct {
	stop func() // ends the informers and waits for their goroutines
}

// New returns a scheduler that talks to the API server through client.
// Its metrics go to cfg.Metrics; when they cannot be registered there (a
// second scheduler on one registry) it logs why and runs without.
func New(client kubernetes.Interface, cfg Config) *Scheduler {
	cfg = cfg.withDefaults()
	s := &Scheduler{
		client:    client,
		cfg:       cfg,
		log:       cfg.Logger.With("controller", "scheduler"),
		events:    newRecorder(client, cfg),
		cache:     newNodeCache(),
		pending:   map[string]*podEntry{},
		waiting:   map[string]*podEntry{},
		dirty:     map[string]struct{}{},
		nominated: map[string][]*podEntry{},
		nsLabels:  map[string]map[string]string{},
		moveCh:    make(chan struct{}, 1),
		apiCh:     make(chan func(context.Context), cfg.APIWorkers),
	}
	m, err := newSchedulerMetrics(s, cfg.Metrics)
	if err != nil {
		s.log.Error("scheduler metrics not registered", "err", err)
	}
	s.metrics = m
	return s
}

// NewForConfig returns a scheduler for the server restConfig points at. A
// config without a rate limit (QPS 0) gets 1000 QPS, burst 2000: placing
// 30,000 pods takes a binding and an event each.
func NewForConfig(restConfig *rest.Config, cfg Config) (*Scheduler, error) {
	rc := useragent.Config(restConfig, useragent.For(useragent.KubeScheduler, DefaultSchedulerName))
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 1000, 2000
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return New(client, cfg), nil
}

// Warm starts the scheduler's informers and waits until they have synced,
// without scheduling anything: a standby that is not (yet) the leader
// keeps its view of pods and nodes current, as kube-scheduler fills its
// caches before it runs for the lease, so that taking over costs no
// initial LIST. The informers run until ctx ends or Start (which uses
// them) returns. Calling it is optional; Start warms by itself.
func (s *Scheduler) Warm(ctx context.Context) error {
	s.warmMu.Lock()
	defer s.warmMu.Unlock()
	if s.warmed != nil {
		return nil
	}
	inf, err := s.startInformers(ctx)
	if err != nil {
		return err
	}
	s.warmed = inf
	return nil
}

// startInformers creates the queue, starts the pod and node informers
// with their handlers and waits for their first sync.
func (s *Scheduler) startInformers(ctx context.Context) (*runningInformers, error) {
	s.queue = newPodQueue(s.cfg.Clock)
	informerCtx, cancel := context.WithCancel(ctx)
	// The queue's forwarder ends with the informers when Start never
	// comes (a standby that stops warm).
	context.AfterFunc(informerCtx, s.queue.ShutDown)
	tweak := func(o *metav1.ListOptions) { o.FieldSelector = nonTerminalPods }
	podFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0,
		informers.WithTweakListOptions(tweak), informers.WithTransform(transformPod))
	// The pod informer has no namespace index (the factory's default):
	// nothing looks pods up by namespace, and the index costs a set entry
	// per pod.
	podInformer := podFactory.InformerFor(&v1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, tweak)
	})
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTransform(stripNode))
	nsFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTransform(stripNamespace))
	stop := func() {
		cancel()
		podFactory.Shutdown()
		nodeFactory.Shutdown()
		nsFactory.Shutdown()
		s.queue.ShutDown()
	}
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.onPod,
		UpdateFunc: func(_, obj any) { s.onPod(obj) },
		DeleteFunc: s.onPodDelete,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	nodeReg, err := nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.onNode,
		UpdateFunc: func(_, obj any) { s.onNode(obj) },
		DeleteFunc: s.onNodeDelete,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	nsReg, err := nsFactory.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.onNamespace,
		UpdateFunc: func(_, obj any) { s.onNamespace(obj) },
		DeleteFunc: s.onNamespaceDelete,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	// Preemption reads the budgets as kube's DefaultPreemption does, from
	// an informer: best effort, a budget a moment old is good enough.
	pdbInformer := nodeFactory.Policy().V1().PodDisruptionBudgets()
	s.pdbs = pdbInformer.Lister()
	pdbSynced := pdbInformer.Informer().HasSynced
	podFactory.Start(informerCtx.Done())
	nodeFactory.Start(informerCtx.Done())
	nsFactory.Start(informerCtx.Done())
	// The handlers must have seen every pod before the first decision, or
	// the per-node sums would be short.
	if !cache.WaitForCacheSync(informerCtx.Done(), podReg.HasSynced, nodeReg.HasSynced, nsReg.HasSynced, pdbSynced) {
		stop()
		return nil, ctx.Err()
	}
	return &runningInformers{stop: stop}, nil
}

// Start runs the scheduler until ctx ends. It returns nil when ctx ends
// and an error when it cannot start; it runs once.
func (s *Scheduler) Start(ctx context.Context) error {
	if err := s.started.Start("scheduler"); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	s.warmMu.Lock()
	inf := s.warmed
	s.warmed = nil
	s.warmMu.Unlock()
	if inf == nil {
		var err error
		if inf, err = s.startInformers(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}

	var wg sync.WaitGroup
	defer func() {
		cancel()
		s.queue.ShutDown()
		wg.Wait()
		inf.stop()
	}()
	s.log.Info("scheduler started", "name", s.cfg.SchedulerName)

	s.events.run(ctx, &wg)
	for range s.cfg.APIWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case call := <-s.apiCh:
					s.callAPI(ctx, call)
				}
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.runMover(ctx)
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		s.queue.ShutDown()
	}()

	for {
		key, shutdown := s.queue.get()
		if shutdown {
			return nil
		}
		s.tryScheduleOne(ctx, key)
	}
}

// tryScheduleOne is scheduleOne surviving a panic: it is logged with the pod,
// which is retried after its back-off as after a failed attempt.
func (s *Scheduler) tryScheduleOne(ctx context.Context, key string) {
	defer worker.Recover(s.log, "scheduler", key, func() { s.retryAfterPanic(key) })
	s.scheduleOne(ctx, key)
}

// retryAfterPanic requeues the pod key, still queued, with back-off.
func (s *Scheduler) retryAfterPanic(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.pending[key]
	if e == nil || e.state != stateQueued {
		return
	}
	e.attempts++
	e.lastFailure = s.cfg.Clock.Now()
	s.requeue(e, eventScheduleAttemptFailure)
}

// guarded runs a pass of a periodic loop, surviving a panic in it (logged;
// the next pass comes as scheduled).
func (s *Scheduler) guarded(loop string, pass func()) {
	defer worker.Recover(s.log, loop, nil, nil)
	pass()
}

// callAPI runs an API call of the workers, surviving a panic in it.
func (s *Scheduler) callAPI(ctx context.Context, call func(context.Context)) {
	defer worker.Recover(s.log, "scheduler-api", nil, nil)
	call(ctx)
}

// submit hands an API call to the workers.
func (s *Scheduler) submit(ctx context.Context, call func(context.Context)) {
	select {
	case s.apiCh <- call:
	case <-ctx.Done():
	}
}

// onPod handles an added or updated pod.
// The informer hands over an *assignedPod for a pod bound to a node
// (transformPod) and a stripped *v1.Pod for a pod waiting for one.
func (s *Scheduler) onPod(obj any) {
	var pod *v1.Pod
	switch o := obj.(type) {
	case *assignedPod:
		s.onBoundPod(o)
		return
	case *v1.Pod:
		if o.Spec.NodeName != "" {
			s.onBoundPod(newAssignedPod(o))
			return
		}
		pod = o
	default:
		return
	}
	key := pod.Namespace + "/" + pod.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	if pod.Spec.SchedulerName != s.cfg.SchedulerName || pod.DeletionTimestamp != nil {
		s.dropPending(key)
		return
	}
	e := s.pending[key]
	if e == nil || e.pod.UID != pod.UID {
		if e != nil {
			s.dropPending(key)
		}
		e = newPodEntry(key, pod)
		e.queuedAt = s.cfg.Clock.Now()
		s.pending[key] = e
		// A nomination survives a scheduler restart in the pod's status.
		s.nominate(e, pod.Status.NominatedNodeName)
		if gated(pod) {
			e.state = stateGated
			s.metrics.incomingPod(queueUnschedulable, eventPodAdd)
		} else {
			s.enqueue(e, 0)
			s.metrics.incomingPod(queueActive, eventPodAdd)
		}
		return
	}
	if reflect.DeepEqual(e.pod.Spec, pod.Spec) && reflect.DeepEqual(e.pod.Labels, pod.Labels) {
		// A status change (our own PodScheduled patch among them) does not
		// make the pod any easier to place.
		e.pod = pod
		return
	}
	e.setPod(pod)
	switch e.state {
	case stateGated:
		if !gated(pod) {
			e.state = stateQueued
			e.readyAt = time.Time{}
			s.enqueue(e, 0)
			s.metrics.incomingPod(queueActive, eventUnscheduledPodUpdate)
		}
	case stateParked:
		s.requeue(e, eventUnscheduledPodUpdate)
	case stateFailing:
		e.missed = true
	}
}

// onBoundPod handles an added or updated pod bound to a node.
func (s *Scheduler) onBoundPod(p *assignedPod) {
	key := p.ns + "/" + p.name
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropPending(key)
	known := s.cache.pods[key]
	isNew := known == nil || known.assumed
	relabelled := !isNew && !maps.Equal(known.labels, p.labels)
	left := s.cache.setPod(key, p)
	if left != "" {
		s.markDirty(left, eventAssignedPodUpdate)
	}
	// A pod arriving on a node, or changing its labels there, may let
	// a waiting pod with inter-pod affinity or spreading fit (kube's
	// AssignedPodAdd and AssignedPodUpdate); only worth a move pass
	// when pods wait.
	if len(s.waiting) > 0 {
		switch {
		case isNew:
			s.markDirty(p.node, eventAssignedPodAdd)
		case relabelled:
			s.markDirty(p.node, eventAssignedPodUpdate)
		}
	}
}

func gated(pod *v1.Pod) bool { return len(pod.Spec.SchedulingGates) > 0 }

// onPodDelete handles a pod that is gone (or terminated: it left the
// informer's selection).
func (s *Scheduler) onPodDelete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropPending(key)
	if node := s.cache.removePod(key); node != "" {
		s.markDirty(node, eventAssignedPodDelete)
	}
}

func (s *Scheduler) onNode(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var old *v1.Node
	if ni := s.cache.nodes[node.Name]; ni != nil {
		old = ni.node
	}
	if s.cache.setNode(node) {
		s.markDirty(node.Name, nodeEvent(old, node))
	}
}

func (s *Scheduler) onNodeDelete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache.deleteNode(key)
}

func (s *Scheduler) onNamespace(obj any) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nsLabels[ns.Name] = ns.Labels
}

func (s *Scheduler) onNamespaceDelete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nsLabels, key)
}

// dropPending forgets a pod that no longer waits; s.mu is held.
func (s *Scheduler) dropPending(key string) {
	if e := s.pending[key]; e != nil {
		s.nominate(e, "")
	}
	delete(s.pending, key)
	delete(s.waiting, key)
}

// enqueue hands e to the queue, after delay; s.mu is held. Its place is
// kube's: by priority, then by when it was (re)queued, which for a pod
// that failed is its last failure.
func (s *Scheduler) enqueue(e *podEntry, delay time.Duration) {
	at := e.queuedAt
	if e.attempts > 0 {
		at = e.lastFailure
	}
	s.queue.add(queueItem{key: e.key, priority: e.priority, queuedAt: at}, delay)
}

// nominate records node ("" for none) as e's nominated node; s.mu is held.
func (s *Scheduler) nominate(e *podEntry, node string) {
	if e.nominated == node {
		return
	}
	if old := e.nominated; old != "" {
		list := s.nominated[old]
		for i, o := range list {
			if o == e {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.nominated, old)
		} else {
			s.nominated[old] = list
		}
	}
	e.nominated = node
	if node != "" {
		s.nominated[node] = append(s.nominated[node], e)
	}
}

// markDirty notes that node changed (kube's event label event) so parked
// pods may now fit it; s.mu is held.
func (s *Scheduler) markDirty(node, event string) {
	s.dirty[node] = struct{}{}
	s.dirtyEvent = event
	select {
	case s.moveCh <- struct{}{}:
	default:
	}
}

// backoff is how long a pod that failed attempts times waits between
// attempts: InitialBackoff doubling up to MaxBackoff.
func (s *Scheduler) backoff(attempts int) time.Duration {
	d := s.cfg.InitialBackoff
	for i := 1; i < attempts && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// requeue puts a parked or failing pod back in the queue once its back-off
// (counted from its last failure) is over, because of event (kube's
// label); s.mu is held.
func (s *Scheduler) requeue(e *podEntry, event string) {
	e.state = stateQueued
	e.missed = false
	delete(s.waiting, e.key)
	delay := time.Duration(0)
	if e.attempts > 0 {
		delay = e.lastFailure.Add(s.backoff(e.attempts)).Sub(s.cfg.Clock.Now())
	}
	queue := queueActive
	if delay > 0 {
		queue = queueBackoff
		e.readyAt = s.cfg.Clock.Now().Add(delay)
	} else {
		e.readyAt = time.Time{}
	}
	s.metrics.incomingPod(queue, event)
	s.enqueue(e, delay)
}

// runMover retries parked pods when nodes change and, every FlushInterval,
// those parked longer than MaxUnschedulableDuration.
func (s *Scheduler) runMover(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.moveCh:
			s.guarded("scheduler-mover", s.moveForDirtyNodes)
		case <-t.C():
			s.guarded("scheduler-flush", s.flushParked)
		}
	}
}

// moveForDirtyNodes is kube's queueing hint reduced to its essence: a
// waiting pod is retried when one of the changed nodes now passes every
// filter for it.
func (s *Scheduler) moveForDirtyNodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirty) == 0 {
		return
	}
	nodes := make([]*nodeInfo, 0, len(s.dirty))
	for name := range s.dirty {
		if ni := s.cache.nodes[name]; ni != nil && ni.node != nil {
			nodes = append(nodes, ni)
		}
	}
	clear(s.dirty)
	event := s.dirtyEvent
	for _, e := range s.waiting {
		// The node filters alone are the hint: a pod whose placement
		// depends on other pods (spreading, affinity) is retried when a
		// changed node passes them, as a pod coming or going there may be
		// what it waited for.
		for _, ni := range nodes {
			if f := filter(e, ni, nil); f.kind == fits {
				if e.state == stateParked {
					s.requeue(e, event)
				} else {
					e.missed = true
				}
				break
			}
		}
	}
}

func (s *Scheduler) flushParked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock.Now()
	for _, e := range s.waiting {
		if e.state == stateParked && now.Sub(e.parkedAt) >= s.cfg.MaxUnschedulableDuration {
			s.requeue(e, eventUnschedulableTimeout)
		}
	}
}
