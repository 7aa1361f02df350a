package scheduler

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func reqs(cpu, mem string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}}
	if cpu != "" {
		r.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		r.Requests[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return r
}

func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name             string
		spec             v1.PodSpec
		cpu, mem         int64
		nzCPU, nzMem     int64
		gpu              int64
		wantScalarLength int
	}{
		{
			name:  "no requests",
			spec:  v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
			nzCPU: 100, nzMem: 200 << 20,
		},
		{
			name: "containers add up",
			spec: v1.PodSpec{Containers: []v1.Container{
				{Name: "a", Resources: reqs("200m", "1Gi")},
				{Name: "b", Resources: reqs("300m", "")},
			}},
			cpu: 500, mem: 1 << 30, nzCPU: 500, nzMem: 1<<30 + 200<<20,
		},
		{
			// kube's example: init 2 cpu/1G and 2 cpu/3G, app 2+1 cpu/1G+1G: 3 cpu, 3G.
			name: "largest init container wins per resource",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					{Name: "i1", Resources: reqs("2", "1G")},
					{Name: "i2", Resources: reqs("2", "3G")},
				},
				Containers: []v1.Container{
					{Name: "c1", Resources: reqs("2", "1G")},
					{Name: "c2", Resources: reqs("1", "1G")},
				},
			},
			cpu: 3000, mem: 3e9, nzCPU: 3000, nzMem: 3e9,
		},
		{
			name: "sidecars run beside later init containers and the app",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					{Name: "side", RestartPolicy: &always, Resources: reqs("1", "")},
					{Name: "init", Resources: reqs("3", "")},
				},
				Containers: []v1.Container{{Name: "app", Resources: reqs("1", "")}},
			},
			// init phase: 1 (sidecar) + 3 = 4; running: 1 + 1 = 2.
			cpu: 4000, nzCPU: 4000, nzMem: 2 * 200 << 20,
		},
		{
			name: "overhead and extended resources",
			spec: v1.PodSpec{
				Overhead: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("1"), "example.com/gpu": resource.MustParse("2"),
				}}}},
			},
			cpu: 1250, nzCPU: 1250, nzMem: 200 << 20, gpu: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tc.spec}
			r := podRequests(pod, false)
			nz := podRequests(pod, true)
			if r.MilliCPU != tc.cpu || r.Memory != tc.mem {
				t.Errorf("requests = %dm cpu, %d memory; want %dm, %d", r.MilliCPU, r.Memory, tc.cpu, tc.mem)
			}
			if nz.MilliCPU != tc.nzCPU || nz.Memory != tc.nzMem {
				t.Errorf("non-zero requests = %dm cpu, %d memory; want %dm, %d", nz.MilliCPU, nz.Memory, tc.nzCPU, tc.nzMem)
			}
			if got := r.Scalar["example.com/gpu"]; got != tc.gpu {
				t.Errorf("gpu = %d, want %d", got, tc.gpu)
			}
		})
	}
}

func TestFitErrorMessage(t *testing.T) {
	never := v1.PreemptNever
	taint := failure{kind: failTaint, taint: v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	cpu := failure{kind: failResources, insufficient: []string{"Insufficient cpu"}}
	both := failure{kind: failResources, insufficient: []string{"Insufficient cpu", "Insufficient memory"}}
	tests := []struct {
		name     string
		pod      *v1.Pod
		failures []failure
		want     string
	}{
		{
			name:     "taint and resources",
			pod:      &v1.Pod{},
			failures: []failure{cpu, taint, cpu},
			want:     "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
		},
		{
			name:     "a node with two reasons counts in both",
			pod:      &v1.Pod{},
			failures: []failure{both, cpu},
			want:     "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		},
		{
			name:     "unresolvable only",
			pod:      &v1.Pod{},
			failures: []failure{{kind: failAffinity}, {kind: failUnschedulable}, {kind: failAffinity}},
			want:     "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		},
		{
			name:     "preemptionPolicy Never",
			pod:      &v1.Pod{Spec: v1.PodSpec{PreemptionPolicy: &never}},
			failures: []failure{{kind: failPorts}},
			want:     "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: not eligible due to preemptionPolicy=Never.",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// With no pods to preempt, every node the filters rejected
			// for a resolvable reason has no victims.
			s := New(nil, Config{})
			for i := range tc.failures {
				tc.failures[i].node = &nodeInfo{name: fmt.Sprintf("node-%d", i)}
			}
			e := newPodEntry("ns/p", tc.pod)
			got := fitErrorMessage(len(tc.failures), tc.failures) + " " + s.preempt(e, tc.failures).msg
			if got != tc.want {
				t.Errorf("message:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestNodeMatcher(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": "a", "cores": "8", "ssd": ""}}}
	expr := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
		return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	podWith := func(selector map[string]string, terms ...v1.NodeSelectorTerm) *v1.Pod {
		pod := &v1.Pod{Spec: v1.PodSpec{NodeSelector: selector}}
		if terms != nil {
			pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
			}}
		}
		return pod
	}
	term := func(exprs ...v1.NodeSelectorRequirement) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: exprs}
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"nothing asked", podWith(nil), true},
		{"selector matches", podWith(map[string]string{"zone": "a"}), true},
		{"selector value differs", podWith(map[string]string{"zone": "b"}), false},
		{"selector key missing", podWith(map[string]string{"gpu": ""}), false},
		{"In", podWith(nil, term(expr("zone", v1.NodeSelectorOpIn, "b", "a"))), true},
		{"In misses", podWith(nil, term(expr("zone", v1.NodeSelectorOpIn, "b"))), false},
		{"NotIn", podWith(nil, term(expr("zone", v1.NodeSelectorOpNotIn, "b"))), true},
		{"NotIn on a missing label", podWith(nil, term(expr("rack", v1.NodeSelectorOpNotIn, "r1"))), true},
		{"NotIn excludes", podWith(nil, term(expr("zone", v1.NodeSelectorOpNotIn, "a"))), false},
		{"Exists", podWith(nil, term(expr("ssd", v1.NodeSelectorOpExists))), true},
		{"DoesNotExist", podWith(nil, term(expr("ssd", v1.NodeSelectorOpDoesNotExist))), false},
		{"Gt", podWith(nil, term(expr("cores", v1.NodeSelectorOpGt, "4"))), true},
		{"Gt equal", podWith(nil, term(expr("cores", v1.NodeSelectorOpGt, "8"))), false},
		{"Lt", podWith(nil, term(expr("cores", v1.NodeSelectorOpLt, "16"))), true},
		{"Gt on a non-number label", podWith(nil, term(expr("zone", v1.NodeSelectorOpGt, "1"))), false},
		{"Gt with a bad value matches nothing", podWith(nil, term(expr("cores", v1.NodeSelectorOpGt, "x"))), false},
		{"expressions are ANDed", podWith(nil, term(expr("zone", v1.NodeSelectorOpIn, "a"), expr("cores", v1.NodeSelectorOpLt, "4"))), false},
		{"terms are ORed", podWith(nil, term(expr("zone", v1.NodeSelectorOpIn, "b")), term(expr("zone", v1.NodeSelectorOpIn, "a"))), true},
		{"an empty term matches nothing", podWith(nil, v1.NodeSelectorTerm{}), false},
		{"selector and affinity both apply", podWith(map[string]string{"zone": "b"}, term(expr("zone", v1.NodeSelectorOpIn, "a"))), false},
		{"matchFields on the name", podWith(nil, v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{expr("metadata.name", v1.NodeSelectorOpIn, "node-1")}}), true},
		{"matchFields NotIn", podWith(nil, v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{expr("metadata.name", v1.NodeSelectorOpNotIn, "node-1")}}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newNodeMatcher(tc.pod)
			if got := m.matches(node); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilterOrderAndTaints(t *testing.T) {
	ready := []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	newNode := func(mut func(*v1.Node)) *nodeInfo {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{
			Conditions:  ready,
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourcePods: resource.MustParse("10")},
		}}
		if mut != nil {
			mut(n)
		}
		ni := &nodeInfo{name: n.Name}
		ni.setNode(n)
		return ni
	}
	pod := func(mut func(*v1.Pod)) *podEntry {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: reqs("500m", "")}}}}
		if mut != nil {
			mut(p)
		}
		return newPodEntry("ns/p", p)
	}
	tests := []struct {
		name   string
		node   *nodeInfo
		pod    *podEntry
		want   failureKind
		reason string
	}{
		{"fits", newNode(nil), pod(nil), fits, ""},
		{"cordoned before tainted", newNode(func(n *v1.Node) {
			n.Spec.Unschedulable = true
			n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}
		}), pod(nil), failUnschedulable, reasonUnschedulable},
		{"cordoned but tolerated", newNode(func(n *v1.Node) { n.Spec.Unschedulable = true }), pod(func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists}}
		}), fits, ""},
		{"NoExecute taint", newNode(func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}}
		}), pod(nil), failTaint, "node(s) had untolerated taint {k: v}"},
		{"PreferNoSchedule is no filter", newNode(func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectPreferNoSchedule}}
		}), pod(nil), fits, ""},
		{"toleration with the wrong value", newNode(func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
		}), pod(func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpEqual, Value: "w"}}
		}), failTaint, "node(s) had untolerated taint {k: v}"},
		{"not ready is the not-ready taint", newNode(func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		}), pod(nil), failTaint, "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"},
		{"unknown is the unreachable taint", newNode(func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown}}
		}), pod(nil), failTaint, "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"},
		{"not ready but tolerated", newNode(func(n *v1.Node) {
			n.Status.Conditions = nil
		}), pod(func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
		}), fits, ""},
		{"affinity before resources", newNode(nil), pod(func(p *v1.Pod) {
			p.Spec.NodeSelector = map[string]string{"x": "y"}
			p.Spec.Containers[0].Resources = reqs("2", "")
		}), failAffinity, reasonAffinity},
		{"too much cpu", newNode(nil), pod(func(p *v1.Pod) { p.Spec.Containers[0].Resources = reqs("1500m", "") }), failResources, "Insufficient cpu"},
		{"no allocatable pods", newNode(func(n *v1.Node) { delete(n.Status.Allocatable, v1.ResourcePods) }), pod(nil), failResources, reasonTooManyPods},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filter(tc.pod, tc.node, nil)
			if f.kind != tc.want {
				t.Fatalf("kind = %v, want %v (%v)", f.kind, tc.want, f.reasons())
			}
			if tc.reason != "" && f.reasons()[0] != tc.reason {
				t.Errorf("reason = %q, want %q", f.reasons()[0], tc.reason)
			}
		})
	}
}

func TestHostPortConflicts(t *testing.T) {
	ni := &nodeInfo{}
	ni.addPod(&assignedPod{ports: []hostPort{{ip: "10.0.0.1", protocol: v1.ProtocolTCP, port: 80}, {ip: bindAllHostIP, protocol: v1.ProtocolUDP, port: 53}}})
	tests := []struct {
		hp   hostPort
		want bool
	}{
		{hostPort{bindAllHostIP, v1.ProtocolTCP, 80}, true},
		{hostPort{"10.0.0.1", v1.ProtocolTCP, 80}, true},
		{hostPort{"10.0.0.2", v1.ProtocolTCP, 80}, false},
		{hostPort{"10.0.0.2", v1.ProtocolUDP, 53}, true},
		{hostPort{"10.0.0.1", v1.ProtocolUDP, 80}, false},
		{hostPort{bindAllHostIP, v1.ProtocolTCP, 81}, false},
	}
	for _, tc := range tests {
		if got := ni.portConflict(tc.hp); got != tc.want {
			t.Errorf("conflict(%v) = %v, want %v", tc.hp, got, tc.want)
		}
	}
	ni.removePod(&assignedPod{ports: []hostPort{{ip: "10.0.0.1", protocol: v1.ProtocolTCP, port: 80}}})
	if ni.portConflict(hostPort{bindAllHostIP, v1.ProtocolTCP, 80}) {
		t.Error("a removed pod's port still conflicts")
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct{ pct, nodes, want int }{
		{0, 3, 3},
		{0, 99, 99},
		{0, 100, 100},
		{0, 1000, 420},
		{0, 5000, 500},
		{0, 6000, 300},
		{10, 500, 100},
		{100, 1000, 1000},
	}
	for _, tc := range tests {
		if got := numFeasibleNodesToFind(tc.pct, tc.nodes); got != tc.want {
			t.Errorf("numFeasibleNodesToFind(%d, %d) = %d, want %d", tc.pct, tc.nodes, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	s := New(nil, Config{})
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for attempts, w := range want {
		if got := s.backoff(attempts); got != w {
			t.Errorf("backoff(%d) = %v, want %v", attempts, got, w)
		}
	}
}

func TestPodScheduledPatch(t *testing.T) {
	now := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	if p := string(podScheduledPatch(pod, "m1", now, nil)); p != `{"metadata":{"uid":"u1"},"status":{"conditions":[{"type":"PodScheduled","status":"False","lastProbeTime":null,"lastTransitionTime":"2025-01-01T00:00:00Z","reason":"Unschedulable","message":"m1"}]}}` {
		t.Errorf("first patch = %s", p)
	}
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "m1", LastTransitionTime: earlier}}
	if p := podScheduledPatch(pod, "m1", now, nil); p != nil {
		t.Errorf("same condition patched again: %s", p)
	}
	if p := string(podScheduledPatch(pod, "m2", now, nil)); p != `{"metadata":{"uid":"u1"},"status":{"conditions":[{"type":"PodScheduled","status":"False","lastProbeTime":null,"lastTransitionTime":"2024-12-31T23:00:00Z","reason":"Unschedulable","message":"m2"}]}}` {
		t.Errorf("new message patch = %s (the transition time must stay)", p)
	}
}
