package podgc

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config configures a Controller. Zero fields take kube's defaults.
type Config struct {
	// Logger receives the controller's logs; nil is slog.Default().
	Logger *slog.Logger
	// Clock drives the period and the quarantine; nil is the real clock.
	Clock clock.WithTicker
	// Period is how often pods are collected: 20s.
	Period time.Duration
	// Quarantine is how long a node must be missing before its pods go: 40s.
	Quarantine time.Duration
	// TerminatedPodThreshold is how many terminated pods are kept: 12500;
	// negative keeps them all (kube's 0).
	TerminatedPodThreshold int
	// Workers is how many deletions run at once: 20.
	Workers int
	// QueueMetrics gives the controller's workqueues kube's workqueue_*
	// metrics under kube's queue names (workqueuemetrics.For); nil: none.
	QueueMetrics workqueue.MetricsProvider
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Period <= 0 {
		c.Period = 20 * time.Second
	}
	if c.Quarantine <= 0 {
		c.Quarantine = 40 * time.Second
	}
	if c.TerminatedPodThreshold == 0 {
		c.TerminatedPodThreshold = 12500
	}
	if c.Workers <= 0 {
		c.Workers = 20
	}
	return c
}

// The DisruptionTarget condition of pods whose node is gone.
const (
	reasonDeletionByPodGC = "DeletionByPodGC"
	messageNodeGone       = "PodGC: node no longer exists"
)

// Controller collects pods. Create it with New or NewForConfig on the
// process's shared informer factory and run it with Start.
type Controller struct {
	client kubernetes.Interface
	cfg    Config
	log    *slog.Logger

	pods       sharedinformers.PodLister
	nodes      corelisters.NodeLister
	podSynced  cache.InformerSynced
	nodeSynced cache.InformerSynced

	// set by Start
	nodeQueue workqueue.TypedDelayingInterface[string]
	started   worker.Once
}

// New returns a controller that reads pods and nodes from factory's
// informers (all pods: unscheduled terminating pods are collected too) and
// writes through client. factory's owner starts the factory after New and
// shuts it down after Start returned; its transform must keep what pod GC
// reads (sharedinformers.Transform does: the pods are sharedinformers.Pods).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) *Controller {
	cfg = cfg.withDefaults()
	podInformer, pods := sharedinformers.PodsOf(factory)
	nodeInformer := factory.Core().V1().Nodes()
	return &Controller{
		client:     client,
		cfg:        cfg,
		log:        cfg.Logger.With("controller", "podgc"),
		pods:       pods,
		nodes:      nodeInformer.Lister(),
		podSynced:  podInformer.HasSynced,
		nodeSynced: nodeInformer.Informer().HasSynced,
	}
}

// NewForConfig returns New with a client of its own (user agent
// pod-garbage-collector unless set) for the server restConfig points at.
func NewForConfig(restConfig *rest.Config, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	client, err := useragent.NewClient(restConfig, useragent.For(useragent.KubeControllerManager, "pod-garbage-collector"))
	if err != nil {
		return nil, fmt.Errorf("pod GC: %w", err)
	}
	return New(client, factory, cfg), nil
}

// Start runs the controller until ctx ends, once its informers have
// synced (the factory's owner starts them). It returns nil when ctx ends
// and an error when it cannot start; it runs once.
func (c *Controller) Start(ctx context.Context) error {
	if err := c.started.Start("pod GC"); err != nil {
		return err
	}
	c.nodeQueue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
		Name: "orphaned_pods_nodes", Clock: c.cfg.Clock, MetricsProvider: c.cfg.QueueMetrics})
	defer c.nodeQueue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.podSynced, c.nodeSynced) {
		return nil
	}
	c.log.Info("pod GC started", "period", c.cfg.Period, "quarantine", c.cfg.Quarantine, "terminatedPodThreshold", c.cfg.TerminatedPodThreshold)
	worker.Every(ctx, c.cfg.Clock, c.log, "podgc", c.cfg.Period, 0.1, c.gc)
	return nil
}

// gc is one pass, in kube's order.
func (c *Controller) gc(ctx context.Context) {
	pods := c.pods.List(labels.Everything())
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	if c.cfg.TerminatedPodThreshold > 0 {
		c.gcTerminated(ctx, pods)
	}
	c.gcTerminating(ctx, pods)
	c.gcOrphaned(ctx, pods, nodes)
	c.gcUnscheduledTerminating(ctx, pods)
}

// isTerminated is kube's isPodTerminated.
func isTerminated(pod *sharedinformers.Pod) bool {
	p := pod.Status.Phase
	return p != v1.PodPending && p != v1.PodRunning && p != v1.PodUnknown
}

// isEvicted is kube's eviction.PodIsEvicted.
func isEvicted(pod *sharedinformers.Pod) bool {
	return pod.Status.Phase == v1.PodFailed && pod.Status.Reason == "Evicted"
}

// sortForDeletion orders pods as kube's byEvictionAndCreationTimestamp:
// evicted first, then oldest, then by name.
func sortForDeletion(pods []*sharedinformers.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		if ei, ej := isEvicted(pods[i]), isEvicted(pods[j]); ei != ej {
			return ei
		}
		if pods[i].CreationTimestamp.Equal(&pods[j].CreationTimestamp) {
			return pods[i].Name < pods[j].Name
		}
		return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
	})
}

// gcTerminated deletes the terminated pods beyond the threshold.
func (c *Controller) gcTerminated(ctx context.Context, pods []*sharedinformers.Pod) {
	var terminated []*sharedinformers.Pod
	for _, pod := range pods {
		if isTerminated(pod) {
			terminated = append(terminated, pod)
		}
	}
	excess := len(terminated) - c.cfg.TerminatedPodThreshold
	if excess <= 0 {
		return
	}
	c.log.Info("garbage collecting terminated pods", "count", excess)
	sortForDeletion(terminated)
	c.deleteAll(ctx, terminated[:excess], nil)
}

// gcTerminating deletes terminating pods on nodes that are not ready and
// tainted out-of-service (non-graceful node shutdown).
func (c *Controller) gcTerminating(ctx context.Context, pods []*sharedinformers.Pod) {
	var doomed []*sharedinformers.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			continue
		}
		node, err := c.nodes.Get(pod.Spec.NodeName)
		if err != nil {
			continue
		}
		if !isNodeReady(node) && hasTaintKey(node, v1.TaintNodeOutOfService) {
			doomed = append(doomed, pod)
		}
	}
	if len(doomed) == 0 {
		return
	}
	c.log.Info("garbage collecting terminating pods on out-of-service nodes", "count", len(doomed))
	sortForDeletion(doomed)
	c.deleteAll(ctx, doomed, nil)
}

// gcOrphaned deletes the pods of nodes that have been missing for the
// quarantine and are confirmed gone by a fresh read.
func (c *Controller) gcOrphaned(ctx context.Context, pods []*sharedinformers.Pod, nodes []*v1.Node) {
	existing := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		existing[node.Name] = true
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" && !existing[pod.Spec.NodeName] {
			c.nodeQueue.AddAfter(pod.Spec.NodeName, c.cfg.Quarantine)
		}
	}
	deleted := map[string]bool{}
	for c.nodeQueue.Len() > 0 {
		name, shutdown := c.nodeQueue.Get()
		if shutdown {
			return
		}
		if !existing[name] {
			_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				deleted[name] = true
			case err != nil && ctx.Err() == nil:
				c.log.Info("checking a missing node failed", "node", name, "err", err)
			}
		}
		c.nodeQueue.Done(name)
	}
	if len(deleted) == 0 {
		return
	}
	var orphans []*sharedinformers.Pod
	for _, pod := range pods {
		if deleted[pod.Spec.NodeName] {
			orphans = append(orphans, pod)
		}
	}
	c.log.Info("garbage collecting pods of deleted nodes", "count", len(orphans))
	c.deleteAll(ctx, orphans, &v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: reasonDeletionByPodGC, Message: messageNodeGone,
	})
}

// gcUnscheduledTerminating deletes terminating pods that never got a node.
func (c *Controller) gcUnscheduledTerminating(ctx context.Context, pods []*sharedinformers.Pod) {
	var doomed []*sharedinformers.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && pod.Spec.NodeName == "" {
			doomed = append(doomed, pod)
		}
	}
	if len(doomed) > 0 {
		c.deleteAll(ctx, doomed, nil)
	}
}

// deleteAll runs markFailedAndDelete on the pods, Workers at a time.
func (c *Controller) deleteAll(ctx context.Context, pods []*sharedinformers.Pod, cond *v1.PodCondition) {
	var failed atomic.Int32
	var mu sync.Mutex
	var firstErr error
	workqueue.ParallelizeUntil(ctx, c.cfg.Workers, len(pods), func(i int) {
		if err := c.markFailedAndDelete(ctx, pods[i], cond); err != nil && ctx.Err() == nil {
			failed.Add(1)
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	})
	if n := failed.Load(); n > 0 {
		c.log.Warn("pod GC could not delete pods", "count", n, "err", firstErr)
	}
}

// markFailedAndDelete is kube's markFailedAndDeletePodWithCondition: a
// pod not yet terminal is set Failed (kube's pods on a vanished node would
// otherwise stay Running forever), then force-deleted.
func (c *Controller) markFailedAndDelete(ctx context.Context, pod *sharedinformers.Pod, cond *v1.PodCondition) error {
	c.log.Info("force deleting pod", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	if pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		status := map[string]any{"phase": v1.PodFailed}
		if cond != nil {
			withTime := *cond
			withTime.LastTransitionTime = metav1.NewTime(c.cfg.Clock.Now())
			status["conditions"] = []v1.PodCondition{withTime}
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": status})
		if err != nil {
			return err
		}
		if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("fail pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	opts := *metav1.NewDeleteOptions(0)
	opts.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
	if err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func isNodeReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func hasTaintKey(node *v1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
