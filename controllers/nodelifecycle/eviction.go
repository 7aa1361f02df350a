package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/corekube/corekube/controllers/record"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"math"
	"reflect"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The DisruptionTarget condition of pods evicted for a NoExecute taint.
const (
	reasonDeletionByTaintManager = "DeletionByTaintManager"
	messageDeletionByTaint       = "Taint manager: deleting due to NoExecute taint"
)

// evictor is kube's taint eviction controller: it deletes pods from nodes
// whose NoExecute taints they do not tolerate, at once or when their
// tolerationSeconds run out.
type evictor struct {
	c     *Controller
	queue workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// scheduled holds the pods due for eviction: since when (the time the
	// controller first saw they must go), and whether the deletion was made.
	scheduled map[string]*eviction
}

type eviction struct {
	uid   types.UID
	since time.Time
	done  bool
}

func newEvictor(c *Controller) *evictor {
	return &evictor{
		c: c,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "noexec_taint_pod", Clock: c.cfg.Clock, MetricsProvider: c.cfg.QueueMetrics}),
		scheduled: map[string]*eviction{},
	}
}

func (e *evictor) podChanged(obj any) {
	if pod, ok := obj.(*sharedinformers.Pod); ok && pod.Spec.NodeName != "" {
		e.queue.Add(pod.Namespace + "/" + pod.Name)
	}
}

func (e *evictor) podDeleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	e.mu.Lock()
	delete(e.scheduled, key)
	e.mu.Unlock()
}

// nodeChanged looks again at the pods of a node whose NoExecute taints changed.
func (e *evictor) nodeChanged(old, node *v1.Node) {
	var before []v1.Taint
	if old != nil {
		before = noExecuteTaints(old)
	}
	after := noExecuteTaints(node)
	if reflect.DeepEqual(before, after) {
		return
	}
	for _, pod := range e.c.podsOnNode(node.Name) {
		e.queue.Add(pod.Namespace + "/" + pod.Name)
	}
}

func noExecuteTaints(node *v1.Node) []v1.Taint {
	var out []v1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == v1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// process decides about one pod (kube's processPodOnNode).
func (e *evictor) process(ctx context.Context, key string) error {
	pod, exists := e.c.pods.GetByKey(key)
	if !exists {
		e.forget(key)
		return nil
	}
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		e.forget(key)
		return nil
	}
	node, err := e.c.nodes.Get(pod.Spec.NodeName)
	if err != nil {
		e.forget(key) // the node is gone: pod GC's business
		return nil
	}
	taints := noExecuteTaints(node)
	if len(taints) == 0 {
		e.cancel(pod, key)
		return nil
	}
	now := e.c.cfg.Clock.Now()
	tolerated, used := matchingTolerations(taints, pod.Spec.Tolerations)
	if !tolerated {
		return e.evict(ctx, pod, key, now)
	}
	wait := minTolerationTime(used)
	if wait < 0 {
		e.cancel(pod, key)
		return nil
	}
	e.mu.Lock()
	ev := e.scheduled[key]
	if ev == nil || ev.uid != pod.UID {
		ev = &eviction{uid: pod.UID, since: now}
		e.scheduled[key] = ev
	}
	since, done := ev.since, ev.done
	e.mu.Unlock()
	if done {
		return nil
	}
	if due := since.Add(wait); now.Before(due) {
		e.queue.AddAfter(key, due.Sub(now))
		return nil
	}
	return e.evict(ctx, pod, key, now)
}

// forget drops what is known of a pod's eviction, silently.
func (e *evictor) forget(key string) {
	e.mu.Lock()
	delete(e.scheduled, key)
	e.mu.Unlock()
}

// cancel drops a scheduled eviction, with kube's event when there was one.
func (e *evictor) cancel(pod *sharedinformers.Pod, key string) {
	e.mu.Lock()
	ev := e.scheduled[key]
	delete(e.scheduled, key)
	e.mu.Unlock()
	if ev != nil && !ev.done {
		e.c.events.Eventf(record.PodRef(pod), sourceEvictionController, v1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s", key)
	}
}

// evict marks the pod a disruption target and deletes it, gracefully, as
// kube's taint eviction controller does.
func (e *evictor) evict(ctx context.Context, pod *sharedinformers.Pod, key string, now time.Time) error {
	e.mu.Lock()
	ev := e.scheduled[key]
	if ev == nil || ev.uid != pod.UID {
		ev = &eviction{uid: pod.UID, since: now}
		e.scheduled[key] = ev
	}
	if ev.done {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	e.c.events.Eventf(record.PodRef(pod), sourceEvictionController, v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s", key)
	if !hasDisruptionTarget(pod) {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": pod.UID},
			"status": map[string]any{"conditions": []v1.PodCondition{{
				Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: reasonDeletionByTaintManager,
				Message: messageDeletionByTaint, LastTransitionTime: metav1.NewTime(now),
			}}},
		})
		if err != nil {
			return err
		}
		if _, err := e.c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("mark pod %s: %w", key, err)
		}
	}
	uid := pod.UID
	err := e.c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	e.c.log.Info("evicted pod for NoExecute taint", "pod", key, "node", pod.Spec.NodeName)
	e.mu.Lock()
	if ev := e.scheduled[key]; ev != nil && ev.uid == uid {
		ev.done = true
	}
	e.mu.Unlock()
	return nil
}

func hasDisruptionTarget(pod *sharedinformers.Pod) bool {
	c := pod.Condition(v1.DisruptionTarget)
	return c != nil && c.Status == v1.ConditionTrue && c.Reason == reasonDeletionByTaintManager
}

// matchingTolerations is kube's GetMatchingTolerations: whether every
// taint is tolerated, and the first toleration of each.
func matchingTolerations(taints []v1.Taint, tolerations []v1.Toleration) (bool, []v1.Toleration) {
	var used []v1.Toleration
	for i := range taints {
		found := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(&taints[i]) {
				used = append(used, tolerations[j])
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, used
}

// minTolerationTime is kube's getMinTolerationTime: the shortest
// tolerationSeconds, 0 for none or a non-positive one, -1 when no
// toleration is limited in time.
func minTolerationTime(tolerations []v1.Toleration) time.Duration {
	if len(tolerations) == 0 {
		return 0
	}
	best := int64(math.MaxInt64)
	for _, t := range tolerations {
		if t.TolerationSeconds == nil {
			continue
		}
		if *t.TolerationSeconds <= 0 {
			return 0
		}
		best = min(best, *t.TolerationSeconds)
	}
	if best == math.MaxInt64 {
		return -1
	}
	return time.Duration(best) * time.Second
}
