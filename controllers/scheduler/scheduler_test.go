package scheduler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSchedulerBindsAndSpreads(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	for i := 1; i <= 3; i++ {
		createNode(t, c, fmt.Sprintf("node-%d", i), "4", "8Gi", "110")
	}
	startScheduler(t, srv, fastConfig())
	perNode := map[string]int{}
	for i := range 6 {
		createPod(t, c, fmt.Sprintf("web-%d", i), requests("100m", "128Mi"))
	}
	for i := range 6 {
		pod := waitBound(t, c, fmt.Sprintf("web-%d", i))
		perNode[pod.Spec.NodeName]++
		if cond := scheduledCondition(pod); cond == nil || cond.Status != v1.ConditionTrue {
			t.Errorf("pod %s: PodScheduled = %+v, want True", pod.Name, cond)
		}
	}
	for i := 1; i <= 3; i++ {
		if n := perNode[fmt.Sprintf("node-%d", i)]; n != 2 {
			t.Errorf("node-%d has %d pods, want 2 (spread %v)", i, n, perNode)
		}
	}

	pod, err := c.CoreV1().Pods(ns).Get(context.Background(), "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := testserver.WaitEvent(t, c, ns, "web-0", "Scheduled", fmt.Sprintf("Successfully assigned default/web-0 to %s", pod.Spec.NodeName))
	if ev.Type != v1.EventTypeNormal || ev.ReportingController != "default-scheduler" || ev.Action != "Binding" ||
		ev.EventTime.IsZero() || ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.UID != pod.UID {
		t.Errorf("Scheduled event = %+v", ev)
	}
}

func TestSchedulerIgnoresOtherSchedulersAndBoundPods(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "4", "8Gi", "110")
	createNode(t, c, "node-2", "4", "8Gi", "110")
	startScheduler(t, srv, fastConfig())
	createPod(t, c, "other", func(p *v1.Pod) { p.Spec.SchedulerName = "my-scheduler" })
	createPod(t, c, "pinned", func(p *v1.Pod) { p.Spec.NodeName = "node-2" })
	createPod(t, c, "mine")
	waitBound(t, c, "mine")
	other, err := c.CoreV1().Pods(ns).Get(context.Background(), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if other.Spec.NodeName != "" || scheduledCondition(other) != nil {
		t.Errorf("pod for my-scheduler was touched: node %q, conditions %+v", other.Spec.NodeName, other.Status.Conditions)
	}
	pinned, err := c.CoreV1().Pods(ns).Get(context.Background(), "pinned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pinned.Spec.NodeName != "node-2" {
		t.Errorf("pinned pod moved to %q", pinned.Spec.NodeName)
	}
}

func TestSchedulerUnschedulableMessageAndRetryOnPodUpdate(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-a", "4", "8Gi", "110", withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule))
	createNode(t, c, "node-b", "1", "8Gi", "110")
	createNode(t, c, "node-c", "1", "8Gi", "110")
	startScheduler(t, srv, fastConfig())

	createPod(t, c, "big", requests("2", ""))
	msg := "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. " +
		"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
	pod := waitUnschedulable(t, c, "big", msg)
	ev := testserver.WaitEvent(t, c, ns, "big", "FailedScheduling", msg)
	if ev.Type != v1.EventTypeWarning || ev.ReportingController != "default-scheduler" || ev.Action != "Scheduling" || ev.InvolvedObject.UID != pod.UID {
		t.Errorf("FailedScheduling event = %+v", ev)
	}

	// Tolerating the taint (tolerations may be added to a pod) makes node-a fit.
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule})
	if _, err := c.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if bound := waitBound(t, c, "big"); bound.Spec.NodeName != "node-a" {
		t.Errorf("big went to %s, want node-a", bound.Spec.NodeName)
	}
}

func TestSchedulerTaints(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "tainted", "4", "8Gi", "110", withTaint("team", "blue", v1.TaintEffectNoExecute))
	createNode(t, c, "preferred-not", "4", "8Gi", "110", withTaint("spot", "", v1.TaintEffectPreferNoSchedule))
	createNode(t, c, "plain", "4", "8Gi", "110")
	startScheduler(t, srv, fastConfig())

	// Without tolerations: never the NoExecute node; the PreferNoSchedule node
	// only scores lower, so identical pods pile on "plain" first.
	createPod(t, c, "p1", requests("100m", ""))
	if n := waitBound(t, c, "p1").Spec.NodeName; n != "plain" {
		t.Errorf("p1 on %s, want plain (PreferNoSchedule scores lower)", n)
	}
	createPod(t, c, "blue", requests("100m", ""), tolerating("team", "blue", v1.TaintEffectNoExecute),
		func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "tainted"} })
	if n := waitBound(t, c, "blue").Spec.NodeName; n != "tainted" {
		t.Errorf("tolerating pod on %s, want tainted", n)
	}
	createPod(t, c, "not-blue", requests("100m", ""),
		func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "tainted"} })
	waitUnschedulable(t, c, "not-blue", "0/3 nodes are available: 1 node(s) had untolerated taint {team: blue}, 2 node(s) didn't match Pod's node affinity/selector. "+
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")

	// Removing the taint lets the waiting pod in.
	node, err := c.CoreV1().Nodes().Get(context.Background(), "tainted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = nil
	if _, err := c.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := waitBound(t, c, "not-blue").Spec.NodeName; n != "tainted" {
		t.Errorf("not-blue on %s, want tainted", n)
	}
}

func TestSchedulerNodeSelectorAndAffinity(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-a", "4", "8Gi", "110", withLabels("zone", "a", "cores", "4"))
	createNode(t, c, "node-b", "4", "8Gi", "110", withLabels("zone", "b", "cores", "16", "ssd", "true"))
	startScheduler(t, srv, fastConfig())

	affinity := func(exprs ...v1.NodeSelectorRequirement) podOpt {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: exprs}},
			}}}
		}
	}
	req := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
		return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	cases := []struct {
		name string
		opt  podOpt
		want string
	}{
		{"selector", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }, "node-b"},
		{"in", affinity(req("zone", v1.NodeSelectorOpIn, "a", "c")), "node-a"},
		{"notin", affinity(req("zone", v1.NodeSelectorOpNotIn, "a")), "node-b"},
		{"exists", affinity(req("ssd", v1.NodeSelectorOpExists)), "node-b"},
		{"doesnotexist", affinity(req("ssd", v1.NodeSelectorOpDoesNotExist)), "node-a"},
		{"gt", affinity(req("cores", v1.NodeSelectorOpGt, "8")), "node-b"},
		{"lt", affinity(req("cores", v1.NodeSelectorOpLt, "8")), "node-a"},
	}
	for _, tc := range cases {
		createPod(t, c, tc.name, tc.opt)
	}
	for _, tc := range cases {
		if n := waitBound(t, c, tc.name).Spec.NodeName; n != tc.want {
			t.Errorf("pod %s on %s, want %s", tc.name, n, tc.want)
		}
	}

	createPod(t, c, "zone-c", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "c"} })
	waitUnschedulable(t, c, "zone-c", "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "+
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
	// Labelling a node to match brings the pod in.
	node, err := c.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels["zone"] = "c"
	if _, err := c.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := waitBound(t, c, "zone-c").Spec.NodeName; n != "node-a" {
		t.Errorf("zone-c on %s, want node-a", n)
	}
}

func TestSchedulerResources(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "small", "1", "1Gi", "110")
	startScheduler(t, srv, fastConfig())

	createPod(t, c, "first", requests("600m", "256Mi"))
	waitBound(t, c, "first")
	createPod(t, c, "second", requests("600m", "256Mi"))
	waitUnschedulable(t, c, "second", "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")

	// An init container's request counts when it is the largest: a 100m app
	// with a 500m/900Mi init container needs 500m/900Mi; 400m/768Mi are free.
	createPod(t, c, "init-heavy", requests("100m", ""), func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: mustQuantity("500m"), v1.ResourceMemory: mustQuantity("900Mi")},
		}}}
	})
	waitUnschedulable(t, c, "init-heavy", "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
	deletePod(t, c, "init-heavy")

	// A terminated pod frees its share: first Succeeds, second fits.
	first, err := c.CoreV1().Pods(ns).Get(context.Background(), "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first.Status.Phase = v1.PodSucceeded
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(context.Background(), first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := waitBound(t, c, "second").Spec.NodeName; n != "small" {
		t.Errorf("second on %s", n)
	}
}

func TestSchedulerPodCount(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "small", "1", "1Gi", "2")
	startScheduler(t, srv, fastConfig())
	// Pods without requests still count against allocatable pods.
	createPod(t, c, "tiny-1")
	waitBound(t, c, "tiny-1")
	createPod(t, c, "tiny-2")
	waitBound(t, c, "tiny-2")
	createPod(t, c, "tiny-3")
	waitUnschedulable(t, c, "tiny-3", "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
	// Deleting a pod frees its place.
	deletePod(t, c, "tiny-1")
	waitBound(t, c, "tiny-3")
}

func TestSchedulerUnschedulableAndNotReadyNodes(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "cordoned", "4", "8Gi", "110", cordoned)
	createNode(t, c, "down", "4", "8Gi", "110", withReady(v1.ConditionFalse))
	createNode(t, c, "lost", "4", "8Gi", "110", withReady(v1.ConditionUnknown))
	startScheduler(t, srv, fastConfig())

	createPod(t, c, "waiting")
	waitUnschedulable(t, c, "waiting", "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "+
		"1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable. "+
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")

	// A pod tolerating the unreachable taint may go to the lost node, as in kube.
	createPod(t, c, "tolerant", tolerating(v1.TaintNodeUnreachable, "", v1.TaintEffectNoSchedule))
	if n := waitBound(t, c, "tolerant").Spec.NodeName; n != "lost" {
		t.Errorf("tolerant on %s, want lost", n)
	}

	// Uncordoning brings the waiting pod in.
	node, err := c.CoreV1().Nodes().Get(context.Background(), "cordoned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Unschedulable = false
	if _, err := c.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := waitBound(t, c, "waiting").Spec.NodeName; n != "cordoned" {
		t.Errorf("waiting on %s, want cordoned", n)
	}

	// A node turning Ready is a change that lets pods in.
	createPod(t, c, "later", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "down"} })
	// Taints are checked before the selector: "lost" reports its taint.
	waitUnschedulable(t, c, "later", "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "+
		"1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. "+
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	down, err := c.CoreV1().Nodes().Get(context.Background(), "down", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	down.Status.Conditions[0].Status = v1.ConditionTrue
	if _, err := c.CoreV1().Nodes().UpdateStatus(context.Background(), down, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "later")
}

func TestSchedulerHostPorts(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "4", "8Gi", "110")
	startScheduler(t, srv, fastConfig())
	createPod(t, c, "web-1", hostPortPod(8080))
	waitBound(t, c, "web-1")
	createPod(t, c, "web-2", hostPortPod(8080))
	waitUnschedulable(t, c, "web-2", "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. "+
		"preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
	createPod(t, c, "web-3", hostPortPod(8081))
	waitBound(t, c, "web-3")
	// A second node offers the port.
	createNode(t, c, "node-2", "4", "8Gi", "110")
	if n := waitBound(t, c, "web-2").Spec.NodeName; n != "node-2" {
		t.Errorf("web-2 on %s, want node-2", n)
	}
}

func TestSchedulerNoNodes(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	startScheduler(t, srv, fastConfig())
	createPod(t, c, "early")
	waitUnschedulable(t, c, "early", "no nodes available to schedule pods")
	testserver.WaitEvent(t, c, ns, "early", "FailedScheduling", "no nodes available to schedule pods")
	createNode(t, c, "node-1", "4", "8Gi", "110")
	waitBound(t, c, "early")
}

func TestSchedulerSchedulingGates(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "4", "8Gi", "110")
	startScheduler(t, srv, fastConfig())
	createPod(t, c, "gated", func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}} })
	createPod(t, c, "free")
	waitBound(t, c, "free")
	pod, err := c.CoreV1().Pods(ns).Get(context.Background(), "gated", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Fatalf("gated pod was bound to %s", pod.Spec.NodeName)
	}
	pod.Spec.SchedulingGates = nil
	if _, err := c.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "gated")
}

func TestSchedulerCountsPodsBoundBeforeItStarts(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "1", "1Gi", "110")
	createPod(t, c, "already-there", requests("800m", ""), func(p *v1.Pod) { p.Spec.NodeName = "node-1" })
	startScheduler(t, srv, fastConfig())
	createPod(t, c, "newcomer", requests("500m", ""))
	waitUnschedulable(t, c, "newcomer", "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
	createPod(t, c, "small", requests("200m", ""))
	waitBound(t, c, "small")
}
