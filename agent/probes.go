package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
)

// The prober, as the kubelet's: startup, liveness and readiness probes per
// container, each with its result, the run of equal results (against
// successThreshold / failureThreshold) and the time of its next run. It runs
// inside the pod's sync (exec probes are instant in the simulated runtime),
// so it needs no goroutine per probe.

type probeType uint8

const (
	liveness probeType = iota
	readiness
	startup
)

func (t probeType) String() string {
	switch t {
	case liveness:
		return "Liveness"
	case readiness:
		return "Readiness"
	}
	return "Startup"
}

type probeResult uint8

const (
	resultUnknown probeResult = iota
	resultSuccess
	resultFailure
)

// initialResult is a probe's result before it first counts: readiness
// starts failed, liveness succeeded, startup unknown.
func (t probeType) initialResult() probeResult {
	switch t {
	case readiness:
		return resultFailure
	case liveness:
		return resultSuccess
	}
	return resultUnknown
}

type probeKey struct {
	container string
	typ       probeType
}

type probeWorker struct {
	typ         probeType
	spec        *v1.Probe
	containerID string
	result      probeResult
	lastResult  probeResult
	resultRun   int
	// onHold: a liveness or startup failure had the container killed;
	// probing waits for the next container.
	onHold  bool
	nextRun time.Time
}

// podProbes holds a pod's probe workers.
type podProbes struct {
	workers map[probeKey]*probeWorker
}

func (p *podProbes) worker(name string, t probeType) *probeWorker {
	if p == nil {
		return nil
	}
	return p.workers[probeKey{name, t}]
}

func (p *podProbes) started(c *v1.Container, id string) bool {
	if c.StartupProbe == nil {
		return true
	}
	w := p.worker(c.Name, startup)
	return w != nil && w.containerID == id && w.result == resultSuccess
}

func (p *podProbes) ready(c *v1.Container, id string) bool {
	if !p.started(c, id) {
		return false
	}
	if c.ReadinessProbe == nil {
		return true
	}
	w := p.worker(c.Name, readiness)
	return w != nil && w.containerID == id && w.result == resultSuccess
}

// killReason says whether a failed liveness or startup probe wants the
// container with this ID restarted, and the Killing event's message.
func (p *podProbes) killReason(name, id string) (string, bool) {
	for _, t := range []probeType{startup, liveness} {
		if w := p.worker(name, t); w != nil && w.containerID == id && w.onHold && w.result == resultFailure {
			if t == startup {
				return fmt.Sprintf("Container %s failed startup probe, will be restarted", name), true
			}
			return fmt.Sprintf("Container %s failed liveness probe, will be restarted", name), true
		}
	}
	return "", false
}

// runProbes runs the probes that are due on the pod's running containers
// and returns when the next one is due (zero: none).
func (a *Agent) runProbes(ctx context.Context, w *podWorker, pod *v1.Pod, rs *runtime.PodStatus, now time.Time) time.Time {
	var next time.Time
	containers := make([]*v1.Container, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		if isRestartableInit(&pod.Spec.InitContainers[i]) {
			containers = append(containers, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		containers = append(containers, &pod.Spec.Containers[i])
	}
	for _, c := range containers {
		for _, t := range []probeType{startup, liveness, readiness} {
			spec := probeSpec(c, t)
			if spec == nil {
				continue
			}
			if w.probes == nil {
				w.probes = &podProbes{workers: map[probeKey]*probeWorker{}}
			}
			key := probeKey{c.Name, t}
			pw := w.probes.workers[key]
			if pw == nil {
				pw = &probeWorker{typ: t, spec: spec}
				w.probes.workers[key] = pw
			}
			cs := findRuntimeStatus(rs, c.Name)
			if cs == nil || cs.State != runtime.ContainerStateRunning {
				pw.containerID, pw.result, pw.resultRun, pw.onHold = "", t.initialResult(), 0, false
				continue
			}
			if pw.containerID != cs.ID {
				// A new container: start over after the initial delay.
				pw.containerID, pw.result, pw.lastResult, pw.resultRun, pw.onHold = cs.ID, t.initialResult(), resultUnknown, 0, false
				pw.nextRun = cs.StartedAt.Add(time.Duration(spec.InitialDelaySeconds) * time.Second)
			}
			if pw.onHold || (t == startup && pw.result == resultSuccess) {
				continue
			}
			if t != startup && !w.probes.started(c, cs.ID) {
				// Liveness and readiness wait for the startup probe.
				pw.nextRun = now.Add(period(spec))
				next = earliest(next, pw.nextRun)
				continue
			}
			if now.Before(pw.nextRun) {
				next = earliest(next, pw.nextRun)
				continue
			}
			a.probeOnce(ctx, w, pod, c, pw, cs.ID)
			pw.nextRun = now.Add(period(spec))
			if !pw.onHold && !(t == startup && pw.result == resultSuccess) {
				next = earliest(next, pw.nextRun)
			}
		}
	}
	return next
}

func period(p *v1.Probe) time.Duration {
	if p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func probeSpec(c *v1.Container, t probeType) *v1.Probe {
	switch t {
	case liveness:
		return c.LivenessProbe
	case readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

// probeOnce runs one probe and updates its result per the thresholds.
func (a *Agent) probeOnce(ctx context.Context, w *podWorker, pod *v1.Pod, c *v1.Container, pw *probeWorker, id string) {
	result, output := a.execProbe(ctx, w, pw.spec, id)
	if result == resultFailure {
		a.events.podEvent(pod, containerFieldPath(pod, c.Name), w.node, v1.EventTypeWarning, "Unhealthy",
			fmt.Sprintf("%s probe failed: %s", pw.typ, output))
	}
	if result == resultUnknown {
		return
	}
	if pw.lastResult == result {
		pw.resultRun++
	} else {
		pw.lastResult, pw.resultRun = result, 1
	}
	failureThreshold, successThreshold := int(pw.spec.FailureThreshold), int(pw.spec.SuccessThreshold)
	if failureThreshold <= 0 {
		failureThreshold = 3
	}
	if successThreshold <= 0 {
		successThreshold = 1
	}
	if (result == resultFailure && pw.resultRun < failureThreshold) || (result == resultSuccess && pw.resultRun < successThreshold) {
		return
	}
	pw.result = result
	if (pw.typ == liveness || pw.typ == startup) && result == resultFailure {
		pw.onHold, pw.resultRun = true, 0
	}
}

// execProbe runs a probe's handler: exec commands run in the container
// through the simulated shell; HTTP, TCP and gRPC checks succeed while the
// container runs.
func (a *Agent) execProbe(ctx context.Context, w *podWorker, p *v1.Probe, id string) (probeResult, string) {
	if p.Exec == nil {
		return resultSuccess, ""
	}
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	code, out, err := w.node.runtime.ExecSync(ctx, id, p.Exec.Command, timeout)
	switch {
	case errors.Is(err, runtime.ErrExecTimeout):
		return resultFailure, fmt.Sprintf("command %q timed out", p.Exec.Command)
	case errors.Is(err, runtime.ErrNotRunning):
		return resultUnknown, ""
	case err != nil:
		return resultUnknown, err.Error()
	case code != 0:
		return resultFailure, string(out)
	}
	return resultSuccess, string(out)
}
