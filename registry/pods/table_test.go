package pods

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tableNow is the clock of the printer tests.
var tableNow = time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(tableNow.Add(-d)) }

// tpod builds a pod with the named containers and the given status.
func tpod(containers []string, status v1.PodStatus, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", CreationTimestamp: ago(10 * time.Minute)}, Status: status}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func running(name string, ready bool) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Ready: ready, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ago(time.Minute)}}}
}

func waiting(name, reason string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(name, reason string, exitCode, signal int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode, Signal: signal}}}
}

func withRestarts(cs v1.ContainerStatus, n int32, lastFinished time.Duration) v1.ContainerStatus {
	cs.RestartCount = n
	if lastFinished > 0 {
		cs.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(lastFinished)}}
	}
	return cs
}

func cond(t v1.PodConditionType, s v1.ConditionStatus, reason string) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: s, Reason: reason}
}

func withInit(names ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, n := range names {
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
		}
	}
}

func withSidecar(name string) func(*v1.Pod) {
	always := v1.ContainerRestartPolicyAlways
	return func(p *v1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: name, Image: "busybox", RestartPolicy: &always})
	}
}

func deleting(p *v1.Pod) {
	ts := ago(time.Second)
	p.DeletionTimestamp = &ts
}

func TestPodStatusColumns(t *testing.T) {
	started := true
	cases := []struct {
		name                    string
		pod                     *v1.Pod
		ready, status, restarts string
	}{
		{"new pod", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending}), "0/1", "Pending", "0"},
		{"no status at all", tpod([]string{"c"}, v1.PodStatus{}), "0/1", "", "0"},
		{"running and ready", tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{running("a", true), running("b", true)}}), "2/2", "Running", "0"},
		{"running, one not ready", tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{running("a", true), running("b", false)}}), "1/2", "Running", "0"},
		{"container creating", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			ContainerStatuses: []v1.ContainerStatus{waiting("c", "ContainerCreating")}}), "0/1", "ContainerCreating", "0"},
		{"image pull backoff", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			ContainerStatuses: []v1.ContainerStatus{waiting("c", "ImagePullBackOff")}}), "0/1", "ImagePullBackOff", "0"},
		{"crash loop with restarts", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{withRestarts(waiting("c", "CrashLoopBackOff"), 3, 5*time.Minute)}}),
			"0/1", "CrashLoopBackOff", "3 (5m ago)"},
		{"restarts without a last termination", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{withRestarts(running("c", true), 2, 0)}}), "1/1", "Running", "2"},
		{"restarts summed, latest termination shown", tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{withRestarts(running("a", true), 1, time.Hour), withRestarts(running("b", true), 4, 90*time.Second)}}),
			"2/2", "Running", "5 (90s ago)"},
		{"completed", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodSucceeded,
			ContainerStatuses: []v1.ContainerStatus{terminated("c", "Completed", 0, 0)}}), "0/1", "Completed", "0"},
		{"error", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodFailed,
			ContainerStatuses: []v1.ContainerStatus{terminated("c", "Error", 1, 0)}}), "0/1", "Error", "0"},
		{"terminated without reason: exit code", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodFailed,
			ContainerStatuses: []v1.ContainerStatus{terminated("c", "", 137, 0)}}), "0/1", "ExitCode:137", "0"},
		{"terminated without reason: signal", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodFailed,
			ContainerStatuses: []v1.ContainerStatus{terminated("c", "", 0, 9)}}), "0/1", "Signal:9", "0"},
		{"first container's reason wins (statuses walked backwards)", tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodPending,
			ContainerStatuses: []v1.ContainerStatus{waiting("a", "ErrImagePull"), waiting("b", "ContainerCreating")}}), "0/2", "ErrImagePull", "0"},
		{"completed container beside a running one, pod ready", tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodRunning,
			Conditions:        []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, "")},
			ContainerStatuses: []v1.ContainerStatus{terminated("a", "Completed", 0, 0), running("b", true)}}), "1/2", "Running", "0"},
		{"completed container beside a running one, pod not ready", tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodRunning,
			Conditions:        []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, "")},
			ContainerStatuses: []v1.ContainerStatus{terminated("a", "Completed", 0, 0), running("b", true)}}), "1/2", "NotReady", "0"},
		{"status reason", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}), "0/1", "Evicted", "0"},
		{"scheduling gated", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionFalse, v1.PodReasonSchedulingGated)}}), "0/1", "SchedulingGated", "0"},
		{"unschedulable is still Pending", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionFalse, v1.PodReasonUnschedulable)}}), "0/1", "Pending", "0"},
		{"init 0/1", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{waiting("i", "PodInitializing")},
			ContainerStatuses:     []v1.ContainerStatus{waiting("c", "PodInitializing")}}, withInit("i")), "0/1", "Init:0/1", "0"},
		{"init 1/2", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{terminated("i1", "Completed", 0, 0), running("i2", false)}}, withInit("i1", "i2")),
			"0/1", "Init:1/2", "0"},
		{"init error", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{terminated("i", "Error", 1, 0)}}, withInit("i")), "0/1", "Init:Error", "0"},
		{"init exit code", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{terminated("i", "", 2, 0)}}, withInit("i")), "0/1", "Init:ExitCode:2", "0"},
		{"init signal", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{terminated("i", "", 143, 15)}}, withInit("i")), "0/1", "Init:Signal:15", "0"},
		{"init crash loop counts init restarts", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{withRestarts(waiting("i", "CrashLoopBackOff"), 4, 2*time.Minute)}}, withInit("i")),
			"0/1", "Init:CrashLoopBackOff", "4 (2m ago)"},
		{"init done", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning,
			InitContainerStatuses: []v1.ContainerStatus{terminated("i", "Completed", 0, 0)},
			ContainerStatuses:     []v1.ContainerStatus{running("c", true)}}, withInit("i")), "1/1", "Running", "0"},
		{"sidecar started and ready counts as a container", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{cond(v1.PodInitialized, v1.ConditionTrue, "")},
			InitContainerStatuses: []v1.ContainerStatus{func() v1.ContainerStatus {
				cs := withRestarts(running("s", true), 2, 3*time.Minute)
				cs.Started = &started
				return cs
			}()},
			ContainerStatuses: []v1.ContainerStatus{withRestarts(running("c", true), 1, time.Hour)}}, withSidecar("s")), "2/2", "Running", "3 (3m ago)"},
		{"sidecar not started yet", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			InitContainerStatuses: []v1.ContainerStatus{waiting("s", "")}}, withSidecar("s")), "0/2", "Init:0/1", "0"},
		{"terminating", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{running("c", true)}}, deleting), "1/1", "Terminating", "0"},
		{"terminating pending pod", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending}, deleting), "0/1", "Terminating", "0"},
		{"deleted but succeeded shows the phase", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodSucceeded,
			ContainerStatuses: []v1.ContainerStatus{terminated("c", "Completed", 0, 0)}}, deleting), "0/1", "Completed", "0"},
		{"deleted but failed shows the phase", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodFailed}, deleting), "0/1", "Failed", "0"},
		{"node lost", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning, Reason: "NodeLost",
			ContainerStatuses: []v1.ContainerStatus{running("c", true)}}, deleting), "1/1", "Unknown", "0"},
		{"node lost, not deleted", tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodRunning, Reason: "NodeLost"}), "0/1", "NodeLost", "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := summarize(c.pod, tableNow)
			want := podSummary{ready: c.ready, status: c.status, restarts: c.restarts}
			if got != want {
				t.Errorf("got READY %q STATUS %q RESTARTS %q, want %q %q %q", got.ready, got.status, got.restarts, want.ready, want.status, want.restarts)
			}
		})
	}
}

func TestPodTableRow(t *testing.T) {
	s := NewStrategy()
	cols := s.TableColumns()
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
		if c.Description == "" {
			t.Errorf("column %s has no description", c.Name)
		}
	}
	wantNames := []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("columns %v, want %v", names, wantNames)
	}
	for i, c := range cols {
		if want := int32(0); i >= 5 {
			want = 1
			if c.Priority != want {
				t.Errorf("column %s priority %d, want %d", c.Name, c.Priority, want)
			}
		} else if c.Priority != want {
			t.Errorf("column %s priority %d, want %d", c.Name, c.Priority, want)
		}
	}

	pod := tpod([]string{"c"}, v1.PodStatus{
		Phase:             v1.PodRunning,
		PodIP:             "10.244.0.7",
		PodIPs:            []v1.PodIP{{IP: "10.244.0.7"}, {IP: "fd00::7"}},
		NominatedNodeName: "n2",
		Conditions:        []v1.PodCondition{cond("example.com/gate-a", v1.ConditionTrue, ""), cond("example.com/gate-b", v1.ConditionFalse, "")},
		ContainerStatuses: []v1.ContainerStatus{running("c", true)},
	}, func(p *v1.Pod) {
		p.Spec.NodeName = "n1"
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate-a"}, {ConditionType: "example.com/gate-b"}}
	})
	row, err := s.TableRow(pod, tableNow)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"p", "1/1", "Running", "0", "10m", "10.244.0.7", "n1", "n2", "1/2"}
	if !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("cells %#v, want %#v", row.Cells, want)
	}
	if row.Conditions != nil {
		t.Errorf("a running pod has row conditions %v", row.Conditions)
	}

	empty, err := s.TableRow(tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending}), tableNow)
	if err != nil {
		t.Fatal(err)
	}
	want = []any{"p", "0/1", "Pending", "0", "10m", "<none>", "<none>", "<none>", "<none>"}
	if !reflect.DeepEqual(empty.Cells, want) {
		t.Errorf("cells %#v, want %#v", empty.Cells, want)
	}

	for phase, message := range map[v1.PodPhase]string{v1.PodSucceeded: "The pod has completed successfully.", v1.PodFailed: "The pod failed."} {
		row, err := s.TableRow(tpod([]string{"c"}, v1.PodStatus{Phase: phase}), tableNow)
		if err != nil {
			t.Fatal(err)
		}
		wantCond := []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(phase), Message: message}}
		if !reflect.DeepEqual(row.Conditions, wantCond) {
			t.Errorf("%s: row conditions %v, want %v", phase, row.Conditions, wantCond)
		}
	}

	if _, err := s.TableRow(&v1.Node{}, tableNow); err == nil {
		t.Error("a Node printed as a pod")
	}
}
