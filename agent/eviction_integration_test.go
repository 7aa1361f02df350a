package agent

import (
	"context"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime/sim"
	"github.com/corekube/corekube/controllers/nodelifecycle"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
)

// TestNodePressureEviction: a node whose pods' memory leaves less than the
// hard threshold available turns MemoryPressure True (and the node
// lifecycle controller taints it), evicts the BestEffort pod first (the
// largest use above its request) with the kubelet's status, condition and
// event, and, once usage is back under the threshold, clears the
// condition and the taint after the transition period.
func TestNodePressureEviction(t *testing.T) {
	cfg := fastConfig(1)
	cfg.NodeNamePrefix = "evict"
	cfg.Capacity = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	cfg.EvictionHard = "memory.available<300Mi"
	cfg.EvictionMonitoringPeriod = 100 * time.Millisecond
	cfg.EvictionPressureTransitionPeriod = time.Second
	e := start(t, cfg)

	// The node lifecycle controller: the memory-pressure taint is its.
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(e.client, 0)
	nlc, err := nodelifecycle.New(e.client, factory, nodelifecycle.Config{Logger: testserver.Logger(), MonitorPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := nlc.Start(ctx); err != nil {
			t.Errorf("node lifecycle controller: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})

	name := "evict-1"
	e.waitNodeReady(name)
	using := func(pod *v1.Pod, usage, request string) *v1.Pod {
		c := &pod.Spec.Containers[0]
		c.Env = []v1.EnvVar{{Name: sim.MemoryUsageEnv, Value: usage}}
		if request != "" {
			q := resource.MustParse(request)
			c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: q}
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: q}
		}
		return pod
	}
	// 300Mi within a 400Mi request, and a BestEffort 300Mi: 424Mi left.
	guaranteed := e.runPod(using(simplePod("guaranteed", v1.RestartPolicyAlways, "sleep", "3600"), "300Mi", "400Mi"), name)
	bestEffort := e.runPod(using(simplePod("besteffort", v1.RestartPolicyAlways, "sleep", "3600"), "300Mi", ""), name)
	e.waitPod(guaranteed, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	e.waitPod(bestEffort, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	nodeCond := func(ctx context.Context) (*v1.Node, *v1.NodeCondition, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return n, findNodeCondition(&n.Status, v1.NodeMemoryPressure), nil
	}
	if _, c, err := nodeCond(context.Background()); err != nil || c == nil || c.Status != v1.ConditionFalse {
		t.Fatalf("MemoryPressure before the pressure: %+v (%v)", c, err)
	}

	// A burstable pod using 200Mi over a 100Mi request: 224Mi left.
	burstable := simplePod("burstable", v1.RestartPolicyAlways, "sleep", "3600")
	burstable.Spec.Containers[0].Env = []v1.EnvVar{{Name: sim.MemoryUsageEnv, Value: "200Mi"}}
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}
	e.runPod(burstable, name)

	hasTaint := func(n *v1.Node) bool {
		for _, t := range n.Spec.Taints {
			if t.Key == v1.TaintNodeMemoryPressure && t.Effect == v1.TaintEffectNoSchedule {
				return true
			}
		}
		return false
	}
	sawTaint := false
	e.poll(15*time.Second, "MemoryPressure True", func(ctx context.Context) (bool, error) {
		n, c, err := nodeCond(ctx)
		if err != nil {
			return false, err
		}
		sawTaint = sawTaint || hasTaint(n)
		return c != nil && c.Status == v1.ConditionTrue && c.Reason == "KubeletHasInsufficientMemory" &&
			c.Message == "kubelet has insufficient memory available", nil
	})

	evicted := e.waitPod(bestEffort, 15*time.Second, "evicted", phaseIs(v1.PodFailed))
	wantMsg := "The node was low on resource: memory. Threshold quantity: 300Mi, available: 224Mi. " +
		"Container main was using 300Mi, request is 0, has larger consumption of memory. "
	if evicted.Status.Reason != "Evicted" || evicted.Status.Message != wantMsg {
		t.Errorf("evicted pod: reason %q message %q, want Evicted, %q", evicted.Status.Reason, evicted.Status.Message, wantMsg)
	}
	if c := condition(evicted, v1.DisruptionTarget); c == nil || c.Status != v1.ConditionTrue ||
		c.Reason != v1.PodReasonTerminationByKubelet || c.Message != wantMsg {
		t.Errorf("DisruptionTarget %+v", c)
	}
	if ev := e.waitEvent(evicted, "Evicted", "The node was low on resource: memory."); ev.Type != v1.EventTypeWarning || ev.Message != wantMsg {
		t.Errorf("Evicted event %s %q", ev.Type, ev.Message)
	}
	nodeRef := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	e.waitEvent(nodeRef, "NodeHasInsufficientMemory", "")
	if ev := e.waitEvent(nodeRef, "EvictionThresholdMet", ""); ev.Type != v1.EventTypeWarning || ev.Message != "Attempting to reclaim memory" {
		t.Errorf("EvictionThresholdMet event %s %q", ev.Type, ev.Message)
	}

	// Evicting it was enough: the others keep running, the condition and
	// the taint go once the transition period is over.
	e.poll(15*time.Second, "MemoryPressure False and no taint", func(ctx context.Context) (bool, error) {
		n, c, err := nodeCond(ctx)
		if err != nil {
			return false, err
		}
		sawTaint = sawTaint || hasTaint(n)
		return c != nil && c.Status == v1.ConditionFalse && c.Reason == "KubeletHasSufficientMemory" && !hasTaint(n), nil
	})
	if !sawTaint {
		t.Errorf("the node never had the %s taint", v1.TaintNodeMemoryPressure)
	}
	for _, p := range []*v1.Pod{guaranteed, burstable} {
		got, err := e.client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1.PodRunning || condition(got, v1.DisruptionTarget) != nil {
			t.Errorf("pod %s: phase %s, conditions %+v; want it running, untouched", p.Name, got.Status.Phase, got.Status.Conditions)
		}
	}
	// NodeHasSufficientMemory again (the first came at the start).
	e.poll(15*time.Second, "a second NodeHasSufficientMemory event", func(ctx context.Context) (bool, error) {
		evs, err := e.client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=NodeHasSufficientMemory"})
		if err != nil {
			return false, err
		}
		var n int32
		for _, ev := range evs.Items {
			n += max(ev.Count, 1)
		}
		return n >= 2, nil
	})

	// kubelet_evictions counted it.
	mfs, err := e.agent.metrics.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count float64
	for _, mf := range mfs {
		if mf.GetName() != "kubelet_evictions" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["node"] == name && labels["eviction_signal"] == "memory.available" {
				count = m.GetCounter().GetValue()
			}
		}
	}
	if count != 1 {
		t.Errorf("kubelet_evictions{node=%q,eviction_signal=\"memory.available\"} = %v, want 1", name, count)
	}
}

// TestSoftEvictionWaitsForGracePeriod: a soft threshold sets MemoryPressure
// as soon as it is met but evicts only once it has held for its grace
// period; the message names the soft threshold. With a minimum reclaim,
// evicting the larger pod (624Mi available, above the 600Mi threshold but
// not by the 100Mi to reclaim) is not enough: the other goes too.
func TestSoftEvictionWaitsForGracePeriod(t *testing.T) {
	cfg := fastConfig(1)
	cfg.NodeNamePrefix = "soft"
	cfg.Capacity = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	cfg.EvictionHard = "none"
	cfg.EvictionSoft = "memory.available<600Mi"
	cfg.EvictionSoftGracePeriod = "memory.available=5s"
	cfg.EvictionMinimumReclaim = "memory.available=100Mi"
	cfg.EvictionMonitoringPeriod = 100 * time.Millisecond
	cfg.EvictionPressureTransitionPeriod = time.Second
	e := start(t, cfg)
	name := "soft-1"
	node := e.waitNodeReady(name)
	if alloc := node.Status.Allocatable[v1.ResourceMemory]; alloc.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("allocatable memory %s without a hard threshold, want the capacity", &alloc)
	}
	small := simplePod("small", v1.RestartPolicyAlways, "sleep", "3600")
	small.Spec.Containers[0].Env = []v1.EnvVar{{Name: sim.MemoryUsageEnv, Value: "400Mi"}}
	small = e.runPod(small, name)
	e.waitPod(small, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	pod := simplePod("hog", v1.RestartPolicyAlways, "sleep", "3600")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: sim.MemoryUsageEnv, Value: "450Mi"}}
	pod = e.runPod(pod, name)
	e.poll(15*time.Second, "MemoryPressure True", func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := findNodeCondition(&n.Status, v1.NodeMemoryPressure)
		return c != nil && c.Status == v1.ConditionTrue, nil
	})
	// The grace period (5s) has not passed since the threshold was first
	// met, which is when the condition turned True.
	got, err := e.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PodRunning || condition(got, v1.DisruptionTarget) != nil {
		t.Fatalf("pod evicted within the soft grace period: phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
	}
	evicted := e.waitPod(pod, 20*time.Second, "evicted", phaseIs(v1.PodFailed))
	want := "The node was low on resource: memory. Threshold quantity: 600Mi, available: 174Mi. " +
		"Container main was using 450Mi, request is 0, has larger consumption of memory. "
	if evicted.Status.Reason != "Evicted" || evicted.Status.Message != want {
		t.Errorf("evicted: %q %q, want Evicted %q", evicted.Status.Reason, evicted.Status.Message, want)
	}
	evicted = e.waitPod(small, 20*time.Second, "evicted for the minimum reclaim", phaseIs(v1.PodFailed))
	want = "The node was low on resource: memory. Threshold quantity: 600Mi, available: 624Mi. " +
		"Container main was using 400Mi, request is 0, has larger consumption of memory. "
	if evicted.Status.Reason != "Evicted" || evicted.Status.Message != want {
		t.Errorf("second eviction: %q %q, want Evicted %q", evicted.Status.Reason, evicted.Status.Message, want)
	}
}
