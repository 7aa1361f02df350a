package nodes

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeTableRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-49 * time.Hour))
	ready := func(s v1.ConditionStatus) []v1.NodeCondition {
		return []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse}, {Type: v1.NodeReady, Status: s}}
	}
	info := v1.NodeSystemInfo{KubeletVersion: "v1.32.13", OSImage: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.1.0", ContainerRuntimeVersion: "containerd://1.7.0"}
	cases := []struct {
		name string
		node v1.Node
		want []any
	}{
		{"no status", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created}},
			[]any{"n", "Unknown", "<none>", "2d1h", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
		{"ready", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created},
			Status: v1.NodeStatus{Conditions: ready(v1.ConditionTrue), NodeInfo: info, Addresses: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "n"}, {Type: v1.NodeInternalIP, Address: "10.1.2.3"}, {Type: v1.NodeInternalIP, Address: "10.1.2.4"}, {Type: v1.NodeExternalIP, Address: "203.0.113.9"},
			}}},
			[]any{"n", "Ready", "<none>", "2d1h", "v1.32.13", "10.1.2.3", "203.0.113.9", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "containerd://1.7.0"}},
		{"not ready, cordoned, roles", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created, Labels: map[string]string{
			"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "", "kubernetes.io/role": "edge",
		}}, Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Conditions: ready(v1.ConditionFalse), NodeInfo: info}},
			[]any{"n", "NotReady,SchedulingDisabled", "control-plane,edge,worker", "2d1h", "v1.32.13", "<none>", "<none>", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "containerd://1.7.0"}},
		{"unknown ready, cordoned", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created},
			Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Conditions: ready(v1.ConditionUnknown)}},
			[]any{"n", "NotReady,SchedulingDisabled", "<none>", "2d1h", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
		{"cordoned without conditions", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created}, Spec: v1.NodeSpec{Unschedulable: true}},
			[]any{"n", "Unknown,SchedulingDisabled", "<none>", "2d1h", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
	}
	s := NewStrategy()
	if n, m := len(s.TableColumns()), len(cases[0].want); n != m {
		t.Fatalf("%d columns, %d cells", n, m)
	}
	for _, c := range cases {
		row, err := s.TableRow(&c.node, now)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(row.Cells, c.want) {
			t.Errorf("%s: cells %#v, want %#v", c.name, row.Cells, c.want)
		}
	}
}
