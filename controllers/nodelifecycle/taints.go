package nodelifecycle

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
)

// The NoExecute taints of not-ready and unreachable nodes.
var (
	unreachableTaint = v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}
	notReadyTaint    = v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}
)

// conditionTaints maps node conditions to the NoSchedule taint each
// status stands for (kube's nodeConditionToTaintKeyStatusMap).
var conditionTaints = map[v1.NodeConditionType]map[v1.ConditionStatus]string{
	v1.NodeReady: {
		v1.ConditionFalse:   v1.TaintNodeNotReady,
		v1.ConditionUnknown: v1.TaintNodeUnreachable,
	},
	v1.NodeMemoryPressure:     {v1.ConditionTrue: v1.TaintNodeMemoryPressure},
	v1.NodeDiskPressure:       {v1.ConditionTrue: v1.TaintNodeDiskPressure},
	v1.NodeNetworkUnavailable: {v1.ConditionTrue: v1.TaintNodeNetworkUnavailable},
	v1.NodePIDPressure:        {v1.ConditionTrue: v1.TaintNodePIDPressure},
}

// conditionTaintKeys are the taint keys this controller owns as NoSchedule.
var conditionTaintKeys = map[string]bool{
	v1.TaintNodeNotReady: true, v1.TaintNodeUnreachable: true, v1.TaintNodeMemoryPressure: true,
	v1.TaintNodeDiskPressure: true, v1.TaintNodeNetworkUnavailable: true, v1.TaintNodePIDPressure: true,
	v1.TaintNodeUnschedulable: true,
}

func hasTaint(taints []v1.Taint, t *v1.Taint) bool {
	return slices.ContainsFunc(taints, func(x v1.Taint) bool { return x.MatchTaint(t) })
}

// wantedNoScheduleTaints are the NoSchedule taints the node's conditions
// and spec.unschedulable call for.
func wantedNoScheduleTaints(node *v1.Node) []v1.Taint {
	var out []v1.Taint
	for _, c := range node.Status.Conditions {
		if key, ok := conditionTaints[c.Type][c.Status]; ok {
			out = append(out, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
		}
	}
	if node.Spec.Unschedulable {
		out = append(out, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	}
	return out
}

// noScheduleTaintDiff is kube's doNoScheduleTaintingPass diff: what to add
// and remove among the NoSchedule taints this controller owns.
func noScheduleTaintDiff(node *v1.Node) (add, remove []v1.Taint) {
	want := wantedNoScheduleTaints(node)
	var have []v1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule && conditionTaintKeys[t.Key] {
			have = append(have, t)
		}
	}
	for i := range want {
		if !hasTaint(have, &want[i]) {
			add = append(add, want[i])
		}
	}
	for i := range have {
		if !hasTaint(want, &have[i]) {
			remove = append(remove, have[i])
		}
	}
	return add, remove
}

// swapTaints adds and removes taints on the named node (kube's
// SwapNodeControllerTaint): added taints get timeAdded, a taint already
// there (same key and effect) is left alone, and a conflict re-reads the
// node and tries again. known is the caller's (cached) copy of the node;
// when it shows nothing to do, nothing is written.
func (c *Controller) swapTaints(ctx context.Context, known *v1.Node, add, remove []v1.Taint) error {
	if !taintsChange(known.Spec.Taints, add, remove) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, known.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !taintsChange(node.Spec.Taints, add, remove) {
			return nil
		}
		now := metav1.NewTime(c.cfg.Clock.Now())
		taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t v1.Taint) bool { return hasTaint(remove, &t) })
		for _, t := range add {
			if !hasTaint(taints, &t) {
				t.TimeAdded = &now
				taints = append(taints, t)
			}
		}
		node.Spec.Taints = taints
		_, err = c.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func taintsChange(taints, add, remove []v1.Taint) bool {
	for i := range add {
		if !hasTaint(taints, &add[i]) {
			return true
		}
	}
	for i := range remove {
		if hasTaint(taints, &remove[i]) {
			return true
		}
	}
	return false
}

// syncNoScheduleTaints is kube's doNoScheduleTaintingPass for one node.
func (c *Controller) syncNoScheduleTaints(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if err != nil {
		return nil // gone
	}
	add, remove := noScheduleTaintDiff(node)
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	if err := c.swapTaints(ctx, node, add, remove); err != nil {
		return fmt.Errorf("taint node %s: %w", name, err)
	}
	return nil
}

// zoneTainter is kube's RateLimitedTimedQueue for one zone: nodes waiting
// for their NoExecute taint, let through at the zone's rate. A node stays
// in set after it is tainted, so it is not tainted (and counted) again
// until it is removed.
type zoneTainter struct {
	limiter flowcontrol.RateLimiter // nil: nothing goes through
	queue   []string
	set     map[string]bool
}

func newZoneTainter(qps float64, clk flowcontrol.Clock) *zoneTainter {
	z := &zoneTainter{set: map[string]bool{}}
	z.setRate(qps, clk)
	return z
}

func (z *zoneTainter) setRate(qps float64, clk flowcontrol.Clock) {
	if z.limiter != nil {
		z.limiter.Stop()
	}
	z.limiter = nil
	if qps > 0 {
		z.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(float32(qps), 1, clk)
	}
}

// add queues a node; false if it was already queued or tainted.
func (z *zoneTainter) add(name string) bool {
	if z.set[name] {
		return false
	}
	z.set[name] = true
	z.queue = append(z.queue, name)
	return true
}

func (z *zoneTainter) remove(name string) bool {
	if !z.set[name] {
		return false
	}
	delete(z.set, name)
	z.queue = slices.DeleteFunc(z.queue, func(n string) bool { return n == name })
	return true
}

// next returns the nodes the limiter lets through now, taking them off
// the queue (they stay in set).
func (z *zoneTainter) next() []string {
	var out []string
	for len(z.queue) > 0 && z.limiter != nil && z.limiter.TryAccept() {
		out = append(out, z.queue[0])
		z.queue = z.queue[1:]
	}
	return out
}

// retry puts back a node whose tainting failed.
func (z *zoneTainter) retry(name string) {
	if z.set[name] && !slices.Contains(z.queue, name) {
		z.queue = append(z.queue, name)
	}
}
