package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"github.com/corekube/corekube/agent/runtime/sim"
	v1 "k8s.io/api/core/v1"
)

// Adoption: a kubelet that restarts finds its pods' containers still
// running in the container runtime, which outlives it, and carries on:
// no container restarts, the pods' status does not change. The simulated
// runtime lives in the agent's process and dies with it, so a restarted
// agent rebuilds it from the last status it wrote for each pod (sandbox
// and IP, every container it reported with its ID, attempt, image and
// times, running ones replayed from their start), and restores what the
// kubelet would still know or learn at once: admission, waiting reasons
// and restart back-off, and the probe results the status shows (a
// container reported ready stays ready until its probe says otherwise).
// It runs once, after the pod informer has synced and before any pod is
// synced, so that adopted pods keep their IPs and their place on the node.

// adoptPods adopts every pod bound to one of the agent's nodes whose
// status shows it ran there and that has not ended.
func (a *Agent) adoptPods(ctx context.Context, pods []*v1.Pod) {
	// Oldest first, as the kubelet handles the pods it finds at start-up.
	sort.Slice(pods, func(i, j int) bool {
		if !pods[i].CreationTimestamp.Equal(&pods[j].CreationTimestamp) {
			return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
		}
		return pods[i].UID < pods[j].UID
	})
	adopted := 0
	for _, pod := range pods {
		n := a.byName[pod.Spec.NodeName]
		if n == nil || isTerminalPhase(pod.Status.Phase) || !ranOnRuntime(pod) {
			continue
		}
		w := a.worker(pod.UID)
		if w == nil {
			continue
		}
		if err := a.adoptPod(ctx, w, pod); err != nil {
			// The pod is synced as a new one: its containers start again.
			a.log.Warn("pod not adopted", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			continue
		}
		adopted++
	}
	if adopted > 0 {
		a.log.Info("adopted running pods", "pods", adopted)
	}
}

// ranOnRuntime: the pod's status reports a container of the simulated
// runtime.
func ranOnRuntime(pod *v1.Pod) bool {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if isRuntimeID(cs.ContainerID) || (cs.LastTerminationState.Terminated != nil && isRuntimeID(cs.LastTerminationState.Terminated.ContainerID)) {
				return true
			}
		}
	}
	return false
}

func isRuntimeID(id string) bool { return strings.HasPrefix(id, sim.Name+"://") }

// adoptPod rebuilds one pod in its node's runtime and its worker's state.
func (a *Agent) adoptPod(ctx context.Context, w *podWorker, pod *v1.Pod) error {
	n := w.node
	now := a.clock.Now()
	ip := pod.Status.PodIP
	switch {
	case pod.Spec.HostNetwork:
		ip = n.ip
	case ip != "":
		if !n.addresses().reserve(w.uid, ip) {
			a.log.Warn("adopted pod keeps an address outside the node's free range", "pod", w.key(), "ip", ip)
		}
	}

	var containers []sim.AdoptedContainer
	adoptList := func(specs []v1.Container, statuses []v1.ContainerStatus) error {
		for i := range specs {
			c := &specs[i]
			st, ok := getContainerStatus(statuses, c.Name)
			if !ok {
				continue
			}
			cs, err := a.adoptContainer(pod, c, w, &st)
			if err != nil {
				return err
			}
			containers = append(containers, cs...)
		}
		return nil
	}
	if err := adoptList(pod.Spec.InitContainers, pod.Status.InitContainerStatuses); err != nil {
		return err
	}
	if err := adoptList(pod.Spec.Containers, pod.Status.ContainerStatuses); err != nil {
		return err
	}
	// Creation order: a name's last state before its state.
	sort.SliceStable(containers, func(i, j int) bool { return containers[i].StartedAt.Before(containers[j].StartedAt) })
	err := n.runtime.Adopt(runtime.SandboxConfig{UID: w.uid, Name: pod.Name, Namespace: pod.Namespace, Hostname: pod.Name, IP: ip}, containers)
	if err != nil {
		n.addresses().release(w.uid)
		return fmt.Errorf("adopt pod %s: %w", podFormat(pod), err)
	}

	if pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero() {
		w.startTime = pod.Status.StartTime.Time
	}
	if pod.DeletionTimestamp == nil {
		node, _ := a.nodeObject(ctx, n, false)
		n.admissions.adopt(pod, node)
		w.admitted = true
	}
	a.adoptProbes(w, pod, now)
	return nil
}

// adoptContainer is what the runtime had of one container: the container
// its status's state reports and the one its last state reports, when
// they are this runtime's. It also restores the container's waiting
// reason and, for CrashLoopBackOff, its back-off.
func (a *Agent) adoptContainer(pod *v1.Pod, c *v1.Container, w *podWorker, st *v1.ContainerStatus) ([]sim.AdoptedContainer, error) {
	var out []sim.AdoptedContainer
	attempt := int(st.RestartCount)
	current := isRuntimeID(st.ContainerID) && (st.State.Running != nil || st.State.Terminated != nil)
	// (A waiting container's status keeps the ID of the exited one its
	// last state reports: the newest the runtime has.)
	if last := st.LastTerminationState.Terminated; last != nil && isRuntimeID(last.ContainerID) && (!current || last.ContainerID != st.ContainerID) {
		lastAttempt := attempt
		if current {
			lastAttempt = max(0, attempt-1)
		}
		cfg := a.containerConfig(pod, c, w, lastAttempt)
		cfg.Image = st.Image
		out = append(out, sim.AdoptedContainer{
			Config: cfg, ID: last.ContainerID, ImageRef: st.ImageID, StartedAt: last.StartedAt.Time,
			Exited: true, FinishedAt: last.FinishedAt.Time, ExitCode: last.ExitCode, Reason: last.Reason, Message: last.Message,
		})
		if wt := st.State.Waiting; wt != nil && wt.Reason == reasonCrashLoopBackOff {
			// "back-off 40s restarting failed container=...": the back-off
			// ends where it would have.
			if f := strings.Fields(wt.Message); len(f) > 1 && f[0] == "back-off" {
				if d, err := time.ParseDuration(f[1]); err == nil && d > 0 {
					setIn(&w.backoff, c.Name, &backoffEntry{backoff: d, lastUpdate: last.FinishedAt.Time})
				}
			}
		}
	}
	if wt := st.State.Waiting; wt != nil && wt.Reason != "" && wt.Reason != reasonContainerCreating && wt.Reason != reasonPodInitializing {
		setIn(&w.reasons, c.Name, waitingReason{wt.Reason, wt.Message})
	}
	if !current {
		return out, nil
	}
	cfg := a.containerConfig(pod, c, w, attempt)
	if full, err := sim.NormalizeImage(c.Image); err != nil || full != st.Image {
		// Not the image the spec names now (kubectl set image while the
		// agent was down): a hash that differs, so the container is
		// replaced as its definition changed.
		cfg.Hash = containerHash(&v1.Container{Name: c.Name, Image: st.Image})
	}
	cfg.Image = st.Image
	ac := sim.AdoptedContainer{Config: cfg, ID: st.ContainerID, ImageRef: st.ImageID}
	if r := st.State.Running; r != nil {
		ac.StartedAt = r.StartedAt.Time
	} else {
		t := st.State.Terminated
		ac.StartedAt, ac.Exited, ac.FinishedAt = t.StartedAt.Time, true, t.FinishedAt.Time
		ac.ExitCode, ac.Reason, ac.Message = t.ExitCode, t.Reason, t.Message
	}
	if ac.StartedAt.IsZero() {
		return nil, fmt.Errorf("container %s: no start time in its status", c.Name)
	}
	return append(out, ac), nil
}

// adoptProbes restores the probe results the pod's status shows for its
// running containers: started (startup probe succeeded) and ready
// (readiness probe succeeded). The probes run again at their next period,
// as for a container that just passed them.
func (a *Agent) adoptProbes(w *podWorker, pod *v1.Pod, now time.Time) {
	adopt := func(c *v1.Container, st v1.ContainerStatus) {
		if st.State.Running == nil || !isRuntimeID(st.ContainerID) {
			return
		}
		set := func(t probeType, spec *v1.Probe) {
			if w.probes == nil {
				w.probes = &podProbes{workers: map[probeKey]*probeWorker{}}
			}
			w.probes.workers[probeKey{c.Name, t}] = &probeWorker{
				typ: t, spec: spec, containerID: st.ContainerID,
				result: resultSuccess, lastResult: resultSuccess, resultRun: 1,
				nextRun: now.Add(period(spec)),
			}
		}
		started := st.Started != nil && *st.Started
		if c.StartupProbe != nil && started {
			set(startup, c.StartupProbe)
		}
		if c.ReadinessProbe != nil && started && st.Ready {
			set(readiness, c.ReadinessProbe)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isRestartableInit(c) {
			if st, ok := getContainerStatus(pod.Status.InitContainerStatuses, c.Name); ok {
				adopt(c, st)
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if st, ok := getContainerStatus(pod.Status.ContainerStatuses, c.Name); ok {
			adopt(c, st)
		}
	}
}
