package agent

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/agent/pleg"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Agent runs the node agents of one process.
type Agent struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	clock  clock.WithTicker
	host   hostInfo

	nodes  []*node
	byName map[string]*node

	// kubelet is the kubelet API server; set by Run before the nodes
	// register, as they advertise its URL and port, and before
	// kubeletReady is closed (tests wait for it).
	kubelet      *kubeletServer
	kubeletReady chan struct{}

	// podStore is the pod informer's cache (this process's nodes' pods);
	// set by Run.
	podStore cache.Store

	// nodeLister reads the agent's Nodes as the node informer has them
	// (labels and taints for pod admission); set by Run.
	nodeLister corelisters.NodeLister

	plegEvents chan *pleg.PodLifecycleEvent
	events     *eventRecorder

	podQueue  workqueue.TypedRateLimitingInterface[types.UID]
	nodeQueue workqueue.TypedRateLimitingInterface[nodeTask]

	workersMu sync.Mutex
	workers   map[types.UID]*podWorker

	// podSyncs counts every pod sync (PodSyncs).
	podSyncs atomic.Uint64

	metrics *kubeletMetrics
	// tokenCache and accessCache keep the API server's answers to the
	// kubelet API's TokenReviews and SubjectAccessReviews (kubeletauth.go).
	tokenCache  *reviewCache[tokenAnswer]
	accessCache *reviewCache[bool]

	// thresholds are the eviction thresholds (Config.Eviction*).
	thresholds []threshold

	// clusterCA is Config.ClusterCA as the one string every pod's ca.crt
	// shares (a conversion per pod was a copy of the PEM per pod).
	clusterCA string

	// sharer is the pod informer's transform: the cached pods share what
	// they hold alike (transform.go).
	sharer *podSharer
}

// PodSyncs is the number of pod syncs the agent has run: a pod whose
// containers wait out a grace period, a back-off or a probe period should
// cost a few, not one per moment (benchmarks read it).
func (a *Agent) PodSyncs() uint64 { return a.podSyncs.Load() }

// taskKind is what a node task does.
type taskKind uint8

const (
	taskRegister taskKind = iota
	taskLease
	taskStatus
	// taskEviction: a round of the node's eviction manager.
	taskEviction
)

// nodeTask is an item of the node queue: one kind of work for one node.
type nodeTask struct {
	node int // index in Agent.nodes
	kind taskKind
}

// Run runs cfg.Nodes node agents against the API server restConfig points
// at until ctx ends.
func Run(ctx context.Context, restConfig *rest.Config, cfg Config) error {
	a, err := New(restConfig, cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// New builds the agents; Run starts them.
func New(restConfig *rest.Config, cfg Config) (*Agent, error) {
	cfg, err := cfg.complete()
	if err != nil {
		return nil, err
	}
	rc := useragent.Config(restConfig, useragent.For(useragent.Kubelet, "agent"))
	if rc.QPS == 0 {
		// Concurrency is bounded by the worker counts; client-go's default
		// of 5 requests per second would starve a thousand nodes.
		rc.QPS = -1
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if cfg.ClusterCA == nil {
		cfg.ClusterCA = rc.TLSClientConfig.CAData
		if cfg.ClusterCA == nil && rc.TLSClientConfig.CAFile != "" {
			if cfg.ClusterCA, err = os.ReadFile(rc.TLSClientConfig.CAFile); err != nil {
				return nil, fmt.Errorf("agent: read the cluster CA: %w", err)
			}
		}
	}
	a, err := newAgent(client, cfg)
	if err != nil || cfg.NodeConfig == nil {
		return a, err
	}
	for _, n := range a.nodes {
		nc, err := cfg.NodeConfig(n.name)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		nc = rest.CopyConfig(nc)
		nc.QPS, nc.UserAgent = rc.QPS, rc.UserAgent
		if n.client, err = kubernetes.NewForConfig(nc); err != nil {
			return nil, fmt.Errorf("agent: node %s client: %w", n.name, err)
		}
	}
	return a, nil
}

// clientFor is the client that writes as node name (the agent's when it
// is none of its nodes).
func (a *Agent) clientFor(name string) kubernetes.Interface {
	if n := a.byName[name]; n != nil {
		return n.client
	}
	return a.client
}

func newAgent(client kubernetes.Interface, cfg Config) (*Agent, error) {
	a := &Agent{
		cfg:     cfg,
		client:  client,
		log:     cfg.Logger,
		clock:   cfg.Clock,
		host:    readHostInfo(),
		byName:  map[string]*node{},
		workers: map[types.UID]*podWorker{},

		kubeletReady: make(chan struct{}),
		clusterCA:    string(cfg.ClusterCA),
		sharer:       newPodSharer(),
		// Room for a burst of events from every pod of every node.
		plegEvents: make(chan *pleg.PodLifecycleEvent, 1000+cfg.Nodes*110),
	}
	a.events = newEventRecorder(client, cfg.Clock, cfg.Logger, cfg.EventWorkers, cfg.DisableEvents)
	a.metrics = newKubeletMetrics()
	a.tokenCache = newReviewCache[tokenAnswer](time.Now)
	a.accessCache = newReviewCache[bool](time.Now)
	thresholds, err := cfg.thresholds()
	if err != nil {
		return nil, err
	}
	a.thresholds = thresholds
	podCIDRs, _ := netip.ParsePrefix(cfg.PodCIDRs)
	nodeIPs, _ := netip.ParsePrefix(cfg.NodeIPs)
	for i := 0; i < cfg.Nodes; i++ {
		n := a.newNode(cfg.FirstNode+i, podCIDRs, nodeIPs)
		a.nodes = append(a.nodes, n)
		a.byName[n.name] = n
	}
	if err := a.metrics.register(cfg.Metrics, stateCollector{a}); err != nil {
		return nil, err
	}
	return a, nil
}

// NodeNames lists the agent's nodes.
func (a *Agent) NodeNames() []string {
	out := make([]string, len(a.nodes))
	for i, n := range a.nodes {
		out[i] = n.name
	}
	return out
}

// Run registers the nodes, keeps their leases and status up to date and
// runs the pods bound to them, until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if len(a.nodes) == 0 {
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	a.podQueue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](200*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "pods", Clock: a.clock},
	)
	a.nodeQueue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[nodeTask](200*time.Millisecond, 7*time.Second),
		workqueue.TypedRateLimitingQueueConfig[nodeTask]{Name: "nodes", Clock: a.clock},
	)

	var wg sync.WaitGroup
	goFn := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	defer wg.Wait()
	defer a.podQueue.ShutDown()
	defer a.nodeQueue.ShutDown()
	defer cancel()

	kubelet, err := a.listenKubelet(ctx)
	if err != nil {
		return err
	}
	a.kubelet = kubelet
	close(a.kubeletReady)
	goFn(func() { kubelet.run(ctx) })
	a.log.Info("kubelet API listening", "url", kubelet.url, "port", kubelet.port)

	goFn(func() { a.events.run(ctx) })

	// One relist before registering, so nodes register Ready.
	for _, n := range a.nodes {
		n.pleg.Relist(ctx)
	}
	goFn(func() { a.relistLoop(ctx) })
	goFn(func() { a.dispatchPLEGEvents(ctx) })

	for i := range a.nodes {
		a.nodeQueue.Add(nodeTask{node: i, kind: taskRegister})
	}
	nodeLoop := &worker.Loop[nodeTask]{Name: "nodes", Queue: a.nodeQueue, Workers: a.cfg.NodeWorkers, Log: a.log,
		Sync: a.syncNodeTask, OnError: a.nodeTaskFailed}
	if err := nodeLoop.Start(ctx, &wg); err != nil {
		return fmt.Errorf("agent: %w", err)
	}

	// One pod informer for all nodes: every bound pod, kept when its node
	// is one of ours. (Per-node watches would cost a connection, a
	// reflector and a decoder per node.) Several processes share the
	// nodes of a large cluster (--first-node): each drops the others' pods
	// as they arrive, so its cache holds its own nodes' pods, not the
	// cluster's.
	selector := fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	if len(a.nodes) == 1 {
		selector = fields.OneTermEqualSelector("spec.nodeName", a.nodes[0].name).String()
	}
	podInformer := cache.NewSharedIndexInformer(ownedListWatch(ctx, selector,
		func(ctx context.Context, o metav1.ListOptions) (*v1.PodList, error) {
			return a.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		func(l *v1.PodList) *[]v1.Pod { return &l.Items },
		func(p *v1.Pod) bool { return a.byName[p.Spec.NodeName] != nil },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return a.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		}), &v1.Pod{}, 0, cache.Indexers{})
	if err := podInformer.SetTransform(a.sharer.podTransform); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.podChanged(obj) },
		UpdateFunc: func(_, obj any) { a.podChanged(obj) },
		DeleteFunc: func(obj any) { a.podRemoved(obj) },
	}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	// The Nodes, as the kubelet's node informer (its own Node): what pod
	// admission checks pods against. Other processes' nodes are dropped.
	nodeSelector := fields.Everything().String()
	if len(a.nodes) == 1 {
		nodeSelector = fields.OneTermEqualSelector("metadata.name", a.nodes[0].name).String()
	}
	nodeInformer := cache.NewSharedIndexInformer(ownedListWatch(ctx, nodeSelector,
		func(ctx context.Context, o metav1.ListOptions) (*v1.NodeList, error) {
			return a.client.CoreV1().Nodes().List(ctx, o)
		},
		func(l *v1.NodeList) *[]v1.Node { return &l.Items },
		func(n *v1.Node) bool { return a.byName[n.Name] != nil },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return a.client.CoreV1().Nodes().Watch(ctx, o)
		}), &v1.Node{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := nodeInformer.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.nodeLister = corelisters.NewNodeLister(nodeInformer.GetIndexer())

	a.podStore = podInformer.GetStore()
	goFn(func() { podInformer.Run(ctx.Done()) })
	goFn(func() { nodeInformer.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, nodeInformer.HasSynced) {
		return nil
	}
	// Before the first sync: the pods this node ran before a restart are
	// adopted, not started again.
	var pods []*v1.Pod
	for _, obj := range podInformer.GetStore().List() {
		if pod, ok := obj.(*v1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	a.adoptPods(ctx, pods)
	podLoop := &worker.Loop[types.UID]{Name: "pods", Queue: a.podQueue, Workers: a.cfg.PodWorkers, Log: a.log,
		Sync: a.syncPodTask, OnError: podTaskFailed}
	if err := podLoop.Start(ctx, &wg); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.log.Info("node agents running", "nodes", len(a.nodes), "first", a.nodes[0].name)
	<-ctx.Done()
	return nil
}

// relistLoop relists every node's runtime each RelistPeriod, from one
// goroutine for all nodes.
func (a *Agent) relistLoop(ctx context.Context) {
	worker.Tick(ctx, a.clock, a.log, "relist", a.cfg.RelistPeriod, func(ctx context.Context) {
		for _, n := range a.nodes {
			n.pleg.Relist(ctx)
		}
	})
}

// dispatchPLEGEvents wakes the worker of each pod the PLEG reports on
// (ContainerRemoved is not worth a sync, as in the kubelet).
func (a *Agent) dispatchPLEGEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-a.plegEvents:
			if e.Type == pleg.ContainerRemoved {
				continue
			}
			a.podQueue.Add(e.ID)
		}
	}
}

// syncNodeTask runs a node task: registration, then lease renewals and
// status updates, each rescheduling itself.
func (a *Agent) syncNodeTask(ctx context.Context, task nodeTask) (worker.Result, error) {
	n := a.nodes[task.node]
	var err error
	var next time.Duration
	switch task.kind {
	case taskRegister:
		if err = n.register(ctx); err == nil {
			a.nodeQueue.Add(nodeTask{node: task.node, kind: taskLease})
			// Spread the status checks of many nodes over one period.
			a.nodeQueue.AddAfter(nodeTask{node: task.node, kind: taskStatus},
				time.Duration(rand.Int64N(int64(a.cfg.NodeStatusUpdateFrequency))))
			a.nodeQueue.AddAfter(nodeTask{node: task.node, kind: taskEviction},
				time.Duration(rand.Int64N(int64(a.cfg.EvictionMonitoringPeriod))))
		}
	case taskLease:
		err = n.renewLease(ctx)
		// The kubelet's lease controller: renew interval with 4% jitter.
		next = a.cfg.LeaseRenewInterval + time.Duration(rand.Float64()*0.04*float64(a.cfg.LeaseRenewInterval))
	case taskStatus:
		err = n.updateStatus(ctx)
		next = a.cfg.NodeStatusUpdateFrequency
	case taskEviction:
		err = n.synchronize()
		next = a.cfg.EvictionMonitoringPeriod
	}
	if err != nil || next <= 0 {
		return worker.Result{}, err
	}
	return worker.After(next), nil
}

func (a *Agent) nodeTaskFailed(task nodeTask, err error) {
	a.log.Warn("node task failed, retrying", "node", a.nodes[task.node].name, "task", task.kind, "err", err)
}

// podChanged records the newest state of a pod bound to one of our nodes
// and wakes its worker.
func (a *Agent) podChanged(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	n := a.byName[pod.Spec.NodeName]
	if n == nil {
		return
	}
	a.workersMu.Lock()
	w, ok := a.workers[pod.UID]
	if !ok {
		w = newPodWorker(pod.UID, n)
		w.firstSeen = a.clock.Now()
		a.workers[pod.UID] = w
	}
	a.workersMu.Unlock()
	w.setPod(pod, true)
	w.updated.Store(true)
	a.observePodOnWatch(w, pod)
	a.podQueue.Add(pod.UID)
}

// podRemoved: the pod is gone from the API (deleted by the agent after
// termination, or force-deleted); its worker cleans up what still runs.
func (a *Agent) podRemoved(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	a.workersMu.Lock()
	w, ok := a.workers[pod.UID]
	a.workersMu.Unlock()
	if !ok {
		return
	}
	w.setRemoved()
	a.podQueue.Add(pod.UID)
}

func (a *Agent) worker(uid types.UID) *podWorker {
	a.workersMu.Lock()
	defer a.workersMu.Unlock()
	return a.workers[uid]
}

func (a *Agent) forget(uid types.UID) {
	a.workersMu.Lock()
	defer a.workersMu.Unlock()
	delete(a.workers, uid)
}

// syncPodTask syncs the pod uid from the queue; the queue never hands the
// same pod to two workers at once, so a pod's worker state needs no lock
// of its own beyond what the informer handlers write.
func (a *Agent) syncPodTask(ctx context.Context, uid types.UID) (worker.Result, error) {
	w := a.worker(uid)
	if w == nil {
		return worker.Result{}, nil
	}
	w.syncs.Add(1)
	a.podSyncs.Add(1)
	op := w.nextOp()
	start := time.Now()
	wake, err := a.syncPod(ctx, w)
	if w.node != nil {
		w.node.metrics.podWorker[op].get().Observe(time.Since(start).Seconds())
	}
	if err != nil {
		// Logged here, where the pod's key is known; errRequeue asks for
		// a retry without a failure.
		if ctx.Err() == nil && !errors.Is(err, errRequeue) {
			a.log.Warn("pod sync failed, retrying", "pod", w.key(), "err", err)
		}
		return worker.Result{}, err
	}
	if wake.IsZero() {
		return worker.Result{}, nil
	}
	return worker.After(wake.Sub(a.clock.Now())), nil
}

// podTaskFailed: syncPodTask logged the failure already.
func podTaskFailed(types.UID, error) {}

// errRequeue asks for another sync soon without logging a failure.
var errRequeue = errors.New("requeue")

// newerOrSame reports whether resourceVersion a is not older than b (the
// server's resourceVersions are etcd revisions; other servers' opaque
// strings count as newer).
func newerOrSame(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	return x >= y
}
