package agent

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// fakeProbes is the prober's state for the tables: the containers (by
// runtime ID) whose startup probe has not succeeded yet, and those a
// failed liveness probe wants restarted.
type fakeProbes struct {
	notStarted map[string]bool
	failed     map[string]bool
}

func (p fakeProbes) started(c *v1.Container, id string) bool {
	return c.StartupProbe == nil || !p.notStarted[id]
}

func (p fakeProbes) killReason(name, id string) (string, bool) {
	if p.failed[id] {
		return fmt.Sprintf("Container %s failed liveness probe, will be restarted", name), true
	}
	return "", false
}

// actionPod is a pod for the tables: init containers named "side:NAME"
// are sidecars (restartPolicy Always), "probed:NAME" sidecars with a
// startup probe.
func actionPod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	pod := testPod(policy, containers...)
	for _, n := range inits {
		c := v1.Container{Name: n, Image: "busybox"}
		if name, ok := strings.CutPrefix(n, "side:"); ok {
			c.Name, c.RestartPolicy = name, ptr.To(v1.ContainerRestartPolicyAlways)
		}
		if name, ok := strings.CutPrefix(n, "probed:"); ok {
			c.Name, c.RestartPolicy = name, ptr.To(v1.ContainerRestartPolicyAlways)
			c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	return pod
}

// actionRuntime is the runtime's status of the pod: the containers oldest
// first, each with the hash of its definition in the pod (unless a test
// set one, as a changed definition).
func actionRuntime(pod *v1.Pod, sandbox bool, containers ...runtime.ContainerStatus) *runtime.PodStatus {
	rs := &runtime.PodStatus{ID: pod.UID, SandboxReady: sandbox}
	for i := len(containers) - 1; i >= 0; i-- {
		cs := containers[i]
		if c := containerSpec(pod, cs.Name); c != nil && cs.Hash == 0 {
			cs.Hash = containerHash(c)
		}
		rs.ContainerStatuses = append(rs.ContainerStatuses, cs)
	}
	return rs
}

// describe is an action as the tables write it.
func describe(act containerAction) string {
	name := act.container.Name
	var s string
	switch act.kind {
	case actStart:
		s = fmt.Sprintf("start %s #%d", name, act.attempt)
	case actRestart:
		s = fmt.Sprintf("restart %s #%d", name, act.attempt)
	case actBackOff:
		s = fmt.Sprintf("backoff %s %s until %s", name, act.backoff, act.until.Sub(t0))
	case actStop:
		s = fmt.Sprintf("stop %s %s", name, act.grace)
		if act.wake {
			s += " wake"
		}
	case actAwaitStop:
		s = "await " + name
	case actReplace:
		s = fmt.Sprintf("replace %s %s", name, act.grace)
	}
	if act.message != "" {
		s += ": " + act.message
	}
	return s
}

func describeAll(acts []containerAction) []string {
	out := []string{}
	for _, a := range acts {
		out = append(out, describe(a))
	}
	return out
}

// TestComputePodActions is the running pod's rules, one row per case of
// the kubelet's behaviour the agent follows.
func TestComputePodActions(t *testing.T) {
	changed := func(cs runtime.ContainerStatus) runtime.ContainerStatus { cs.Hash = 1; return cs }
	// finishedAt of ctr(name, "exit:N", attempt); the back-off entry's
	// last update is a second before it (a restart that crashed again).
	finished := func(attempt int) time.Time { return t0.Add(time.Duration(attempt)*time.Minute + 10*time.Second) }
	inBackOff := func(name string, attempt int) map[string]*backoffEntry {
		return map[string]*backoffEntry{name: {backoff: 20 * time.Second, lastUpdate: finished(attempt).Add(-time.Second)}}
	}
	later := t0.Add(time.Hour)
	withStatus := func(pod *v1.Pod, st v1.ContainerStatus) *v1.Pod {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
		return pod
	}

	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		sandbox     bool
		containers  []runtime.ContainerStatus
		probes      fakeProbes
		stopping    map[string]time.Duration
		backoff     map[string]*backoffEntry
		now         time.Time
		want        []string
		initialized bool
	}{
		{name: "new pod: sandbox, then its containers", pod: actionPod(v1.RestartPolicyAlways, nil, "a", "b"),
			want: []string{"start a #0", "start b #0"}, initialized: true},
		{name: "sandbox lost: recreated, running containers left alone", pod: actionPod(v1.RestartPolicyAlways, nil, "a"),
			containers: []runtime.ContainerStatus{ctr("a", "running", 0)}, want: []string{}, initialized: true},
		{name: "restart count carried over from the pod's status", sandbox: true,
			pod:  withStatus(actionPod(v1.RestartPolicyAlways, nil, "a"), v1.ContainerStatus{Name: "a", ContainerID: "sim://a-d", RestartCount: 3}),
			want: []string{"start a #4"}, initialized: true},

		// Init containers, in order, one at a time.
		{name: "init: the first starts, nothing else", pod: actionPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"), sandbox: true,
			want: []string{"start i1 #0"}},
		{name: "init: the first runs, the pod waits", pod: actionPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "running", 0)}, want: []string{}},
		{name: "init: the first completed, the second starts", pod: actionPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:0", 0)}, want: []string{"start i2 #0"}},
		{name: "init: all completed, the containers start", pod: actionPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:0", 0), ctr("i2", "exit:0", 0)}, want: []string{"start a #0"}, initialized: true},
		{name: "init: not run again once a container started", pod: actionPod(v1.RestartPolicyAlways, []string{"i1"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "running", 0)}, want: []string{}, initialized: true},
		{name: "init failed, Always: restarted", pod: actionPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:1", 0)}, now: later, want: []string{"restart i1 #1"}},
		{name: "init failed, OnFailure: restarted", pod: actionPod(v1.RestartPolicyOnFailure, []string{"i1"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:1", 0)}, now: later, want: []string{"restart i1 #1"}},
		{name: "init failed, Never: nothing more runs", pod: actionPod(v1.RestartPolicyNever, []string{"i1", "i2"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:1", 0)}, now: later, want: []string{}},
		{name: "init failed, in back-off", pod: actionPod(v1.RestartPolicyAlways, []string{"i1"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:1", 2)}, backoff: inBackOff("i1", 2), now: finished(2).Add(5 * time.Second),
			want: []string{"backoff i1 20s until 2m30s"}},
		{name: "init failed, back-off over", pod: actionPod(v1.RestartPolicyAlways, []string{"i1"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("i1", "exit:1", 2)}, backoff: inBackOff("i1", 2), now: finished(2).Add(20 * time.Second),
			want: []string{"restart i1 #3"}},

		// Sidecars (restartable init containers).
		{name: "sidecar starts before the init containers after it", pod: actionPod(v1.RestartPolicyAlways, []string{"side:s", "i"}, "a"), sandbox: true,
			want: []string{"start s #0"}},
		{name: "sidecar running and started: the next init container starts", pod: actionPod(v1.RestartPolicyAlways, []string{"side:s", "i"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "running", 0)}, want: []string{"start i #0"}},
		{name: "sidecar running, startup probe not yet passed: the pod waits", pod: actionPod(v1.RestartPolicyAlways, []string{"probed:s", "i"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "running", 0)}, probes: fakeProbes{notStarted: map[string]bool{"sim://s-a": true}},
			want: []string{}},
		{name: "sidecar running, startup probe passed", pod: actionPod(v1.RestartPolicyAlways, []string{"probed:s"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "running", 0)}, want: []string{"start a #0"}, initialized: true},
		{name: "sidecar exited before initialization: restarted, the pod waits", pod: actionPod(v1.RestartPolicyNever, []string{"side:s", "i"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "exit:0", 0)}, now: later, want: []string{"restart s #1"}},
		{name: "sidecar exited beside running containers: restarted whatever the policy", pod: actionPod(v1.RestartPolicyNever, []string{"side:s"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "exit:1", 0), ctr("a", "running", 0)}, now: later, want: []string{"restart s #1"}, initialized: true},
		{name: "sidecar in back-off", pod: actionPod(v1.RestartPolicyAlways, []string{"side:s"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "exit:1", 2), ctr("a", "running", 0)}, backoff: inBackOff("s", 2), now: finished(2),
			want: []string{"backoff s 20s until 2m30s"}, initialized: true},
		{name: "sidecar stopped once no regular container is left to run", pod: actionPod(v1.RestartPolicyNever, []string{"side:s"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("a", "exit:0", 0)}, want: []string{"stop s 30s"}, initialized: true},
		{name: "sidecar kept while a container will restart (OnFailure)", pod: actionPod(v1.RestartPolicyOnFailure, []string{"side:s"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("a", "exit:1", 0)}, now: later, want: []string{"restart a #1"}, initialized: true},

		// Regular containers under each restart policy.
		{name: "Always: completed container restarted", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:0", 0)}, now: later, want: []string{"restart a #1"}, initialized: true},
		{name: "Always: failed container restarted", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:1", 0)}, now: later, want: []string{"restart a #1"}, initialized: true},
		{name: "OnFailure: completed container left", pod: actionPod(v1.RestartPolicyOnFailure, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:0", 0)}, now: later, want: []string{}, initialized: true},
		{name: "OnFailure: failed container restarted", pod: actionPod(v1.RestartPolicyOnFailure, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:1", 0)}, now: later, want: []string{"restart a #1"}, initialized: true},
		{name: "OnFailure: OOM-killed container restarted", pod: actionPod(v1.RestartPolicyOnFailure, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "oom", 0)}, now: later, want: []string{"restart a #1"}, initialized: true},
		{name: "Never: failed container left", pod: actionPod(v1.RestartPolicyNever, nil, "a", "b"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:1", 0), ctr("b", "running", 0)}, now: later, want: []string{}, initialized: true},
		{name: "back-off not yet over: CrashLoopBackOff until it ends", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:1", 2)}, backoff: inBackOff("a", 2), now: finished(2).Add(19 * time.Second),
			want: []string{"backoff a 20s until 2m30s"}, initialized: true},
		{name: "back-off over: restarted", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:1", 2)}, backoff: inBackOff("a", 2), now: finished(2).Add(20 * time.Second),
			want: []string{"restart a #3"}, initialized: true},
		{name: "back-off reset after a long run: restarted", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "exit:1", 2)}, now: finished(2),
			backoff: map[string]*backoffEntry{"a": {backoff: 20 * time.Second, lastUpdate: finished(2).Add(-time.Hour)}},
			want:    []string{"restart a #3"}, initialized: true},

		// Changed definitions and probe kills.
		{name: "changed definition: replaced whatever the policy", pod: actionPod(v1.RestartPolicyNever, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{changed(ctr("a", "running", 0))},
			want:       []string{"replace a 30s: Container a definition changed, will be restarted"}, initialized: true},
		{name: "changed sidecar definition: replaced", pod: actionPod(v1.RestartPolicyAlways, []string{"side:s"}, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{changed(ctr("s", "running", 0)), ctr("a", "running", 0)},
			want:       []string{"replace s 30s: Init container s definition changed"}, initialized: true},
		{name: "liveness failed: stopped with the probe's message", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "running", 0)}, probes: fakeProbes{failed: map[string]bool{"sim://a-a": true}},
			want: []string{"stop a 30s wake: Container a failed liveness probe, will be restarted"}, initialized: true},
		{name: "liveness failed, stop sent already: waits for the exit", pod: actionPod(v1.RestartPolicyAlways, nil, "a"), sandbox: true,
			containers: []runtime.ContainerStatus{ctr("a", "running", 0)}, probes: fakeProbes{failed: map[string]bool{"sim://a-a": true}},
			stopping: map[string]time.Duration{"sim://a-a": 30 * time.Second}, want: []string{"await a"}, initialized: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0.Add(time.Hour)
			}
			rs := actionRuntime(tc.pod, tc.sandbox, tc.containers...)
			got := computePodActions(podActionsInput{
				pod: tc.pod, rs: rs, now: now, probes: tc.probes,
				stopping: tc.stopping, backoff: tc.backoff, backoffReset: 5 * time.Minute,
			})
			if got.createSandbox != !tc.sandbox {
				t.Errorf("createSandbox = %v, want %v", got.createSandbox, !tc.sandbox)
			}
			if got.initialized != tc.initialized {
				t.Errorf("initialized = %v, want %v", got.initialized, tc.initialized)
			}
			if d := describeAll(got.containers); !reflect.DeepEqual(d, tc.want) {
				t.Errorf("actions:\n got  %q\n want %q", d, tc.want)
			}
		})
	}
}

// TestProbeKillGracePeriod: a probe's own terminationGracePeriodSeconds
// wins over the pod's.
func TestProbeKillGracePeriod(t *testing.T) {
	pod := actionPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(60))
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: ptr.To(int64(5))}
	got := computePodActions(podActionsInput{
		pod: pod, rs: actionRuntime(pod, true, ctr("a", "running", 0)), now: t0.Add(time.Hour),
		probes: fakeProbes{failed: map[string]bool{"sim://a-a": true}},
	})
	want := []string{"stop a 5s wake: Container a failed liveness probe, will be restarted"}
	if d := describeAll(got.containers); !reflect.DeepEqual(d, want) {
		t.Errorf("actions: got %q, want %q", d, want)
	}
}

// TestReplacements: the successor of a container replaced for its changed
// definition starts once the old one has exited, whatever the policy.
func TestReplacements(t *testing.T) {
	pod := actionPod(v1.RestartPolicyNever, nil, "a", "b")
	old := ctr("a", "exit:0", 1)
	for _, tc := range []struct {
		name       string
		containers []runtime.ContainerStatus
		replacing  map[string]string
		starts     []string
		forget     []string
	}{
		{name: "exited: successor starts", containers: []runtime.ContainerStatus{old}, replacing: map[string]string{"a": old.ID},
			starts: []string{"start a #2"}, forget: []string{"a"}},
		{name: "still stopping: waits", containers: []runtime.ContainerStatus{ctr("a", "running", 1)}, replacing: map[string]string{"a": "sim://a-b"},
			starts: []string{}},
		{name: "succeeded already: forgotten", containers: []runtime.ContainerStatus{old, ctr("a", "running", 2)}, replacing: map[string]string{"a": old.ID},
			starts: []string{}, forget: []string{"a"}},
		{name: "gone from the spec or the runtime: forgotten", containers: []runtime.ContainerStatus{ctr("x", "exit:0", 0)},
			replacing: map[string]string{"x": "sim://x-a", "b": "sim://b-a"}, starts: []string{}, forget: []string{"b", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts, forget := replacements(pod, actionRuntime(pod, true, tc.containers...), tc.replacing)
			if d := describeAll(starts); !reflect.DeepEqual(d, tc.starts) {
				t.Errorf("starts: got %q, want %q", d, tc.starts)
			}
			if !reflect.DeepEqual(forget, tc.forget) {
				t.Errorf("forget: got %q, want %q", forget, tc.forget)
			}
		})
	}
}

// TestTerminationStops: a terminating pod stops its regular containers
// first, its sidecars once those are gone, within what is left of the
// deletion's grace period.
func TestTerminationStops(t *testing.T) {
	now := t0.Add(time.Hour)
	deleted := func(in time.Duration) *v1.Pod {
		pod := actionPod(v1.RestartPolicyAlways, []string{"side:s", "i"}, "a", "b")
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(in)))
		pod.DeletionGracePeriodSeconds = ptr.To(int64(30))
		return pod
	}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		containers []runtime.ContainerStatus
		want       []string
	}{
		{name: "regular containers first, sidecars wait", pod: deleted(30 * time.Second),
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("i", "exit:0", 0), ctr("a", "running", 0), ctr("b", "exit:0", 0)},
			want:       []string{"stop a 30s"}},
		{name: "a running init container stops with the regular ones", pod: deleted(30 * time.Second),
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("i", "running", 0)},
			want:       []string{"stop i 30s"}},
		{name: "sidecars with what is left of the grace period", pod: deleted(12 * time.Second),
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("a", "exit:0", 0)},
			want:       []string{"stop s 12s"}},
		{name: "sidecars at once once the grace period is over", pod: deleted(-time.Second),
			containers: []runtime.ContainerStatus{ctr("s", "running", 0)},
			want:       []string{"stop s 0s"}},
		{name: "not deleted (completed, deadline): sidecars get the whole grace period", pod: actionPod(v1.RestartPolicyNever, []string{"side:s"}, "a"),
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("a", "exit:0", 0)},
			want:       []string{"stop s 30s"}},
		{name: "a container the spec no longer names stops as a regular one", pod: deleted(30 * time.Second),
			containers: []runtime.ContainerStatus{ctr("s", "running", 0), ctr("gone", "running", 0)},
			want:       []string{"stop gone 30s"}},
		{name: "nothing running", pod: deleted(30 * time.Second),
			containers: []runtime.ContainerStatus{ctr("a", "exit:0", 0)}, want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := actionRuntime(tc.pod, true, tc.containers...)
			got := terminationStops(tc.pod, rs, podGracePeriod(tc.pod), now)
			if d := describeAll(got); !reflect.DeepEqual(d, tc.want) {
				t.Errorf("stops: got %q, want %q", d, tc.want)
			}
		})
	}
}
