package agent

import (
	"fmt"
	"sort"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
)

// This file holds the pod worker's decisions, apart from their execution
// (podworker.go), as the kubelet's computePodActions is apart from its
// SyncPod: pure functions from the pod, the runtime's status of its
// containers and the worker's own bookkeeping to a list of actions, so that
// the rules (init containers in order, sidecars, restart policies, back-off,
// changed definitions, termination order) are tested without a runtime or a
// server (podactions_test.go).

// actionKind is what an action does to one container.
type actionKind uint8

const (
	// actStart starts a container the runtime has no record of (or the
	// successor of one replaced), as attempt.
	actStart actionKind = iota
	// actRestart restarts an exited container as latest.Attempt+1, taking
	// the next step of its back-off.
	actRestart
	// actBackOff leaves an exited container in back-off
	// (CrashLoopBackOff) until until; backoff is the current step.
	actBackOff
	// actStop stops a running container with grace and message (the
	// Killing event's; "" for the default); wake: wake the pod when the
	// runtime next changes it.
	actStop
	// actAwaitStop: a container asked to stop already; only wake the pod
	// when the runtime next changes it.
	actAwaitStop
	// actReplace stops a running container whose definition changed; its
	// successor starts as soon as it has exited (replacements).
	actReplace
)

// containerAction is one action on one container of the pod.
type containerAction struct {
	kind      actionKind
	container *v1.Container
	// latest is the runtime's newest container of that name (nil for a
	// container never started).
	latest  *runtime.ContainerStatus
	attempt int
	grace   time.Duration
	message string
	wake    bool
	until   time.Time
	backoff time.Duration
}

// podActions is what a sync of a running pod does, in this order: the
// sandbox, then the containers' actions, in the order of the spec (init
// containers up to the one the pod waits on, then the regular ones once
// initialized).
type podActions struct {
	createSandbox bool
	// initialized: every init container has done its part (completed, or
	// a sidecar running and started), or the pod was initialized already;
	// only then do the regular containers get actions.
	initialized bool
	containers  []containerAction
}

// containerProbes is what the decisions read of the prober (podProbes).
type containerProbes interface {
	// started: no startup probe, or it succeeded, for this container.
	started(c *v1.Container, containerID string) bool
	// killReason: a failed liveness or startup probe wants the container
	// restarted, with the Killing event's message.
	killReason(name, containerID string) (string, bool)
}

// podActionsInput is what computePodActions decides from. The maps are
// the pod worker's and are only read.
type podActionsInput struct {
	pod *v1.Pod
	rs  *runtime.PodStatus
	now time.Time
	// probes: the pod's probe results (a nil *podProbes is fine).
	probes containerProbes
	// stopping: containers (by runtime ID) asked to stop already.
	stopping map[string]time.Duration
	// backoff and backoffReset: the containers' restart back-off.
	backoff      map[string]*backoffEntry
	backoffReset time.Duration
}

// computePodActions decides what a sync of a pod that is not terminating
// does to its sandbox and containers. It changes nothing.
func computePodActions(in podActionsInput) podActions {
	pod, rs := in.pod, in.rs
	acts := podActions{createSandbox: !rs.SandboxReady}
	add := func(a containerAction) { acts.containers = append(acts.containers, a) }
	// A running container: replaced when its definition changed (the
	// kubelet restarts it whatever the restart policy), stopped when a
	// liveness or startup probe failed.
	running := func(c *v1.Container, latest *runtime.ContainerStatus) {
		if latest.Hash != containerHash(c) {
			msg := fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)
			if isRestartableInit(c) {
				msg = fmt.Sprintf("Init container %s definition changed", c.Name)
			}
			add(containerAction{kind: actReplace, container: c, latest: latest, grace: podGracePeriod(pod), message: msg})
			return
		}
		msg, kill := in.probes.killReason(c.Name, latest.ID)
		if !kill {
			return
		}
		if _, sent := in.stopping[latest.ID]; sent {
			add(containerAction{kind: actAwaitStop, container: c, latest: latest})
			return
		}
		add(containerAction{kind: actStop, container: c, latest: latest, grace: killGracePeriod(pod, c), message: msg, wake: true})
	}
	// An exited container to restart: at once, or once its back-off ends.
	restart := func(c *v1.Container, latest *runtime.ContainerStatus) {
		if until, wait := backOffUntil(in.backoff, c.Name, latest.FinishedAt, in.now, in.backoffReset); wait {
			add(containerAction{kind: actBackOff, container: c, latest: latest, until: until, backoff: backoffOf(in.backoff, c.Name)})
			return
		}
		add(containerAction{kind: actRestart, container: c, latest: latest, attempt: latest.Attempt + 1})
	}
	start := func(c *v1.Container, statuses []v1.ContainerStatus) {
		add(containerAction{kind: actStart, container: c, attempt: firstAttempt(statuses, c.Name)})
	}

	// Once the regular containers have started, init containers do not run
	// again; sidecars (restartable init containers) keep running beside
	// them until no regular container is left to run.
	podInitialized := hasAnyRegularContainerStarted(pod, rs)
	regularDone := podInitialized && pod.Spec.RestartPolicy != v1.RestartPolicyAlways && !anyRegularToRun(pod, rs)
	initialized := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest := findRuntimeStatus(rs, c.Name)
		if isRestartableInit(c) {
			switch {
			case regularDone:
				if latest != nil && latest.State == runtime.ContainerStateRunning {
					add(containerAction{kind: actStop, container: c, latest: latest, grace: podGracePeriod(pod)})
				}
				continue
			case latest == nil:
				start(c, pod.Status.InitContainerStatuses)
			case latest.State == runtime.ContainerStateRunning:
				running(c, latest)
				if podInitialized || in.probes.started(c, latest.ID) {
					continue
				}
			case latest.State == runtime.ContainerStateExited:
				restart(c, latest)
			}
			if podInitialized {
				continue
			}
			initialized = false
			break
		}
		if podInitialized {
			continue
		}
		if latest == nil {
			start(c, pod.Status.InitContainerStatuses)
			initialized = false
			break
		}
		if latest.State != runtime.ContainerStateExited {
			initialized = false
			break
		}
		if latest.ExitCode == 0 {
			continue
		}
		initialized = false
		if pod.Spec.RestartPolicy != v1.RestartPolicyNever {
			restart(c, latest)
		}
		break
	}
	acts.initialized = initialized
	if !initialized {
		return acts
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := findRuntimeStatus(rs, c.Name)
		switch {
		case latest == nil:
			start(c, pod.Status.ContainerStatuses)
		case latest.State == runtime.ContainerStateRunning:
			running(c, latest)
		case latest.State == runtime.ContainerStateExited:
			if shouldContainerBeRestarted(c, pod, rs) {
				restart(c, latest)
			}
		}
	}
	return acts
}

// replacements decides the fate of the containers stopped because their
// definition changed (replacing: the stopped container's ID by name): the
// successor of one that has exited starts, whatever the restart policy and
// back-off say; an entry whose container is gone from the spec or the
// runtime, or was succeeded already, is forgotten; one still running
// waits. The starts are in the order of the names.
func replacements(pod *v1.Pod, rs *runtime.PodStatus, replacing map[string]string) (starts []containerAction, forget []string) {
	names := make([]string, 0, len(replacing))
	for name := range replacing {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c, latest := containerSpec(pod, name), findRuntimeStatus(rs, name)
		if c == nil || latest == nil || latest.ID != replacing[name] {
			forget = append(forget, name)
			continue
		}
		if latest.State != runtime.ContainerStateExited {
			continue
		}
		forget = append(forget, name)
		starts = append(starts, containerAction{kind: actStart, container: c, latest: latest, attempt: latest.Attempt + 1})
	}
	return starts, forget
}

// terminationStops decides which running containers a terminating pod
// stops, and with what grace: the regular containers (and init
// containers) first, with grace; the sidecars once those are gone, within
// what is left of the deletion's grace period. A container the spec no
// longer names is stopped as a regular one.
func terminationStops(pod *v1.Pod, rs *runtime.PodStatus, grace time.Duration, now time.Time) []containerAction {
	regularRunning := false
	for _, cs := range rs.ContainerStatuses {
		if c := containerSpec(pod, cs.Name); cs.State == runtime.ContainerStateRunning && (c == nil || !isRestartableInit(c)) {
			regularRunning = true
		}
	}
	var stops []containerAction
	for i := range rs.ContainerStatuses {
		cs := &rs.ContainerStatuses[i]
		if cs.State != runtime.ContainerStateRunning {
			continue
		}
		c := containerSpec(pod, cs.Name)
		if c == nil {
			c = &v1.Container{Name: cs.Name}
		}
		g := grace
		if isRestartableInit(c) {
			if regularRunning {
				continue
			}
			if pod.DeletionTimestamp != nil {
				g = max(0, min(grace, pod.DeletionTimestamp.Sub(now)))
			}
		}
		stops = append(stops, containerAction{kind: actStop, container: c, latest: cs, grace: g})
	}
	return stops
}

// backOffUntil: the container finished at finished and may not restart
// before the returned time (per its back-off entry, if any).
func backOffUntil(entries map[string]*backoffEntry, name string, finished, now time.Time, reset time.Duration) (time.Time, bool) {
	e, ok := entries[name]
	if !ok || finished.Sub(e.lastUpdate) > reset {
		return time.Time{}, false
	}
	until := finished.Add(e.backoff)
	return until, now.Before(until)
}

// backoffOf is the container's current back-off step (zero: none).
func backoffOf(entries map[string]*backoffEntry, name string) time.Duration {
	if e, ok := entries[name]; ok {
		return e.backoff
	}
	return 0
}
