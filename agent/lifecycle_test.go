package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// TestPodLifecycle runs the seeds' state table on a real server: a pod is
// bound through pods/binding, goes Pending → Running, and ends (or keeps
// restarting) as its restart policy says.
func TestPodLifecycle(t *testing.T) {
	e := start(t, fastConfig(2))
	e.waitNodeReady("node-1")
	e.waitNodeReady("node-2")
	oom := []string{"stress", "--vm", "1", "--vm-bytes", "250M", "--vm-hang", "1"}
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		argv   []string
		// second container's command, when the pod has two
		second   []string
		memLimit string
		// want: a terminal phase, or Running with restarts
		phase    v1.PodPhase
		restarts bool
		reason   string // terminated reason of the (first) container
		code     int32
	}{
		{name: "exit0-always", policy: v1.RestartPolicyAlways, argv: []string{"sh", "-c", "sleep 0.3; exit 0"}, phase: v1.PodRunning, restarts: true, reason: "Completed"},
		{name: "exit0-onfailure", policy: v1.RestartPolicyOnFailure, argv: []string{"sh", "-c", "sleep 0.3; exit 0"}, phase: v1.PodSucceeded, reason: "Completed"},
		{name: "exit0-never", policy: v1.RestartPolicyNever, argv: []string{"sh", "-c", "sleep 0.3; exit 0"}, phase: v1.PodSucceeded, reason: "Completed"},
		{name: "exit1-always", policy: v1.RestartPolicyAlways, argv: []string{"sh", "-c", "sleep 0.3; exit 1"}, phase: v1.PodRunning, restarts: true, reason: "Error", code: 1},
		{name: "exit1-onfailure", policy: v1.RestartPolicyOnFailure, argv: []string{"sh", "-c", "sleep 0.3; exit 1"}, phase: v1.PodRunning, restarts: true, reason: "Error", code: 1},
		{name: "exit1-never", policy: v1.RestartPolicyNever, argv: []string{"sh", "-c", "sleep 0.3; exit 1"}, phase: v1.PodFailed, reason: "Error", code: 1},
		{name: "oom-always", policy: v1.RestartPolicyAlways, argv: oom, memLimit: "100Mi", phase: v1.PodRunning, restarts: true, reason: "OOMKilled", code: 137},
		{name: "oom-onfailure", policy: v1.RestartPolicyOnFailure, argv: oom, memLimit: "100Mi", phase: v1.PodRunning, restarts: true, reason: "OOMKilled", code: 137},
		{name: "oom-never", policy: v1.RestartPolicyNever, argv: oom, memLimit: "100Mi", phase: v1.PodFailed, reason: "OOMKilled", code: 137},
		{name: "two-never-first-fails-second-exits", policy: v1.RestartPolicyNever, argv: []string{"sh", "-c", "exit 1"}, second: []string{"sleep", "1"},
			phase: v1.PodFailed, reason: "Error", code: 1},
		{name: "two-always-first-fails", policy: v1.RestartPolicyAlways, argv: []string{"sh", "-c", "sleep 0.3; exit 1"}, second: []string{"sleep", "3600"},
			phase: v1.PodRunning, restarts: true, reason: "Error", code: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pod := simplePod("lc-"+tc.name, tc.policy, tc.argv...)
			if tc.memLimit != "" {
				pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(tc.memLimit)}
			}
			if tc.second != nil {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "second", Image: "busybox", Command: tc.second})
			}
			node := fmt.Sprintf("node-%d", i%2+1)
			e.runPod(pod, node)
			var final *v1.Pod
			if tc.restarts {
				final = e.waitPod(pod, 20*time.Second, "two restarts", func(p *v1.Pod) bool {
					cs, ok := getContainerStatus(p.Status.ContainerStatuses, "main")
					return ok && cs.RestartCount >= 2 && p.Status.Phase == v1.PodRunning
				})
				cs, _ := getContainerStatus(final.Status.ContainerStatuses, "main")
				last := cs.LastTerminationState.Terminated
				if last == nil {
					// The newest one may just have exited.
					last = cs.State.Terminated
				}
				if last == nil || last.Reason != tc.reason || last.ExitCode != tc.code {
					t.Errorf("last termination %+v, want %s/%d", cs.LastTerminationState, tc.reason, tc.code)
				}
			} else {
				final = e.waitPod(pod, 20*time.Second, string(tc.phase), phaseIs(tc.phase))
				cs, _ := getContainerStatus(final.Status.ContainerStatuses, "main")
				term := cs.State.Terminated
				if term == nil || term.Reason != tc.reason || term.ExitCode != tc.code || term.FinishedAt.IsZero() || term.StartedAt.IsZero() ||
					!strings.HasPrefix(term.ContainerID, "sim://") || cs.RestartCount != 0 {
					t.Errorf("terminated %+v, want %s/%d", cs, tc.reason, tc.code)
				}
				wantReady := "PodCompleted"
				if tc.phase == v1.PodFailed {
					wantReady = "PodFailed"
				}
				if c := condition(final, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != wantReady {
					t.Errorf("Ready = %+v", c)
				}
				if c := condition(final, v1.PodReadyToStartContainers); c.Status != v1.ConditionFalse {
					t.Errorf("PodReadyToStartContainers = %+v", c)
				}
				if final.Status.PodIP == "" {
					t.Errorf("podIP cleared")
				}
			}
			if final.Spec.NodeName != node {
				t.Errorf("nodeName %q", final.Spec.NodeName)
			}
		})
	}
}

// TestPhaseSequence watches one pod and checks the phases it goes through.
func TestPhaseSequence(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := e.client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=seq"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.runPod(simplePod("seq", v1.RestartPolicyNever, "sh", "-c", "sleep 1; echo done"), "node-1")
	var phases []string
	sawCreating := false
	for ev := range w.ResultChan() {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			t.Fatalf("event %s", ev.Type)
		}
		p := ev.Object.(*v1.Pod)
		if len(phases) == 0 || phases[len(phases)-1] != string(p.Status.Phase) {
			phases = append(phases, string(p.Status.Phase))
		}
		if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ContainerCreating" {
			sawCreating = true
		}
		if p.Status.Phase == v1.PodSucceeded {
			break
		}
	}
	if got := strings.Join(phases, ","); got != "Pending,Running,Succeeded" {
		t.Errorf("phases %s", got)
	}
	if !sawCreating {
		t.Errorf("never saw the container waiting in ContainerCreating")
	}
}

func TestInitContainersRun(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("init", v1.RestartPolicyAlways, "sleep", "3600")
	pod.Spec.InitContainers = []v1.Container{
		{Name: "first", Image: "busybox", Command: []string{"sh", "-c", "sleep 0.3"}},
		{Name: "second", Image: "busybox", Command: []string{"sh", "-c", "echo ok"}},
	}
	e.runPod(pod, "node-1")
	sawPending := false
	got := e.waitPod(pod, 10*time.Second, "Running", func(p *v1.Pod) bool {
		if p.Status.Phase == v1.PodPending && len(p.Status.InitContainerStatuses) == 2 {
			if c := condition(p, v1.PodInitialized); c != nil && c.Status == v1.ConditionFalse {
				sawPending = true
			}
		}
		return p.Status.Phase == v1.PodRunning
	})
	if !sawPending {
		t.Log("the Pending phase with Initialized=False was not observed (polling)")
	}
	if c := condition(got, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}
	for _, ic := range got.Status.InitContainerStatuses {
		if ic.State.Terminated == nil || ic.State.Terminated.Reason != "Completed" || !ic.Ready {
			t.Errorf("init %s: %+v", ic.Name, ic)
		}
	}
	first, second := got.Status.InitContainerStatuses[0].State.Terminated, got.Status.InitContainerStatuses[1].State.Terminated
	if got.Status.InitContainerStatuses[0].Name != "first" || second.StartedAt.Before(&first.FinishedAt) {
		t.Errorf("init containers not in order: %+v", got.Status.InitContainerStatuses)
	}

	failing := simplePod("init-fails", v1.RestartPolicyNever, "sleep", "3600")
	failing.Spec.InitContainers = []v1.Container{{Name: "bad", Image: "busybox", Command: []string{"sh", "-c", "exit 2"}}}
	e.runPod(failing, "node-1")
	got = e.waitPod(failing, 10*time.Second, "Failed", phaseIs(v1.PodFailed))
	if c := condition(got, v1.PodInitialized); c.Status != v1.ConditionFalse || c.Message != "containers with incomplete status: [bad]" {
		t.Errorf("Initialized = %+v", c)
	}
	if cs := got.Status.ContainerStatuses[0]; cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("app container %+v", cs)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	cfg := fastConfig(1)
	cfg.BackoffBase = time.Second
	cfg.BackoffMax = 4 * time.Second
	e := start(t, cfg)
	e.waitNodeReady("node-1")
	pod := simplePod("crash", v1.RestartPolicyAlways, "sh", "-c", "exit 3")
	e.runPod(pod, "node-1")
	got := e.waitPod(pod, 15*time.Second, "CrashLoopBackOff after a restart", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= 1 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
	cs := got.Status.ContainerStatuses[0]
	if !strings.HasPrefix(cs.State.Waiting.Message, "back-off ") || !strings.Contains(cs.State.Waiting.Message, "restarting failed container=main pod=crash_default(") {
		t.Errorf("waiting message %q", cs.State.Waiting.Message)
	}
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 3 || got.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s last state %+v", got.Status.Phase, cs.LastTerminationState)
	}
	if c := condition(got, v1.PodReady); c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [main]" {
		t.Errorf("Ready = %+v", c)
	}
	e.waitEvent(pod, "BackOff", "Back-off restarting failed container main in pod crash_default(")
}

func (e *env) waitEvent(pod *v1.Pod, reason, messagePrefix string) *v1.Event {
	e.t.Helper()
	var found *v1.Event
	e.poll(15*time.Second, "event "+reason, func(ctx context.Context) (bool, error) {
		evs, err := e.client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
		if err != nil {
			return false, err
		}
		for i, ev := range evs.Items {
			if ev.Reason == reason && strings.HasPrefix(ev.Message, messagePrefix) {
				found = &evs.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func TestReadinessGateFlow(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("gated", v1.RestartPolicyAlways)
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "www.example.com/feature-1"}}
	e.runPod(pod, "node-1")
	e.waitPod(pod, 10*time.Second, "Running with Ready=False (gate)", func(p *v1.Pod) bool {
		c := condition(p, v1.PodReady)
		cr := condition(p, v1.ContainersReady)
		return p.Status.Phase == v1.PodRunning && c != nil && c.Reason == "ReadinessGatesNotReady" && cr != nil && cr.Status == v1.ConditionTrue
	})
	// Another component sets the gate's condition, as the docs say, with a
	// patch of the status.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{
		{"type": "www.example.com/feature-1", "status": "True", "lastTransitionTime": metav1.Now()},
	}}})
	if _, err := e.client.CoreV1().Pods("default").Patch(context.Background(), "gated", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	got := e.waitPod(pod, 10*time.Second, "Ready", func(p *v1.Pod) bool {
		c := condition(p, v1.PodReady)
		return c != nil && c.Status == v1.ConditionTrue
	})
	if c := condition(got, "www.example.com/feature-1"); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("gate condition lost: %+v", got.Status.Conditions)
	}
}

// TestProbes: the docs' liveness exec example (shortened), and a readiness
// probe that drives Ready.
func TestProbes(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	t.Run("liveness", func(t *testing.T) {
		pod := simplePod("liveness-exec", v1.RestartPolicyAlways, "/bin/sh", "-c", "touch /tmp/healthy; sleep 1; rm -f /tmp/healthy; sleep 600")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0))
		pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1, FailureThreshold: 2, TimeoutSeconds: 1, SuccessThreshold: 1,
		}
		e.runPod(pod, "node-1")
		got := e.waitPod(pod, 20*time.Second, "restarted by liveness", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
		})
		if last := got.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 137 {
			t.Errorf("last state %+v", got.Status.ContainerStatuses[0].LastTerminationState)
		}
		e.waitEvent(pod, "Unhealthy", "Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory")
		e.waitEvent(pod, "Killing", "Container main failed liveness probe, will be restarted")
	})
	t.Run("readiness", func(t *testing.T) {
		pod := simplePod("readiness-exec", v1.RestartPolicyAlways, "/bin/sh", "-c", "sleep 1; touch /tmp/ready; sleep 600")
		pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
			PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 1, SuccessThreshold: 1,
		}
		e.runPod(pod, "node-1")
		e.waitPod(pod, 10*time.Second, "Running, not ready", func(p *v1.Pod) bool {
			c := condition(p, v1.PodReady)
			return p.Status.Phase == v1.PodRunning && c != nil && c.Status == v1.ConditionFalse
		})
		got := e.waitPod(pod, 10*time.Second, "Ready", func(p *v1.Pod) bool {
			c := condition(p, v1.PodReady)
			return c != nil && c.Status == v1.ConditionTrue
		})
		if cs := got.Status.ContainerStatuses[0]; !cs.Ready || cs.RestartCount != 0 {
			t.Errorf("%+v", cs)
		}
	})
}

func TestActiveDeadline(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("deadline", v1.RestartPolicyAlways)
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(1))
	e.runPod(pod, "node-1")
	got := e.waitPod(pod, 10*time.Second, "Failed", phaseIs(v1.PodFailed))
	if got.Status.Reason != "DeadlineExceeded" || got.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	if cs := got.Status.ContainerStatuses[0]; cs.State.Terminated == nil {
		t.Errorf("container not stopped: %+v", cs)
	}
	e.waitEvent(pod, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
}

func TestImagePullFailure(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("badimage", v1.RestartPolicyAlways)
	pod.Spec.Containers[0].Image = "busybox:doesnotexist"
	e.runPod(pod, "node-1")
	e.waitPod(pod, 10*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		r := p.Status.ContainerStatuses[0].State.Waiting.Reason
		return (r == "ErrImagePull" || r == "ImagePullBackOff") && p.Status.Phase == v1.PodPending
	})
	e.waitEvent(pod, "Failed", "Error: ErrImagePull")
}

// TestSidecar: a restartable init container starts before the regular
// containers, runs beside them, and is stopped once they are done.
func TestSidecar(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	always := v1.ContainerRestartPolicyAlways
	pod := simplePod("with-sidecar", v1.RestartPolicyNever, "sh", "-c", "sleep 0.5; exit 0")
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox", RestartPolicy: &always}}
	e.runPod(pod, "node-1")
	running := e.waitPod(pod, 10*time.Second, "Running with the sidecar", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].State.Running != nil
	})
	if c := condition(running, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}
	if sc := running.Status.InitContainerStatuses[0]; !ptr.Deref(sc.Started, false) || !sc.Ready {
		t.Errorf("sidecar status %+v", sc)
	}
	done := e.waitPod(pod, 10*time.Second, "Succeeded", phaseIs(v1.PodSucceeded))
	if sc := done.Status.InitContainerStatuses[0]; sc.State.Terminated == nil {
		t.Errorf("sidecar not stopped: %+v", sc)
	}
	main := done.Status.ContainerStatuses[0].State.Terminated
	sidecar := done.Status.InitContainerStatuses[0].State.Terminated
	if main == nil || main.ExitCode != 0 || sidecar.StartedAt.After(main.StartedAt.Time) || sidecar.FinishedAt.Before(&main.FinishedAt) {
		t.Errorf("order: main %+v sidecar %+v", main, sidecar)
	}
	e.waitEvent(pod, "Killing", "Stopping container proxy")
}
