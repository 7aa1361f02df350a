package disruption

import (
	"errors"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func intOrPercent(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func TestExpectedAndDesired(t *testing.T) {
	cases := []struct {
		min, max          string // "" unset
		pods              int
		expected, desired int32
		err               bool
	}{
		{min: "2", pods: 3, expected: 3, desired: 2},
		{min: "5", pods: 3, expected: 3, desired: 5},
		{min: "0", pods: 0, expected: 0, desired: 0},
		// Percentages of the pods, rounded up.
		{min: "50%", pods: 3, expected: 3, desired: 2},
		{min: "34%", pods: 3, expected: 3, desired: 2},
		{min: "33%", pods: 3, expected: 3, desired: 1},
		{min: "1%", pods: 3, expected: 3, desired: 1},
		{min: "0%", pods: 5, expected: 5, desired: 0},
		{min: "100%", pods: 7, expected: 7, desired: 7},
		{min: "50%", pods: 0, expected: 0, desired: 0},
		{min: "75%", pods: 4, expected: 4, desired: 3},
		{max: "1", pods: 3, expected: 3, desired: 2},
		{max: "5", pods: 3, expected: 3, desired: 0},
		{max: "0", pods: 3, expected: 3, desired: 3},
		// maxUnavailable rounds up too: fewer healthy pods are desired.
		{max: "50%", pods: 3, expected: 3, desired: 1},
		{max: "10%", pods: 10, expected: 10, desired: 9},
		{max: "1%", pods: 10, expected: 10, desired: 9},
		{max: "34%", pods: 3, expected: 3, desired: 1},
		{max: "100%", pods: 4, expected: 4, desired: 0},
		{max: "0%", pods: 4, expected: 4, desired: 4},
		{pods: 3, expected: 0, desired: 0},
		{min: "abc", pods: 3, err: true},
		{max: "1.5%", pods: 3, err: true},
	}
	for _, c := range cases {
		spec := &policyv1.PodDisruptionBudgetSpec{}
		if c.min != "" {
			spec.MinAvailable = intOrPercent(c.min)
		}
		if c.max != "" {
			spec.MaxUnavailable = intOrPercent(c.max)
		}
		expected, desired, err := expectedAndDesired(spec, c.pods)
		if (err != nil) != c.err {
			t.Errorf("min %q max %q pods %d: err %v, want error %v", c.min, c.max, c.pods, err, c.err)
			continue
		}
		if !c.err && (expected != c.expected || desired != c.desired) {
			t.Errorf("min %q max %q pods %d: expected %d desired %d, want %d %d", c.min, c.max, c.pods, expected, desired, c.expected, c.desired)
		}
	}
}

func TestDisruptionsAllowed(t *testing.T) {
	cases := []struct{ healthy, desired, expected, want int32 }{
		{3, 2, 3, 1},
		{5, 2, 5, 3},
		{2, 2, 3, 0},
		{1, 2, 3, 0},
		{3, 0, 0, 0}, // no pods expected: nothing allowed yet
		{3, 0, 3, 3},
	}
	for _, c := range cases {
		if got := disruptionsAllowed(c.healthy, c.desired, c.expected); got != c.want {
			t.Errorf("disruptionsAllowed(%d, %d, %d) = %d, want %d", c.healthy, c.desired, c.expected, got, c.want)
		}
	}
}

func pod(name string, ready, deleting bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	}
	return p
}

// cached is what the shared informer keeps of pods.
func cached(pods ...*v1.Pod) []*sharedinformers.Pod {
	out := make([]*sharedinformers.Pod, len(pods))
	for i, p := range pods {
		obj, err := sharedinformers.Transform(p)
		if err != nil {
			panic(err)
		}
		out[i] = obj.(*sharedinformers.Pod)
	}
	return out
}

func TestDisruptedPodsAndHealthy(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 17, 19, 0, time.UTC)
	timeout := 2 * time.Minute
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	pods := cached(
		pod("recent", true, false),   // recorded 30s ago: kept, not healthy
		pod("old", true, false),      // recorded 3m ago: dropped (NotDeleted), healthy
		pod("going", true, true),     // being deleted: dropped, not healthy
		pod("ready", true, false),    // healthy
		pod("unready", false, false), // not healthy
		pod("recent2", false, false), // recorded 1m ago: kept
		pod("deleting", false, true), // not recorded, being deleted
		pod("exact", true, false),    // recorded exactly timeout ago: kept, healthy (kube's edges)
	)
	recorded := map[string]metav1.Time{
		"recent":  at(30 * time.Second),
		"old":     at(3 * time.Minute),
		"going":   at(10 * time.Second),
		"gone":    at(10 * time.Second), // no such pod: dropped
		"recent2": at(time.Minute),
		"exact":   at(timeout),
	}
	kept, expired, recheck := disruptedPods(pods, recorded, now, timeout)
	want := map[string]metav1.Time{"recent": recorded["recent"], "recent2": recorded["recent2"], "exact": recorded["exact"]}
	if !reflect.DeepEqual(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if len(expired) != 1 || expired[0].Name != "old" {
		t.Errorf("expired %v, want [old]", expired)
	}
	if recheck == nil || !recheck.Equal(now) {
		t.Errorf("recheck %v, want %v (the earliest deadline)", recheck, now)
	}
	if got := countHealthy(pods, kept, now, timeout); got != 3 {
		t.Errorf("healthy %d, want 3 (old, ready, exact)", got)
	}

	kept, expired, recheck = disruptedPods(pods, nil, now, timeout)
	if len(kept) != 0 || kept == nil || expired != nil || recheck != nil {
		t.Errorf("nothing recorded: %v %v %v", kept, expired, recheck)
	}
}

func budget(generation int64, st policyv1.PodDisruptionBudgetStatus) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Generation: generation}, Status: st}
}

func TestNewStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 20, 17, 18, 0, time.UTC)
	t1 := t0.Add(time.Minute)

	// A new budget: computed, condition True since t0.
	st, changed := newStatus(budget(1, policyv1.PodDisruptionBudgetStatus{}), 3, 2, 3, map[string]metav1.Time{}, t0)
	want := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
		DisruptedPods: map[string]metav1.Time{},
		Conditions: []metav1.Condition{{
			Type: "DisruptionAllowed", Status: "True", ObservedGeneration: 1, Reason: "SufficientPods", LastTransitionTime: metav1.NewTime(t0),
		}},
	}
	if !changed || !reflect.DeepEqual(st, want) {
		t.Fatalf("new budget: changed %v\n got  %+v\n want %+v", changed, st, want)
	}

	// The same again: nothing to write (nil and empty disruptedPods agree).
	b := budget(1, st)
	b.Status.DisruptedPods = nil
	if _, changed := newStatus(b, 3, 2, 3, map[string]metav1.Time{}, t1); changed {
		t.Error("unchanged status reported as changed")
	}

	// Fewer healthy pods: False since t1.
	st2, changed := newStatus(budget(1, st), 2, 2, 3, map[string]metav1.Time{}, t1)
	if !changed || st2.DisruptionsAllowed != 0 || st2.Conditions[0].Status != "False" || st2.Conditions[0].Reason != "InsufficientPods" || !st2.Conditions[0].LastTransitionTime.Time.Equal(t1) {
		t.Errorf("insufficient: %+v", st2)
	}
	if st.Conditions[0].Status != "True" {
		t.Error("newStatus changed the budget's conditions in place")
	}

	// A new generation: rewritten even with the same numbers; the
	// condition's transition time stays.
	st3, changed := newStatus(budget(2, st), 3, 2, 3, map[string]metav1.Time{}, t1)
	if !changed || st3.ObservedGeneration != 2 || st3.Conditions[0].ObservedGeneration != 2 || !st3.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("new generation: %+v", st3)
	}

	// An eviction set the condition False and allowed 0 already: the
	// controller agrees and writes nothing.
	evicted := st
	evicted.DisruptionsAllowed = 0
	evicted.CurrentHealthy = 2
	evicted.Conditions = []metav1.Condition{{Type: "DisruptionAllowed", Status: "False", ObservedGeneration: 1, Reason: "InsufficientPods", LastTransitionTime: metav1.NewTime(t1)}}
	if _, changed := newStatus(budget(1, evicted), 2, 2, 3, map[string]metav1.Time{}, t1); changed {
		t.Error("up-to-date status after an eviction reported as changed")
	}

	// A stale condition reason alone is a change.
	stale := st
	stale.Conditions = []metav1.Condition{{Type: "DisruptionAllowed", Status: "False", ObservedGeneration: 1, Reason: "SyncFailed", LastTransitionTime: metav1.NewTime(t0)}}
	st4, changed := newStatus(budget(1, stale), 3, 2, 3, map[string]metav1.Time{}, t1)
	if !changed || st4.Conditions[0].Reason != "SufficientPods" || st4.Conditions[0].Message != "" {
		t.Errorf("after SyncFailed: %+v", st4)
	}
}

func TestFailSafeStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 20, 17, 18, 0, time.UTC)
	b := budget(1, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 2, CurrentHealthy: 4, DesiredHealthy: 2, ExpectedPods: 4})
	st, changed := failSafeStatus(b, errors.New("boom"), t0)
	if !changed || st.DisruptionsAllowed != 0 || st.CurrentHealthy != 4 || len(st.Conditions) != 1 {
		t.Fatalf("fail safe: %v %+v", changed, st)
	}
	c := st.Conditions[0]
	if c.Type != "DisruptionAllowed" || c.Status != "False" || c.Reason != "SyncFailed" || c.Message != "boom" || c.ObservedGeneration != 1 || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("condition %+v", c)
	}
	if b.Status.DisruptionsAllowed != 2 {
		t.Error("failSafeStatus changed the budget in place")
	}
	if _, changed := failSafeStatus(budget(1, st), errors.New("boom"), t0.Add(time.Minute)); changed {
		t.Error("the same failure again reported as a change")
	}
}
