package nodelifecycle

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/sharedinformers"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newUnstarted returns a controller whose methods a test calls directly:
// its informers never start, and its queues (which Start would shut down)
// are shut down when the test ends.
func newUnstarted(t *testing.T, client kubernetes.Interface, cfg Config) *Controller {
	t.Helper()
	c, err := New(client, sharedinformers.NewFactory(client), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.shutDownQueues)
	return c
}

func TestEvictionDecision(t *testing.T) {
	unreachable := v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}
	custom := v1.Taint{Key: "maintenance", Value: "now", Effect: v1.TaintEffectNoExecute}
	tol := func(key string, seconds *int64) v1.Toleration {
		return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: seconds}
	}
	tests := []struct {
		name      string
		taints    []v1.Taint
		tols      []v1.Toleration
		tolerated bool
		wait      time.Duration
	}{
		// What DefaultTolerationSeconds admission gives every pod.
		{"default toleration", []v1.Taint{unreachable}, []v1.Toleration{tol(v1.TaintNodeUnreachable, ptr.To[int64](300))}, true, 300 * time.Second},
		{"no toleration", []v1.Taint{unreachable}, nil, false, 0},
		{"custom taint untolerated", []v1.Taint{unreachable, custom}, []v1.Toleration{tol(v1.TaintNodeUnreachable, ptr.To[int64](300))}, false, 0},
		{"tolerated forever", []v1.Taint{unreachable}, []v1.Toleration{tol(v1.TaintNodeUnreachable, nil)}, true, -1},
		{"shortest wins", []v1.Taint{unreachable, custom}, []v1.Toleration{tol(v1.TaintNodeUnreachable, ptr.To[int64](300)), tol("maintenance", ptr.To[int64](60))}, true, 60 * time.Second},
		{"zero seconds is now", []v1.Taint{unreachable}, []v1.Toleration{tol(v1.TaintNodeUnreachable, ptr.To[int64](0))}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, used := matchingTolerations(tc.taints, tc.tols)
			if ok != tc.tolerated {
				t.Fatalf("tolerated = %v, want %v", ok, tc.tolerated)
			}
			if ok {
				if got := minTolerationTime(used); got != tc.wait {
					t.Errorf("wait = %v, want %v", got, tc.wait)
				}
			}
		})
	}
}

func TestNoScheduleTaintDiff(t *testing.T) {
	node := &v1.Node{
		Spec: v1.NodeSpec{Unschedulable: true, Taints: []v1.Taint{
			{Key: "user", Effect: v1.TaintEffectNoSchedule},
			{Key: v1.TaintNodeDiskPressure, Effect: v1.TaintEffectNoSchedule},
			{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute},
		}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionUnknown},
			{Type: v1.NodePIDPressure, Status: v1.ConditionTrue},
			{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse},
		}},
	}
	add, remove := noScheduleTaintDiff(node)
	var a, r []string
	for _, t := range add {
		a = append(a, t.Key)
	}
	for _, t := range remove {
		r = append(r, t.Key)
	}
	if want := []string{v1.TaintNodeUnreachable, v1.TaintNodePIDPressure, v1.TaintNodeUnschedulable}; !slices.Equal(a, want) {
		t.Errorf("add %q, want %q", a, want)
	}
	if want := []string{v1.TaintNodeDiskPressure}; !slices.Equal(r, want) {
		t.Errorf("remove %q, want %q", r, want)
	}
}

func TestZoneState(t *testing.T) {
	c := newUnstarted(t, fake.NewClientset(), Config{Logger: quiet})
	cond := func(s v1.ConditionStatus) *v1.NodeCondition { return &v1.NodeCondition{Type: v1.NodeReady, Status: s} }
	T, F, U := cond(v1.ConditionTrue), cond(v1.ConditionFalse), cond(v1.ConditionUnknown)
	tests := []struct {
		name  string
		conds []*v1.NodeCondition
		want  zoneState
	}{
		{"all ready", []*v1.NodeCondition{T, T}, stateNormal},
		{"one of two lost", []*v1.NodeCondition{T, U}, stateNormal},
		{"none ready", []*v1.NodeCondition{U, F}, stateFullDisruption},
		{"never posted counts as not ready", []*v1.NodeCondition{nil}, stateFullDisruption},
		{"two of three is not enough", []*v1.NodeCondition{T, U, U}, stateNormal},
		{"three of five", []*v1.NodeCondition{T, T, U, U, F}, statePartialDisruption},
		{"three of six is under 55%", []*v1.NodeCondition{T, T, T, U, U, F}, stateNormal},
	}
	for _, tc := range tests {
		if got := c.computeZoneState(tc.conds); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if r := c.zoneRate(10, statePartialDisruption); r != 0 {
		t.Errorf("small unhealthy zone rate %v, want 0", r)
	}
	if r := c.zoneRate(51, statePartialDisruption); r != 0.01 {
		t.Errorf("large unhealthy zone rate %v, want 0.01", r)
	}
	if r := c.zoneRate(51, stateFullDisruption); r != 0.1 {
		t.Errorf("fully disrupted zone rate %v, want 0.1", r)
	}
}

// TestFullDisruption checks kube's "every node is down" rule: no NoExecute
// tainting, and existing NoExecute taints removed.
func TestFullDisruption(t *testing.T) {
	tainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{Taints: []v1.Taint{unreachableTaint}}}
	client := fake.NewClientset(tainted)
	c := newUnstarted(t, client, Config{Logger: quiet})
	c.tainters[""] = newZoneTainter(c.cfg.EvictionRate, c.cfg.Clock)
	c.zoneStates[""] = stateNormal
	c.tainters[""].add("b")
	unknown := &v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown}
	c.handleDisruption(context.Background(), map[string][]*v1.NodeCondition{"": {unknown, unknown}}, []*v1.Node{tainted})
	if c.zoneStates[""] != stateFullDisruption {
		t.Errorf("zone state %s", c.zoneStates[""])
	}
	if got := c.tainters[""].next(); len(got) != 0 {
		t.Errorf("nodes tainted in full disruption: %v", got)
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("taints left: %v", node.Spec.Taints)
	}
	// One node back: normal rate again, the queued node goes through.
	ready := &v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue}
	c.handleDisruption(context.Background(), map[string][]*v1.NodeCondition{"": {ready, unknown}}, nil)
	if c.zoneStates[""] != stateNormal {
		t.Errorf("zone state %s after recovery", c.zoneStates[""])
	}
	if got := c.tainters[""].next(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after recovery next() = %v, want [b]", got)
	}
}

func TestZoneTainter(t *testing.T) {
	c := newUnstarted(t, fake.NewClientset(), Config{Logger: quiet, EvictionRate: 1000})
	z := newZoneTainter(1000, c.cfg.Clock)
	if !z.add("a") || z.add("a") {
		t.Fatal("add is not unique")
	}
	z.add("b")
	if got := z.next(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("next = %v (burst 1)", got)
	}
	// A tainted node stays known: adding it again does nothing until removed.
	if z.add("a") {
		t.Error("a tainted node was queued again")
	}
	z.remove("a")
	if !z.add("a") {
		t.Error("a removed node could not be queued again")
	}
}
