package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// victim is a pod on a node: name, priority, milli-cpu requested, start
// (minutes after t0; negative: not started), labels.
func victim(name string, prio int32, milliCPU int64, startMin int, lbls ...string) *assignedPod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(lbls); i += 2 {
		pod.Labels[lbls[i]] = lbls[i+1]
	}
	if startMin >= 0 {
		st := metav1.NewTime(t0.Add(time.Duration(startMin) * time.Minute))
		pod.Status.StartTime = &st
	}
	p := newAssignedPod(pod)
	p.priority, p.req, p.nonZero = prio, resources{MilliCPU: milliCPU}, resources{}
	return p
}

func testNode(milliCPU int64, pods ...*assignedPod) *nodeInfo {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	ni := &nodeInfo{name: "n", node: node, allocatable: resources{MilliCPU: milliCPU}, allowedPods: 110}
	for _, p := range pods {
		ni.addPod(p)
	}
	return ni
}

func preemptor(prio int32, milliCPU int64) *podEntry {
	return newPodEntry("ns/p", &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)},
		}}}},
	})
}

func pdb(name string, allowed int32, app string, disrupted ...string) *policyv1.PodDisruptionBudget {
	b := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	if len(disrupted) > 0 {
		b.Status.DisruptedPods = map[string]metav1.Time{}
		for _, d := range disrupted {
			b.Status.DisruptedPods[d] = metav1.NewTime(t0)
		}
	}
	return b
}

func names(pods []*assignedPod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.name)
	}
	return out
}

func TestSelectVictims(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name       string
		pod        *podEntry
		alloc      int64
		pods       []*assignedPod
		nominated  []*podEntry
		pdbs       []*policyv1.PodDisruptionBudget
		want       []string
		violations int
		noVictims  bool
		reasons    []string
	}{
		{
			name: "no lower priority pod", pod: preemptor(10, 500), alloc: 1000,
			pods:      []*assignedPod{victim("a", 10, 800, 0)},
			noVictims: true,
		},
		{
			name: "does not fit even without every lower priority pod", pod: preemptor(10, 500), alloc: 1000,
			pods:    []*assignedPod{victim("a", 5, 300, 0), victim("b", 20, 600, 0)},
			reasons: []string{"Insufficient cpu"},
		},
		{
			name: "lowest priority evicted, the more important reprieved", pod: preemptor(100, 500), alloc: 1000,
			pods: []*assignedPod{victim("a", 1, 500, 0), victim("b", 50, 500, 0)},
			want: []string{"a"},
		},
		{
			name: "equal priority: the pod started last goes, the first started is reprieved", pod: preemptor(100, 400), alloc: 1000,
			pods: []*assignedPod{victim("old", 5, 400, 0), victim("new", 5, 400, 30), victim("small", 5, 200, 10)},
			// most important first: old, small, new; old and small fit with the pod
			want: []string{"new"},
		},
		{
			name: "several victims, most important first", pod: preemptor(100, 900), alloc: 1000,
			pods: []*assignedPod{victim("a", 1, 300, 0), victim("b", 3, 300, 0), victim("c", 2, 300, 0), victim("keep", 200, 100, 0)},
			want: []string{"b", "c", "a"},
		},
		{
			name: "a budget-violating victim is reprieved before a non-violating one", pod: preemptor(100, 500), alloc: 1000,
			pods: []*assignedPod{victim("db", 1, 500, 0, "app", "db"), victim("web", 50, 500, 0, "app", "web")},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("db", 0, "db")},
			want: []string{"web"},
		},
		{
			name: "violations counted when they cannot be avoided", pod: preemptor(100, 1000), alloc: 1000,
			pods:       []*assignedPod{victim("db-1", 1, 500, 0, "app", "db"), victim("db-2", 1, 500, 5, "app", "db")},
			pdbs:       []*policyv1.PodDisruptionBudget{pdb("db", 1, "db")},
			want:       []string{"db-1", "db-2"},
			violations: 1,
		},
		{
			name: "a pod the budget already counts as disrupted spends nothing", pod: preemptor(100, 1000), alloc: 1000,
			pods:       []*assignedPod{victim("db-1", 1, 500, 0, "app", "db"), victim("db-2", 1, 500, 5, "app", "db")},
			pdbs:       []*policyv1.PodDisruptionBudget{pdb("db", 0, "db", "db-1")},
			want:       []string{"db-1", "db-2"},
			violations: 1,
		},
		{
			name: "a more important nominated pod keeps its room", pod: preemptor(100, 500), alloc: 1000,
			pods:      []*assignedPod{victim("a", 1, 300, 0), victim("b", 2, 300, 0)},
			nominated: []*podEntry{preemptor(200, 400)},
			// with the nominated 400m, the pod needs both gone
			want: []string{"b", "a"},
		},
		{
			name: "a less important nominated pod does not count", pod: preemptor(100, 500), alloc: 1000,
			pods:      []*assignedPod{victim("a", 1, 300, 0), victim("b", 2, 300, 0)},
			nominated: []*podEntry{preemptor(50, 400)},
			want:      []string{"a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ni := testNode(tc.alloc, tc.pods...)
			before := ni.requested
			var lower []*assignedPod
			for _, p := range tc.pods {
				if p.priority < tc.pod.priority {
					lower = append(lower, p)
				}
			}
			victims, violations, f, none := selectVictims(tc.pod, ni, tc.nominated, lower, compilePDBs(tc.pdbs), now)
			if ni.requested.MilliCPU != before.MilliCPU || ni.pods != len(tc.pods) {
				t.Errorf("the node itself changed: %+v", ni.requested)
			}
			if none != tc.noVictims {
				t.Fatalf("noVictims = %v", none)
			}
			if tc.reasons != nil || tc.noVictims {
				if f.kind == fits && !none {
					t.Fatalf("fits with victims %v", names(victims))
				}
				if tc.reasons != nil && !slices.Equal(f.reasons(), tc.reasons) {
					t.Errorf("reasons %v, want %v", f.reasons(), tc.reasons)
				}
				return
			}
			if f.kind != fits {
				t.Fatalf("does not fit: %v", f.reasons())
			}
			if got := names(victims); !slices.Equal(got, tc.want) {
				t.Errorf("victims %v, want %v", got, tc.want)
			}
			if violations != tc.violations {
				t.Errorf("violations %d, want %d", violations, tc.violations)
			}
		})
	}
}

func TestSplitByPDBViolation(t *testing.T) {
	pods := []*assignedPod{
		victim("db-1", 1, 0, 0, "app", "db"),
		victim("db-2", 1, 0, 0, "app", "db"),
		victim("web", 1, 0, 0, "app", "web"),
		victim("bare", 1, 0, 0),
	}
	other := pdb("other-ns", 0, "web")
	other.Namespace = "elsewhere"
	empty := pdb("empty", 0, "x")
	empty.Spec.Selector = &metav1.LabelSelector{}
	violating, nonViolating := splitByPDBViolation(pods, compilePDBs([]*policyv1.PodDisruptionBudget{pdb("db", 1, "db"), other, empty}))
	if got := names(violating); !slices.Equal(got, []string{"db-2"}) {
		t.Errorf("violating %v", got)
	}
	if got := names(nonViolating); !slices.Equal(got, []string{"db-1", "web", "bare"}) {
		t.Errorf("non-violating %v", got)
	}
}

func TestPickCandidate(t *testing.T) {
	now := t0.Add(time.Hour)
	cand := func(node string, violations int, victims ...*assignedPod) candidate {
		return candidate{node: &nodeInfo{name: node}, violations: violations, victims: victims}
	}
	tests := []struct {
		name  string
		cands []candidate
		want  string
	}{
		{"fewest budget violations", []candidate{
			cand("a", 1, victim("x", 1, 0, 0)),
			cand("b", 0, victim("y", 100, 0, 0), victim("z", 100, 0, 0)),
		}, "b"},
		{"lowest highest victim priority", []candidate{
			cand("a", 0, victim("x", 50, 0, 0)),
			cand("b", 0, victim("y", 10, 0, 0), victim("z", 10, 0, 0), victim("w", 10, 0, 0)),
		}, "b"},
		{"smallest sum of priorities", []candidate{
			cand("a", 0, victim("x", 10, 0, 0), victim("y", 10, 0, 0)),
			cand("b", 0, victim("z", 10, 0, 0), victim("w", 5, 0, 0)),
		}, "b"},
		{"negative priorities shifted: fewer pods win", []candidate{
			cand("a", 0, victim("x", -10, 0, 0), victim("y", -10, 0, 0)),
			cand("b", 0, victim("z", -10, 0, 0)),
		}, "b"},
		{"fewest victims", []candidate{
			cand("a", 0, victim("x", 0, 0, 0), victim("y", 0, 0, 0)),
			cand("b", 0, victim("z", 0, 0, 0)),
		}, "b"},
		{"latest start of the highest priority victims", []candidate{
			cand("a", 0, victim("x", 10, 0, 5), victim("y", 1, 0, 50)),
			cand("b", 0, victim("z", 10, 0, 20), victim("w", 1, 0, 0)),
		}, "b"},
		{"a victim not started counts as started now", []candidate{
			cand("a", 0, victim("x", 10, 0, 30)),
			cand("b", 0, victim("y", 10, 0, -1)),
		}, "b"},
		{"first of equals", []candidate{
			cand("a", 0, victim("x", 10, 0, 5)),
			cand("b", 0, victim("y", 10, 0, 5)),
		}, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cands[pickCandidate(tc.cands, now)].node.name; got != tc.want {
				t.Errorf("picked %s, want %s", got, tc.want)
			}
		})
	}
	if pickCandidate(nil, now) != -1 {
		t.Error("picked from none")
	}
}

func TestNumCandidates(t *testing.T) {
	for _, tc := range []struct{ potential, want int }{{3, 3}, {100, 100}, {500, 100}, {5000, 500}} {
		if got := numCandidates(tc.potential); got != tc.want {
			t.Errorf("numCandidates(%d) = %d, want %d", tc.potential, got, tc.want)
		}
	}
}

func TestPodQueueOrder(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	q := newPodQueue(clk)
	defer q.ShutDown()
	q.add(queueItem{key: "low-early", priority: 1, queuedAt: t0}, 0)
	q.add(queueItem{key: "high-late", priority: 100, queuedAt: t0.Add(2 * time.Second)}, 0)
	q.add(queueItem{key: "high-early", priority: 100, queuedAt: t0.Add(time.Second)}, 0)
	q.add(queueItem{key: "high-early", priority: 100, queuedAt: t0.Add(time.Second)}, 0) // once only
	q.add(queueItem{key: "backing-off", priority: 1000, queuedAt: t0}, time.Minute)
	var got []string
	for range 3 {
		key, shutdown := q.get()
		if shutdown {
			t.Fatal("shut down")
		}
		got = append(got, key)
	}
	if want := []string{"high-early", "high-late", "low-early"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	// The backing-off pod comes once its delay has passed.
	done := make(chan string, 1)
	go func() {
		key, _ := q.get()
		done <- key
	}()
	// The fake clock has no event for a waiter arriving: poll, bounded.
	for deadline := time.Now().Add(10 * time.Second); !clk.HasWaiters(); {
		if time.Now().After(deadline) {
			t.Fatal("the back-off never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Minute)
	select {
	case key := <-done:
		if key != "backing-off" {
			t.Errorf("got %s", key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the backed-off pod never came")
	}
	q.ShutDown()
	if _, shutdown := q.get(); !shutdown {
		t.Error("get after ShutDown")
	}
}

func BenchmarkPreempt(b *testing.B) {
	// 1,000 full nodes of 30 pods at priorities 0..9; a pod of priority 5
	// needing a whole pod's room.
	s := New(nil, Config{})
	for i := range 1000 {
		s.onNode(&v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i)},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		})
	}
	for i := range 30000 {
		prio := int32(i % 10)
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("bound-%d", i)}, Spec: v1.PodSpec{
			NodeName: fmt.Sprintf("node-%04d", i%1000), SchedulerName: DefaultSchedulerName, Priority: &prio,
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}},
		}}
		s.onPod(pod)
	}
	e := preemptor(5, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.mu.Lock()
		if node, _ := s.decide(e); node != "" {
			b.Fatal("fits")
		}
		pre := s.preempt(e, s.failures)
		if pre.node == "" || len(pre.victims) != 1 {
			b.Fatalf("preemption: %+v", pre)
		}
		s.nominate(e, "")
		s.mu.Unlock()
	}
}

// A preemptor whose nominated node still has a lower-priority pod
// terminating waits instead of preempting more (kube's
// PodEligibleToPreemptOthers); a pod of preemptionPolicy Never does not
// preempt at all.
func TestPreemptEligibility(t *testing.T) {
	s := New(nil, Config{})
	s.onNode(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourcePods: resource.MustParse("110")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	})
	low := int32(1)
	bound := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "low", UID: "u-low"}, Spec: v1.PodSpec{
		NodeName: "n", Priority: &low,
		Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("800m")}}}},
	}}
	s.onPod(bound)
	s.mu.Lock()
	defer s.mu.Unlock()

	// A pod of lower priority nominated there earlier loses its nomination.
	earlier := preemptor(50, 100)
	s.nominate(earlier, "n")
	e := preemptor(100, 500)
	if node, _ := s.decide(e); node != "" {
		t.Fatal("fits")
	}
	pre := s.preempt(e, s.failures)
	if pre.node != "n" || len(pre.victims) != 1 || pre.victims[0].Name != "low" || pre.msg != "" || e.nominated != "n" {
		t.Fatalf("preemption %+v, nominated %q", pre, e.nominated)
	}
	if earlier.nominated != "" || len(pre.unnominated) != 1 || len(s.nominated["n"]) != 1 {
		t.Errorf("the lower-priority nomination stays: %q, unnominated %d, nominated to n %d", earlier.nominated, len(pre.unnominated), len(s.nominated["n"]))
	}

	// The victim is terminating: no second preemption.
	terminating := bound.DeepCopy()
	now := metav1.NewTime(t0)
	terminating.DeletionTimestamp = &now
	terminating.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
	s.mu.Unlock()
	s.onPod(terminating)
	s.mu.Lock()
	s.decide(e)
	if pre := s.preempt(e, s.failures); pre.node != "" || pre.msg != "preemption: "+preemptionTerminating || e.nominated != "n" {
		t.Errorf("while the victim terminates: %+v, nominated %q", pre, e.nominated)
	}

	never := v1.PreemptNever
	n := preemptor(100, 500)
	n.pod.Spec.PreemptionPolicy = &never
	s.decide(n)
	if pre := s.preempt(n, s.failures); pre.node != "" || pre.msg != "preemption: "+preemptionNever || pre.clearNomination {
		t.Errorf("preemptionPolicy Never: %+v", pre)
	}
}
