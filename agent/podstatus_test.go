package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// ctr is a runtime container for the tables: "running", "exit:N",
// "oom" (exit 137 OOMKilled), with an attempt number.
func ctr(name, state string, attempt int) runtime.ContainerStatus {
	cs := runtime.ContainerStatus{
		ID: "sim://" + name + "-" + string(rune('a'+attempt)), Name: name, Attempt: attempt,
		CreatedAt: t0.Add(time.Duration(attempt) * time.Minute), StartedAt: t0.Add(time.Duration(attempt) * time.Minute),
		Image: "docker.io/library/busybox:latest", ImageRef: "docker.io/library/busybox@sha256:00",
	}
	switch {
	case state == "running":
		cs.State = runtime.ContainerStateRunning
	case state == "oom":
		cs.State, cs.ExitCode, cs.Reason = runtime.ContainerStateExited, 137, "OOMKilled"
	case strings.HasPrefix(state, "exit:"):
		cs.State = runtime.ContainerStateExited
		if state != "exit:0" {
			cs.ExitCode, cs.Reason = int32(state[5]-'0'), "Error"
		} else {
			cs.Reason = "Completed"
		}
	}
	if cs.State == runtime.ContainerStateExited {
		cs.FinishedAt = cs.StartedAt.Add(10 * time.Second)
	}
	return cs
}

func testPod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy, NodeName: "node-1"},
		Status: v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort, Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))},
		}},
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

func statusOf(pod *v1.Pod, containers ...runtime.ContainerStatus) v1.PodStatus {
	rs := &runtime.PodStatus{ID: pod.UID, SandboxReady: true, IPs: []string{"10.244.0.5"}}
	// newest first
	for i := len(containers) - 1; i >= 0; i-- {
		rs.ContainerStatuses = append(rs.ContainerStatuses, containers[i])
	}
	return generatePodStatus(statusInput{pod: pod, rs: rs, hostIP: "172.20.0.1", now: t0.Add(time.Hour), startTime: t0})
}

// TestPhaseTable is the seeds' table of state transitions (pod-lifecycle
// "Contoh State", life-of-a-pod "実例"): the pod's phase for each restart
// policy once a container exits.
func TestPhaseTable(t *testing.T) {
	type row struct{ always, onFailure, never v1.PodPhase }
	tests := []struct {
		name       string
		containers []string
		runtime    []runtime.ContainerStatus
		want       row
	}{
		{
			name:       "one container, exits with success",
			containers: []string{"a"}, runtime: []runtime.ContainerStatus{ctr("a", "exit:0", 0)},
			want: row{v1.PodRunning, v1.PodSucceeded, v1.PodSucceeded},
		},
		{
			name:       "one container, exits with failure",
			containers: []string{"a"}, runtime: []runtime.ContainerStatus{ctr("a", "exit:1", 0)},
			want: row{v1.PodRunning, v1.PodRunning, v1.PodFailed},
		},
		{
			name:       "two containers, the first fails",
			containers: []string{"a", "b"}, runtime: []runtime.ContainerStatus{ctr("a", "exit:1", 0), ctr("b", "running", 0)},
			want: row{v1.PodRunning, v1.PodRunning, v1.PodRunning},
		},
		{
			name:       "two containers, the first is not running and the second exits",
			containers: []string{"a", "b"}, runtime: []runtime.ContainerStatus{ctr("a", "exit:1", 0), ctr("b", "exit:1", 0)},
			want: row{v1.PodRunning, v1.PodRunning, v1.PodFailed},
		},
		{
			name:       "two containers, the first failed, the second succeeds",
			containers: []string{"a", "b"}, runtime: []runtime.ContainerStatus{ctr("a", "exit:1", 0), ctr("b", "exit:0", 0)},
			want: row{v1.PodRunning, v1.PodRunning, v1.PodFailed},
		},
		{
			name:       "two containers, both succeed",
			containers: []string{"a", "b"}, runtime: []runtime.ContainerStatus{ctr("a", "exit:0", 0), ctr("b", "exit:0", 0)},
			want: row{v1.PodRunning, v1.PodSucceeded, v1.PodSucceeded},
		},
		{
			name:       "one container, out of memory",
			containers: []string{"a"}, runtime: []runtime.ContainerStatus{ctr("a", "oom", 0)},
			want: row{v1.PodRunning, v1.PodRunning, v1.PodFailed},
		},
		{
			name:       "one container running",
			containers: []string{"a"}, runtime: []runtime.ContainerStatus{ctr("a", "running", 0)},
			want: row{v1.PodRunning, v1.PodRunning, v1.PodRunning},
		},
		{
			name:       "not started yet",
			containers: []string{"a"}, runtime: nil,
			want: row{v1.PodPending, v1.PodPending, v1.PodPending},
		},
	}
	for _, tc := range tests {
		for policy, want := range map[v1.RestartPolicy]v1.PodPhase{
			v1.RestartPolicyAlways: tc.want.always, v1.RestartPolicyOnFailure: tc.want.onFailure, v1.RestartPolicyNever: tc.want.never,
		} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				pod := testPod(policy, tc.containers...)
				st := statusOf(pod, tc.runtime...)
				if st.Phase != want {
					t.Errorf("phase = %s, want %s", st.Phase, want)
				}
				// The container statuses mirror the runtime's.
				for _, rc := range tc.runtime {
					cs, _ := getContainerStatus(st.ContainerStatuses, rc.Name)
					switch rc.State {
					case runtime.ContainerStateRunning:
						if cs.State.Running == nil || !cs.Ready || !*cs.Started {
							t.Errorf("%s: %+v", rc.Name, cs)
						}
					case runtime.ContainerStateExited:
						term := cs.State.Terminated
						if term == nil || term.ExitCode != rc.ExitCode || term.Reason != rc.Reason || term.ContainerID != rc.ID || cs.Ready || *cs.Started {
							t.Errorf("%s: %+v", rc.Name, cs)
						}
					}
				}
				ready := condition(&v1.Pod{Status: st}, v1.PodReady)
				switch want {
				case v1.PodSucceeded:
					if ready.Status != v1.ConditionFalse || ready.Reason != "PodCompleted" {
						t.Errorf("Ready = %+v", ready)
					}
				case v1.PodFailed:
					if ready.Status != v1.ConditionFalse || ready.Reason != "PodFailed" {
						t.Errorf("Ready = %+v", ready)
					}
				}
			})
		}
	}
}

func TestContainerStatuses(t *testing.T) {
	t.Run("waiting before start", func(t *testing.T) {
		st := statusOf(testPod(v1.RestartPolicyAlways, "b", "a"))
		if st.Phase != v1.PodPending || len(st.ContainerStatuses) != 2 || st.ContainerStatuses[0].Name != "a" {
			t.Fatalf("status = %+v", st)
		}
		for _, cs := range st.ContainerStatuses {
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != "ContainerCreating" || cs.Ready || cs.Started == nil || *cs.Started || cs.Image != "busybox" {
				t.Errorf("%+v", cs)
			}
		}
		ready := condition(&v1.Pod{Status: st}, v1.ContainersReady)
		if ready.Reason != "ContainersNotReady" || ready.Message != "containers with unready status: [b a]" {
			t.Errorf("ContainersReady = %+v", ready)
		}
	})
	t.Run("restarted: state and last state", func(t *testing.T) {
		st := statusOf(testPod(v1.RestartPolicyAlways, "a"), ctr("a", "exit:1", 0), ctr("a", "exit:2", 1), ctr("a", "running", 2))
		cs := st.ContainerStatuses[0]
		if cs.RestartCount != 2 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 2 {
			t.Fatalf("%+v", cs)
		}
	})
	t.Run("crash loop back-off", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyAlways, "a")
		rs := &runtime.PodStatus{ID: pod.UID, SandboxReady: true, ContainerStatuses: []runtime.ContainerStatus{ctr("a", "exit:1", 1), ctr("a", "exit:1", 0)}}
		st := generatePodStatus(statusInput{pod: pod, rs: rs, now: t0, reasons: map[string]waitingReason{
			"a": {reasonCrashLoopBackOff, "back-off 20s restarting failed container=a pod=p_default(uid-1)"},
		}})
		cs := st.ContainerStatuses[0]
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.LastTerminationState.Terminated == nil ||
			cs.LastTerminationState.Terminated.ExitCode != 1 || cs.RestartCount != 1 || st.Phase != v1.PodRunning {
			t.Fatalf("phase %s, %+v", st.Phase, cs)
		}
	})
	t.Run("no restart for Never: no back-off reason", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyNever, "a")
		rs := &runtime.PodStatus{ID: pod.UID, ContainerStatuses: []runtime.ContainerStatus{ctr("a", "exit:1", 0)}}
		st := generatePodStatus(statusInput{pod: pod, rs: rs, now: t0, reasons: map[string]waitingReason{"a": {reasonCrashLoopBackOff, "x"}}})
		if st.ContainerStatuses[0].State.Terminated == nil || st.Phase != v1.PodFailed {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("old terminated status kept when the runtime lost the container", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyNever, "a")
		pod.Status.Phase = v1.PodFailed
		pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3}}}}
		st := statusOf(pod)
		if st.Phase != v1.PodFailed || st.ContainerStatuses[0].State.Terminated == nil || st.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("IPs, QoS, start time, conditions order", func(t *testing.T) {
		st := statusOf(testPod(v1.RestartPolicyAlways, "a"), ctr("a", "running", 0))
		if st.PodIP != "10.244.0.5" || st.HostIP != "172.20.0.1" || st.QOSClass != v1.PodQOSBestEffort || !st.StartTime.Time.Equal(t0) {
			t.Errorf("%+v", st)
		}
		var order []string
		for _, c := range st.Conditions {
			order = append(order, string(c.Type)+"="+string(c.Status))
		}
		if got := strings.Join(order, ","); got != "PodReadyToStartContainers=True,Initialized=True,Ready=True,ContainersReady=True,PodScheduled=True" {
			t.Errorf("conditions = %s", got)
		}
		// PodScheduled keeps the scheduler's transition time.
		if c := condition(&v1.Pod{Status: st}, v1.PodScheduled); !c.LastTransitionTime.Time.Equal(t0.Add(-time.Minute)) {
			t.Errorf("PodScheduled lastTransitionTime = %v", c.LastTransitionTime)
		}
	})
}

func TestInitContainers(t *testing.T) {
	pod := func(policy v1.RestartPolicy) *v1.Pod {
		p := testPod(policy, "app")
		p.Spec.InitContainers = []v1.Container{{Name: "init1", Image: "busybox"}, {Name: "init2", Image: "busybox"}}
		return p
	}
	tests := []struct {
		name        string
		policy      v1.RestartPolicy
		runtime     []runtime.ContainerStatus
		phase       v1.PodPhase
		initialized string // status/reason
		app         string // waiting reason of app, or "running"
	}{
		{name: "nothing ran", policy: v1.RestartPolicyAlways, phase: v1.PodPending, initialized: "False/ContainersNotInitialized", app: "PodInitializing"},
		{name: "first init running", policy: v1.RestartPolicyAlways, runtime: []runtime.ContainerStatus{ctr("init1", "running", 0)},
			phase: v1.PodPending, initialized: "False/ContainersNotInitialized", app: "PodInitializing"},
		{name: "first done, second running", policy: v1.RestartPolicyAlways, runtime: []runtime.ContainerStatus{ctr("init1", "exit:0", 0), ctr("init2", "running", 0)},
			phase: v1.PodPending, initialized: "False/ContainersNotInitialized", app: "PodInitializing"},
		{name: "all done, app running", policy: v1.RestartPolicyAlways, runtime: []runtime.ContainerStatus{ctr("init1", "exit:0", 0), ctr("init2", "exit:0", 0), ctr("app", "running", 0)},
			phase: v1.PodRunning, initialized: "True/", app: "running"},
		{name: "init fails, Never", policy: v1.RestartPolicyNever, runtime: []runtime.ContainerStatus{ctr("init1", "exit:1", 0)},
			phase: v1.PodFailed, initialized: "False/ContainersNotInitialized", app: "PodInitializing"},
		{name: "init fails, OnFailure: retried", policy: v1.RestartPolicyOnFailure, runtime: []runtime.ContainerStatus{ctr("init1", "exit:1", 0)},
			phase: v1.PodPending, initialized: "False/ContainersNotInitialized", app: "PodInitializing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(pod(tc.policy), tc.runtime...)
			if st.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tc.phase)
			}
			c := condition(&v1.Pod{Status: st}, v1.PodInitialized)
			if got := string(c.Status) + "/" + c.Reason; got != tc.initialized {
				t.Errorf("Initialized = %s (%s), want %s", got, c.Message, tc.initialized)
			}
			app := st.ContainerStatuses[0]
			got := "running"
			if app.State.Waiting != nil {
				got = app.State.Waiting.Reason
			}
			if got != tc.app {
				t.Errorf("app state %s, want %s", got, tc.app)
			}
			if len(st.InitContainerStatuses) != 2 || st.InitContainerStatuses[0].Name != "init1" {
				t.Fatalf("init statuses %+v", st.InitContainerStatuses)
			}
			if i1 := st.InitContainerStatuses[0]; i1.State.Terminated != nil && i1.State.Terminated.ExitCode == 0 && !i1.Ready {
				t.Errorf("completed init container not ready: %+v", i1)
			}
		})
	}
}

func TestReadinessGates(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "www.example.com/feature-1"}}
	st := statusOf(pod, ctr("a", "running", 0))
	ready := condition(&v1.Pod{Status: st}, v1.PodReady)
	if ready.Status != v1.ConditionFalse || ready.Reason != "ReadinessGatesNotReady" ||
		ready.Message != `corresponding condition of pod readiness gate "www.example.com/feature-1" does not exist.` {
		t.Fatalf("Ready = %+v", ready)
	}
	if c := condition(&v1.Pod{Status: st}, v1.ContainersReady); c.Status != v1.ConditionTrue {
		t.Fatalf("ContainersReady = %+v", c)
	}
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: "www.example.com/feature-1", Status: v1.ConditionFalse})
	st = statusOf(pod, ctr("a", "running", 0))
	if ready := condition(&v1.Pod{Status: st}, v1.PodReady); ready.Message != `the status of pod readiness gate "www.example.com/feature-1" is not "True", but False` {
		t.Fatalf("Ready = %+v", ready)
	}
	if st.Conditions[0].Type != "www.example.com/feature-1" {
		t.Fatalf("the gate's condition is not kept first: %+v", st.Conditions)
	}
	pod.Status.Conditions[1].Status = v1.ConditionTrue
	st = statusOf(pod, ctr("a", "running", 0))
	if ready := condition(&v1.Pod{Status: st}, v1.PodReady); ready.Status != v1.ConditionTrue {
		t.Fatalf("Ready = %+v", ready)
	}
}

func TestProbesInStatus(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	st := statusOf(pod, ctr("a", "running", 0))
	cs := st.ContainerStatuses[0]
	if cs.Ready || !*cs.Started {
		t.Fatalf("readiness probe not run yet: %+v", cs)
	}
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
	st = statusOf(pod, ctr("a", "running", 0))
	if cs := st.ContainerStatuses[0]; cs.Ready || *cs.Started {
		t.Fatalf("startup probe not run yet: %+v", cs)
	}
	probes := &podProbes{workers: map[probeKey]*probeWorker{
		{"a", startup}:   {containerID: "sim://a-a", result: resultSuccess},
		{"a", readiness}: {containerID: "sim://a-a", result: resultSuccess},
	}}
	rs := &runtime.PodStatus{ID: pod.UID, SandboxReady: true, ContainerStatuses: []runtime.ContainerStatus{ctr("a", "running", 0)}}
	st = generatePodStatus(statusInput{pod: pod, rs: rs, probes: probes, now: t0})
	if cs := st.ContainerStatuses[0]; !cs.Ready || !*cs.Started {
		t.Fatalf("probes succeeded: %+v", cs)
	}
}

func TestTerminalStatus(t *testing.T) {
	t.Run("deleted running pod: exit codes decide", func(t *testing.T) {
		for code, want := range map[string]v1.PodPhase{"exit:0": v1.PodSucceeded, "exit:1": v1.PodFailed} {
			pod := testPod(v1.RestartPolicyAlways, "a")
			pod.Status.Phase = v1.PodRunning
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
			rs := &runtime.PodStatus{ID: pod.UID, ContainerStatuses: []runtime.ContainerStatus{ctr("a", code, 0)}}
			st := generatePodStatus(statusInput{pod: pod, rs: rs, podIsTerminal: true, now: t0})
			terminatePod(pod, &st)
			if st.Phase != want {
				t.Errorf("%s: phase %s, want %s", code, st.Phase, want)
			}
			if c := condition(&v1.Pod{Status: st}, v1.PodReadyToStartContainers); c.Status != v1.ConditionFalse {
				t.Errorf("PodReadyToStartContainers = %+v", c)
			}
		}
	})
	t.Run("deleted before start: lost containers, Failed", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyAlways, "a")
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		st := generatePodStatus(statusInput{pod: pod, rs: &runtime.PodStatus{ID: pod.UID}, podIsTerminal: true, now: t0})
		terminatePod(pod, &st)
		cs := st.ContainerStatuses[0]
		if st.Phase != v1.PodFailed || cs.State.Terminated == nil || cs.State.Terminated.Reason != "ContainerStatusUnknown" || cs.State.Terminated.ExitCode != 137 {
			t.Fatalf("%s %+v", st.Phase, cs)
		}
	})
	t.Run("active deadline", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyAlways, "a")
		pod.Status.Phase = v1.PodRunning
		rs := &runtime.PodStatus{ID: pod.UID, ContainerStatuses: []runtime.ContainerStatus{ctr("a", "running", 0)}}
		st := generatePodStatus(statusInput{pod: pod, rs: rs, deadlineExceeded: true, now: t0})
		if st.Phase != v1.PodFailed || st.Reason != "DeadlineExceeded" || st.Message != "Pod was active on the node longer than the specified deadline" {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("terminal phase is final", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyAlways, "a")
		pod.Status.Phase = v1.PodSucceeded
		st := statusOf(pod, ctr("a", "running", 0))
		if st.Phase != v1.PodSucceeded {
			t.Fatalf("phase left terminal: %s", st.Phase)
		}
	})
}

func TestTransitionTimes(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, "a")
	first := statusOf(pod, ctr("a", "running", 0))
	pod.Status = first
	// An hour later nothing changed: same times; the status compares equal.
	rs := &runtime.PodStatus{ID: pod.UID, SandboxReady: true, IPs: []string{"10.244.0.5"}, ContainerStatuses: []runtime.ContainerStatus{ctr("a", "running", 0)}}
	again := generatePodStatus(statusInput{pod: pod, rs: rs, hostIP: "172.20.0.1", now: t0.Add(2 * time.Hour), startTime: t0.Add(time.Hour)})
	for i := range again.Conditions {
		if !again.Conditions[i].LastTransitionTime.Equal(&first.Conditions[i].LastTransitionTime) {
			t.Errorf("%s moved", again.Conditions[i].Type)
		}
	}
	if !again.StartTime.Equal(first.StartTime) {
		t.Errorf("startTime moved")
	}
	// The container exits: Ready flips, its time moves.
	rs.ContainerStatuses = []runtime.ContainerStatus{ctr("a", "exit:1", 0)}
	later := generatePodStatus(statusInput{pod: pod, rs: rs, hostIP: "172.20.0.1", now: t0.Add(3 * time.Hour)})
	if c := condition(&v1.Pod{Status: later}, v1.PodReady); c.Status != v1.ConditionFalse || !c.LastTransitionTime.Time.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("Ready = %+v", c)
	}
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"GREETING": "Warm greetings to", "NAME": "Kubernetes"}
	for in, want := range map[string]string{
		"$(GREETING) $(NAME)": "Warm greetings to Kubernetes",
		"$(MISSING)":          "$(MISSING)",
		"$$(NAME)":            "$(NAME)",
		"a$b":                 "a$b",
		"$(unterminated":      "$(unterminated",
	} {
		if got := expandVars(in, env); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	cfg, _ := Config{BackoffBase: 10 * time.Second, BackoffMax: 40 * time.Second, BackoffReset: 80 * time.Second}.complete()
	w := newPodWorker("u", nil)
	now := t0
	var waits []time.Duration
	for i := 0; i < 5; i++ {
		finished := now
		until, in := w.inBackOff("c", finished, now, cfg.BackoffReset)
		if in {
			waits = append(waits, until.Sub(finished))
			now = until
		} else {
			waits = append(waits, 0)
		}
		w.nextBackOff("c", finished, now, cfg)
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
	}
	// Running longer than the reset period forgets the back-off.
	finished := now.Add(81 * time.Second)
	if _, in := w.inBackOff("c", finished, finished, cfg.BackoffReset); in {
		t.Fatal("still in back-off after the reset period")
	}
}
