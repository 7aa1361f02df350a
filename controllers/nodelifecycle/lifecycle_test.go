package nodelifecycle_test

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/test/testserver"
)

func TestStaleLeaseMarksNodeUnknownTaintsItAndEvictsPods(t *testing.T) {
	srv := startServer(t)
	c := srv.Client
	alive := newKubelet(t, c, "alive", nil)
	dead := newKubelet(t, c, "dead", nil)
	alive.run()
	createRunningPod(t, c, "victim", "dead")
	createRunningPod(t, c, "tolerant", "dead", v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	createRunningPod(t, c, "safe", "alive")
	startController(t, srv, fastConfig())

	// "dead" never renews: after the grace period its conditions are Unknown.
	node := waitNode(t, c, "dead", "to be Unknown", func(n *v1.Node) bool {
		ready := nodeCondition(n, v1.NodeReady)
		return ready != nil && ready.Status == v1.ConditionUnknown
	})
	ready := nodeCondition(node, v1.NodeReady)
	if ready.Reason != "NodeStatusUnknown" || ready.Message != "Kubelet stopped posting node status." {
		t.Errorf("Ready = %+v", ready)
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		cond := nodeCondition(node, ct)
		if cond == nil || cond.Status != v1.ConditionUnknown || cond.Reason != "NodeStatusNeverUpdated" || cond.Message != "Kubelet never posted node status." {
			t.Errorf("%s = %+v, want Unknown/NodeStatusNeverUpdated", ct, cond)
		}
	}
	testserver.WaitEvent(t, c, ns, "dead", "NodeNotReady", "Node dead status is now: NodeNotReady")

	// Tainted unreachable, NoSchedule and NoExecute.
	node = waitNode(t, c, "dead", "to be tainted unreachable", func(n *v1.Node) bool {
		return slices.Equal(taintKeys(n), []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"})
	})
	for _, taint := range node.Spec.Taints {
		if taint.TimeAdded == nil {
			t.Errorf("taint %s has no timeAdded", taint.ToString())
		}
	}

	// Its pods are marked not ready at once.
	waitPod(t, c, "tolerant", "to be marked not ready", func(p *v1.Pod) bool {
		cond := podCondition(p, v1.PodReady)
		return cond != nil && cond.Status == v1.ConditionFalse
	})
	testserver.WaitEvent(t, c, ns, "tolerant", "NodeNotReady", "Node is not ready")

	// The pod without a toleration goes after the eviction delay.
	victim := waitPod(t, c, "victim", "to be evicted", func(p *v1.Pod) bool { return p.DeletionTimestamp != nil })
	target := podCondition(victim, v1.DisruptionTarget)
	if target == nil || target.Status != v1.ConditionTrue || target.Reason != "DeletionByTaintManager" || target.Message != "Taint manager: deleting due to NoExecute taint" {
		t.Errorf("DisruptionTarget = %+v", target)
	}
	ev := testserver.WaitEvent(t, c, ns, "victim", "TaintManagerEviction", "Marking for deletion Pod default/victim")
	if ev.Source.Component != "taint-eviction-controller" || ev.Type != v1.EventTypeNormal {
		t.Errorf("eviction event = %+v", ev)
	}
	// The pod tolerating unreachable without a time limit stays.
	if p := getPod(t, c, "tolerant"); p.DeletionTimestamp != nil {
		t.Errorf("tolerant pod was evicted")
	}

	// The live node is untouched.
	aliveNode, err := c.CoreV1().Nodes().Get(context.Background(), "alive", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := nodeCondition(aliveNode, v1.NodeReady); r.Status != v1.ConditionTrue || len(aliveNode.Spec.Taints) != 0 {
		t.Errorf("alive node changed: Ready %+v, taints %v", r, taintKeys(aliveNode))
	}
	if p := getPod(t, c, "safe"); p.DeletionTimestamp != nil || podCondition(p, v1.PodReady).Status != v1.ConditionTrue {
		t.Errorf("pod on the live node changed: %+v", p.Status.Conditions)
	}

	// The kubelet comes back: Ready again, the taints go.
	dead.postStatus(v1.ConditionTrue)
	dead.run()
	waitNode(t, c, "dead", "to lose its taints", func(n *v1.Node) bool { return len(n.Spec.Taints) == 0 })
}

func TestNotReadyNodeTaints(t *testing.T) {
	srv := startServer(t)
	c := srv.Client
	healthy := newKubelet(t, c, "healthy", nil)
	sick := newKubelet(t, c, "sick", nil)
	healthy.run()
	sick.run()
	createRunningPod(t, c, "patient", "sick")
	createRunningPod(t, c, "hardy", "sick", v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3600)})
	startController(t, srv, fastConfig())

	// The kubelet says NotReady (and under memory pressure) while renewing its lease.
	sick.postStatus(v1.ConditionFalse, v1.NodeCondition{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue})
	waitNode(t, c, "sick", "to be tainted not-ready", func(n *v1.Node) bool {
		return slices.Equal(taintKeys(n), []string{"node.kubernetes.io/memory-pressure:NoSchedule", "node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"})
	})
	if r := nodeCondition(mustNode(t, c, "sick"), v1.NodeReady); r.Status != v1.ConditionFalse {
		t.Errorf("the controller changed a posted Ready=False: %+v", r)
	}
	waitPod(t, c, "patient", "to be evicted", func(p *v1.Pod) bool { return p.DeletionTimestamp != nil })
	if p := getPod(t, c, "hardy"); p.DeletionTimestamp != nil {
		t.Errorf("pod tolerating not-ready for an hour was evicted")
	}

	// Ready again: every condition taint goes; a cordon adds its own.
	sick.postStatus(v1.ConditionTrue)
	waitNode(t, c, "sick", "to lose its taints", func(n *v1.Node) bool { return len(n.Spec.Taints) == 0 })
	node := mustNode(t, c, "sick")
	node.Spec.Unschedulable = true
	if _, err := c.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, c, "sick", "to be tainted unschedulable", func(n *v1.Node) bool {
		return slices.Equal(taintKeys(n), []string{"node.kubernetes.io/unschedulable:NoSchedule"})
	})
}

func TestNodeThatNeverPostedStatus(t *testing.T) {
	srv := startServer(t)
	c := srv.Client
	healthy := newKubelet(t, c, "healthy", nil)
	healthy.run()
	if _, err := c.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "silent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.StartupGracePeriod = cfg.GracePeriod
	startController(t, srv, cfg)
	node := waitNode(t, c, "silent", "to get Unknown conditions", func(n *v1.Node) bool {
		ready := nodeCondition(n, v1.NodeReady)
		return ready != nil && ready.Status == v1.ConditionUnknown
	})
	if ready := nodeCondition(node, v1.NodeReady); ready.Reason != "NodeStatusNeverUpdated" || ready.Message != "Kubelet never posted node status." {
		t.Errorf("Ready = %+v", ready)
	}
	waitNode(t, c, "silent", "to be tainted unreachable", func(n *v1.Node) bool {
		return slices.Equal(taintKeys(n), []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"})
	})
}

func mustNode(t *testing.T, c kubernetes.Interface, name string) *v1.Node {
	t.Helper()
	node, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}
