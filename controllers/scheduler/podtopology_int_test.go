package scheduler_test

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corekube/corekube/test/testserver"
)

func labelled(kv ...string) podOpt {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func selecting(kv ...string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func podAffinity(anti bool, topologyKey string, kv ...string) podOpt {
	return func(p *v1.Pod) {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			sel.MatchLabels[kv[i]] = kv[i+1]
		}
		terms := []v1.PodAffinityTerm{{TopologyKey: topologyKey, LabelSelector: sel}}
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &v1.Affinity{}
		}
		if anti {
			p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
		} else {
			p.Spec.Affinity.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
		}
	}
}

// TestSchedulerTopologySpreadAndAffinity: three nodes in three zones, the
// one in zone a much larger, so that without the constraints the
// resource scores would send every pod there.
func TestSchedulerTopologySpreadAndAffinity(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "zone-a", "64", "256Gi", "110", withLabels(v1.LabelTopologyZone, "a"))
	createNode(t, c, "zone-b", "4", "16Gi", "110", withLabels(v1.LabelTopologyZone, "b"))
	createNode(t, c, "zone-c", "4", "16Gi", "110", withLabels(v1.LabelTopologyZone, "c"))
	startScheduler(t, srv, fastConfig())

	t.Run("zone spread maxSkew 1 ends 3/3/3", func(t *testing.T) {
		spread := func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
			}}
		}
		for i := range 9 {
			createPod(t, c, fmt.Sprintf("spread-%d", i), labelled("app", "spread"), requests("200m", "256Mi"), spread)
		}
		perNode := map[string]int{}
		for i := range 9 {
			perNode[waitBound(t, c, fmt.Sprintf("spread-%d", i)).Spec.NodeName]++
		}
		for _, node := range []string{"zone-a", "zone-b", "zone-c"} {
			if perNode[node] != 3 {
				t.Errorf("pods per zone %v, want 3 in each", perNode)
				break
			}
		}
	})

	t.Run("required affinity co-locates", func(t *testing.T) {
		createPod(t, c, "cache", labelled("app", "cache"), selecting(v1.LabelHostname, "zone-b"))
		if node := waitBound(t, c, "cache").Spec.NodeName; node != "zone-b" {
			t.Fatalf("cache on %s", node)
		}
		for i := range 3 {
			createPod(t, c, fmt.Sprintf("near-%d", i), labelled("app", "near"), podAffinity(false, v1.LabelHostname, "app", "cache"))
		}
		for i := range 3 {
			if node := waitBound(t, c, fmt.Sprintf("near-%d", i)).Spec.NodeName; node != "zone-b" {
				t.Errorf("near-%d on %s, want zone-b with the cache pod", i, node)
			}
		}
		// Nothing matches and the pod does not match itself: no node.
		createPod(t, c, "lonely", labelled("app", "lonely"), podAffinity(false, v1.LabelTopologyZone, "app", "missing"))
		waitUnschedulable(t, c, "lonely", "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	})

	t.Run("anti-affinity matchLabelKeys: only the same revision repels", func(t *testing.T) {
		mlk := func(p *v1.Pod) {
			podAffinity(true, v1.LabelHostname, "app", "mlk")(p)
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].MatchLabelKeys = []string{"rev"}
		}
		createPod(t, c, "mlk-a", labelled("app", "mlk", "rev", "1"), selecting(v1.LabelHostname, "zone-c"), mlk)
		waitBound(t, c, "mlk-a")
		createPod(t, c, "mlk-b", labelled("app", "mlk", "rev", "2"), selecting(v1.LabelHostname, "zone-c"), mlk)
		waitBound(t, c, "mlk-b")
		createPod(t, c, "mlk-c", labelled("app", "mlk", "rev", "1"), selecting(v1.LabelHostname, "zone-c"), mlk)
		waitUnschedulable(t, c, "mlk-c", "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")
	})

	t.Run("a spread constraint on a missing key", func(t *testing.T) {
		createPod(t, c, "no-key", labelled("app", "no-key"), func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "rack", WhenUnsatisfiable: v1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "no-key"}},
			}}
		})
		waitUnschedulable(t, c, "no-key", "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints (missing required label). preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	})
}

// TestSchedulerPodAntiAffinity: anti-affinity by hostname keeps two pods
// apart on a 2-node cluster; the third waits with kube's message and is
// placed once one of the others is gone.
func TestSchedulerPodAntiAffinity(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "4", "8Gi", "110")
	createNode(t, c, "node-2", "4", "8Gi", "110")
	startScheduler(t, srv, fastConfig())
	apart := podAffinity(true, v1.LabelHostname, "app", "apart")
	createPod(t, c, "apart-0", labelled("app", "apart"), apart)
	createPod(t, c, "apart-1", labelled("app", "apart"), apart)
	n0, n1 := waitBound(t, c, "apart-0").Spec.NodeName, waitBound(t, c, "apart-1").Spec.NodeName
	if n0 == n1 {
		t.Fatalf("both pods on %s", n0)
	}
	createPod(t, c, "apart-2", labelled("app", "apart"), apart)
	msg := "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
	waitUnschedulable(t, c, "apart-2", msg)
	testserver.WaitEvent(t, c, ns, "apart-2", "FailedScheduling", msg)

	// A pod without terms that the existing pods' anti-affinity selects
	// (symmetry) is kept off both nodes too.
	createPod(t, c, "selected", labelled("app", "apart"))
	waitUnschedulable(t, c, "selected", "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
	deletePod(t, c, "selected")

	deletePod(t, c, "apart-0")
	if node := waitBound(t, c, "apart-2").Spec.NodeName; node != n0 {
		t.Errorf("apart-2 on %s, want %s (where apart-0 was)", node, n0)
	}

	// A bound pod's labels changing retries a pod its labels kept away.
	relabel := func(app string) {
		t.Helper()
		patch := []byte(`{"metadata":{"labels":{"app":"` + app + `"}}}`)
		if _, err := c.CoreV1().Pods(ns).Patch(context.Background(), "apart-2", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("busy")
	createPod(t, c, "solo", selecting(v1.LabelHostname, n0), podAffinity(true, v1.LabelHostname, "app", "busy"))
	waitUnschedulable(t, c, "solo", "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.")
	relabel("apart")
	if node := waitBound(t, c, "solo").Spec.NodeName; node != n0 {
		t.Errorf("solo on %s, want %s", node, n0)
	}
}
