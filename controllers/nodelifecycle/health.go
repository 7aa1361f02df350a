package nodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/corekube/corekube/controllers/record"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// healthUpdateRetries is how often a node's status update is tried, each
// time on a freshly read node (kube's nodeStatusUpdateRetry).
const healthUpdateRetries = 5

// The conditions a node whose kubelet went quiet turns Unknown.
var monitoredConditions = []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}

// nodeHealth is what the controller last saw of a node (kube's
// nodeHealthData): probeTimestamp is when it last saw the kubelet alive.
type nodeHealth struct {
	ready                    *v1.NodeCondition // the Ready condition as saved; nil if none
	probeTimestamp           time.Time
	readyTransitionTimestamp time.Time
	leaseRenew               *metav1.MicroTime
}

func readyCondition(status *v1.NodeStatus) *v1.NodeCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == v1.NodeReady {
			return &status.Conditions[i]
		}
	}
	return nil
}

// monitor is one pass of kube's monitorNodeHealth.
func (c *Controller) monitor(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	c.observeNodes(ctx, nodes)

	zoneConditions := map[string][]*v1.NodeCondition{}
	var zoneMu sync.Mutex
	workqueue.ParallelizeUntil(ctx, c.cfg.Workers, len(nodes), func(i int) {
		node := nodes[i].DeepCopy()
		observed, current, err := c.updateHealth(ctx, node)
		for attempt := 1; err != nil && attempt < healthUpdateRetries && ctx.Err() == nil; attempt++ {
			var getErr error
			node, getErr = c.client.CoreV1().Nodes().Get(ctx, nodes[i].Name, metav1.GetOptions{})
			if getErr != nil {
				err = getErr
				break
			}
			observed, current, err = c.updateHealth(ctx, node)
		}
		if err != nil {
			if ctx.Err() == nil && !apierrors.IsNotFound(err) {
				c.log.Warn("updating node health failed; no pods will be evicted", "node", nodes[i].Name, "err", err)
			}
			return
		}
		if _, excluded := node.Labels[labelExcludeDisruption]; !excluded {
			zone := zoneKey(node)
			zoneMu.Lock()
			zoneConditions[zone] = append(zoneConditions[zone], current)
			zoneMu.Unlock()
		}
		if current == nil {
			return
		}
		// As kube, by the condition as found: a node this pass turned
		// Unknown is tainted on the next, after handleDisruption has seen
		// its zone's state.
		c.processTaintBasedEviction(ctx, node, &observed)
		c.mu.Lock()
		retry := c.retryPods[node.Name]
		c.mu.Unlock()
		becameNotReady := current.Status != v1.ConditionTrue && observed.Status == v1.ConditionTrue
		if becameNotReady {
			c.events.Eventf(record.NodeRef(node), sourceNodeController, v1.EventTypeNormal, "NodeNotReady", "Node %s status is now: %s", node.Name, "NodeNotReady")
		}
		if becameNotReady || (retry && current.Status != v1.ConditionTrue) {
			if err := c.markPodsNotReady(ctx, node.Name); err != nil {
				c.log.Info("marking pods not ready failed, will retry", "node", node.Name, "err", err)
				c.mu.Lock()
				c.retryPods[node.Name] = true
				c.mu.Unlock()
				return
			}
		}
		c.mu.Lock()
		delete(c.retryPods, node.Name)
		c.mu.Unlock()
	})
	c.handleDisruption(ctx, zoneConditions, nodes)
}

// observeNodes records nodes the monitor sees for the first time or no
// longer sees, as kube's classifyNodes and what follows it.
func (c *Controller) observeNodes(ctx context.Context, nodes []*v1.Node) {
	var added, deleted []*v1.Node
	c.mu.Lock()
	seen := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		seen[node.Name] = true
		if c.known[node.Name] == nil {
			added = append(added, node)
			c.known[node.Name] = node
		}
		zone := zoneKey(node)
		if c.tainters[zone] == nil {
			c.tainters[zone] = newZoneTainter(c.cfg.EvictionRate, c.cfg.Clock)
			c.zoneStates[zone] = stateInitial
		}
	}
	for name, node := range c.known {
		if !seen[name] {
			deleted = append(deleted, node)
			delete(c.known, name)
			delete(c.health, name)
			delete(c.retryPods, name)
			if z := c.tainters[zoneKey(node)]; z != nil {
				z.remove(name)
			}
		}
	}
	c.mu.Unlock()
	for _, node := range added {
		c.events.Eventf(record.NodeRef(node), sourceNodeController, v1.EventTypeNormal, "RegisteredNode", "Node %s event: Registered Node %s in Controller", node.Name, node.Name)
		if err := c.markNodeAsReachable(ctx, node); err != nil && ctx.Err() == nil {
			c.log.Info("removing NoExecute taints failed", "node", node.Name, "err", err)
		}
	}
	for _, node := range deleted {
		c.events.Eventf(record.NodeRef(node), sourceNodeController, v1.EventTypeNormal, "RemovingNode", "Node %s event: Removing Node %s from Controller", node.Name, node.Name)
	}
}

// updateHealth is kube's tryUpdateNodeHealth: it notes whether the
// kubelet showed life (a new heartbeat in Ready, a renewed lease) and,
// when it did not for the grace period, turns the node's conditions
// Unknown. node is the caller's copy and is modified. observed is the
// Ready condition as found, current as left.
func (c *Controller) updateHealth(ctx context.Context, node *v1.Node) (observed v1.NodeCondition, current *v1.NodeCondition, err error) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	h := c.health[node.Name]
	c.mu.Unlock()

	grace := c.cfg.GracePeriod
	cur := readyCondition(&node.Status)
	if h != nil {
		copied := *h
		h = &copied
	}
	if cur == nil {
		// Never posted: a fake condition as of the node's creation.
		observed = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: node.CreationTimestamp}
		grace = c.cfg.StartupGracePeriod
		if h != nil {
			h.ready = nil
		} else {
			h = &nodeHealth{probeTimestamp: node.CreationTimestamp.Time, readyTransitionTimestamp: node.CreationTimestamp.Time}
		}
	} else {
		observed = *cur
	}

	var saved *v1.NodeCondition
	var savedLease *metav1.MicroTime
	if h != nil {
		saved, savedLease = h.ready, h.leaseRenew
	}
	fresh := func(transition time.Time) *nodeHealth {
		return &nodeHealth{ready: cur.DeepCopy(), probeTimestamp: now, readyTransitionTimestamp: transition, leaseRenew: savedLease}
	}
	switch {
	case h == nil:
		h = fresh(now)
	case saved == nil && cur != nil:
		// Seen with a Ready condition for the first time (or after a restart).
		h = fresh(now)
	case saved != nil && cur == nil:
		h = fresh(now)
	case saved != nil && cur != nil && !saved.LastHeartbeatTime.Equal(&cur.LastHeartbeatTime):
		// A new heartbeat; a new transition time means Ready changed.
		transition := h.readyTransitionTimestamp
		if !saved.LastTransitionTime.Equal(&cur.LastTransitionTime) {
			transition = now
		}
		h = fresh(transition)
	}
	// A renewed lease is life too, even from a kubelet that never posted
	// status.
	if lease, err := c.leases.Leases(v1.NamespaceNodeLease).Get(node.Name); err == nil && lease.Spec.RenewTime != nil &&
		(savedLease == nil || savedLease.Before(lease.Spec.RenewTime)) {
		h.leaseRenew = lease.Spec.RenewTime.DeepCopy()
		h.probeTimestamp = now
	}
	c.mu.Lock()
	c.health[node.Name] = h
	c.mu.Unlock()

	current = cur
	if !now.After(h.probeTimestamp.Add(grace)) {
		return observed, current, nil
	}
	transition := metav1.NewTime(now)
	for _, t := range monitoredConditions {
		found := false
		for i := range node.Status.Conditions {
			cond := &node.Status.Conditions[i]
			if cond.Type != t {
				continue
			}
			found = true
			if cond.Status != v1.ConditionUnknown {
				cond.Status = v1.ConditionUnknown
				cond.Reason = "NodeStatusUnknown"
				cond.Message = "Kubelet stopped posting node status."
				cond.LastTransitionTime = transition
			}
		}
		if !found {
			node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{
				Type: t, Status: v1.ConditionUnknown, Reason: "NodeStatusNeverUpdated",
				Message: "Kubelet never posted node status.", LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: transition,
			})
		}
	}
	current = readyCondition(&node.Status)
	if apiequality.Semantic.DeepEqual(current, &observed) {
		return observed, current, nil
	}
	updated, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return observed, current, err
	}
	*node = *updated
	current = readyCondition(&node.Status)
	c.mu.Lock()
	c.health[node.Name] = &nodeHealth{ready: current.DeepCopy(), probeTimestamp: h.probeTimestamp, readyTransitionTimestamp: now, leaseRenew: h.leaseRenew}
	c.mu.Unlock()
	c.log.Info("node stopped posting status", "node", node.Name, "ready", current.Status)
	return observed, current, nil
}

// markPodsNotReady is kube's MarkPodsNotReady: the Ready condition of every
// pod on the node turns False (its reason and message stay), with a
// NodeNotReady event for each.
func (c *Controller) markPodsNotReady(ctx context.Context, nodeName string) error {
	var errs []error
	for _, pod := range c.podsOnNode(nodeName) {
		ready := pod.Condition(v1.PodReady)
		if ready == nil || ready.Status == v1.ConditionFalse {
			continue
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": pod.UID},
			"status": map[string]any{"conditions": []map[string]any{{
				"type": v1.PodReady, "status": v1.ConditionFalse, "lastTransitionTime": metav1.NewTime(c.cfg.Clock.Now()),
			}}},
		})
		if err != nil {
			return err
		}
		if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		c.events.Eventf(record.PodRef(pod), sourceNodeController, v1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return errors.Join(errs...)
}

// processTaintBasedEviction queues a not-ready node for its NoExecute
// taint, swaps not-ready and unreachable at once when the Ready status
// changes between False and Unknown, and untaints a Ready node.
func (c *Controller) processTaintBasedEviction(ctx context.Context, node *v1.Node, ready *v1.NodeCondition) {
	var err error
	switch ready.Status {
	case v1.ConditionFalse:
		if hasTaint(node.Spec.Taints, &unreachableTaint) {
			err = c.swapTaints(ctx, node, []v1.Taint{notReadyTaint}, []v1.Taint{unreachableTaint})
		} else {
			c.markNodeForTainting(node, v1.ConditionFalse)
		}
	case v1.ConditionUnknown:
		if hasTaint(node.Spec.Taints, &notReadyTaint) {
			err = c.swapTaints(ctx, node, []v1.Taint{unreachableTaint}, []v1.Taint{notReadyTaint})
		} else {
			c.markNodeForTainting(node, v1.ConditionUnknown)
		}
	case v1.ConditionTrue:
		err = c.markNodeAsReachable(ctx, node)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Info("updating NoExecute taints failed", "node", node.Name, "err", err)
	}
}

func (c *Controller) markNodeForTainting(node *v1.Node, status v1.ConditionStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	z := c.tainters[zoneKey(node)]
	if z == nil {
		return
	}
	// A node that lost its taint (removed by hand) is queued again.
	if status == v1.ConditionFalse && !hasTaint(node.Spec.Taints, &notReadyTaint) ||
		status == v1.ConditionUnknown && !hasTaint(node.Spec.Taints, &unreachableTaint) {
		z.remove(node.Name)
	}
	z.add(node.Name)
}

// markNodeAsReachable removes the NoExecute taints and takes the node off
// its zone's queue.
func (c *Controller) markNodeAsReachable(ctx context.Context, node *v1.Node) error {
	if err := c.swapTaints(ctx, node, nil, []v1.Taint{unreachableTaint, notReadyTaint}); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if z := c.tainters[zoneKey(node)]; z != nil {
		z.remove(node.Name)
	}
	return nil
}

// noExecuteTaintingPass gives the queued nodes their NoExecute taint, as
// fast as each zone's rate allows (kube's doNoExecuteTaintingPass).
func (c *Controller) noExecuteTaintingPass(ctx context.Context) {
	type job struct {
		zone *zoneTainter
		name string
	}
	var jobs []job
	c.mu.Lock()
	for _, z := range c.tainters {
		for _, name := range z.next() {
			jobs = append(jobs, job{z, name})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		node, err := c.nodes.Get(j.name)
		if err != nil {
			continue // deleted
		}
		ready := readyCondition(&node.Status)
		var add, remove v1.Taint
		switch {
		case ready == nil:
			c.mu.Lock()
			j.zone.retry(j.name)
			c.mu.Unlock()
			continue
		case ready.Status == v1.ConditionFalse:
			add, remove = notReadyTaint, unreachableTaint
		case ready.Status == v1.ConditionUnknown:
			add, remove = unreachableTaint, notReadyTaint
		default:
			continue // Ready again
		}
		if err := c.swapTaints(ctx, node, []v1.Taint{add}, []v1.Taint{remove}); err != nil {
			if ctx.Err() == nil {
				c.log.Info("adding NoExecute taint failed", "node", j.name, "err", err)
			}
			c.mu.Lock()
			j.zone.retry(j.name)
			c.mu.Unlock()
		}
	}
}
