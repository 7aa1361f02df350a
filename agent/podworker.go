package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podWorker is the agent's state for one pod bound to one of its nodes.
// The informer handlers write pod and removed (under mu); everything else
// belongs to the sync, which the queue runs for one pod at a time.
type podWorker struct {
	uid  types.UID
	node *node

	mu      sync.Mutex
	pod     *v1.Pod
	removed bool
	// writing is the status being written through pods/status, nil when
	// no write is in flight: the kubelet API reads it, as the kubelet's
	// status manager answers with the status it is syncing, so a client
	// that saw the write's watch event never finds the agent behind it.
	writing *v1.PodStatus
	// evict: the eviction manager evicts the pod (eviction.go).
	evict *evictionRequest

	startTime time.Time
	backoff   map[string]*backoffEntry
	// reasons is the kubelet's reason cache: why a container waits.
	reasons map[string]waitingReason
	// backOffEvents: the exited container a BackOff event was sent for.
	backOffEvents map[string]string
	imageBackoff  map[string]*backoffEntry
	// tokens are the ServiceAccount tokens of the pod's projected volumes
	// (the runtime keeps the volumes' files).
	// A slice, not a map: a pod has one token or a few, and a map of one
	// entry costs a bucket of eight (~1 KB a pod).
	tokens []keyedToken
	probes *podProbes
	// stopping: containers sent a stop, with the grace period.
	stopping map[string]time.Duration
	// replacing: by container name, the running container stopped because
	// its definition changed; its successor starts as soon as it exits,
	// whatever the restart policy and back-off say.
	replacing map[string]string
	// terminal: the pod finished (or failed); nothing restarts any more.
	terminal     bool
	deleteSent   bool
	deadlineSent bool
	// admitted: the node admitted the pod; rejected: it did not (the pod
	// never runs).
	admitted bool
	rejected *rejection

	// syncs counts the pod's syncs (tests and benchmarks read it).
	syncs atomic.Uint64

	// For the kubelet metrics. firstSeen: when the informer first showed
	// the pod (set before the worker is shared). updated: the informer
	// showed a change since the last sync began. created: a sync has run
	// (the first is a create). startObserved: the pod's start from
	// Pending to Running was measured. sli: the pod startup latency
	// tracker's state, owned by the informer's handler. pullStart and
	// pullEnd (under mu): the first image pull's start and the last one's
	// end.
	firstSeen          time.Time
	updated            atomic.Bool
	created            bool
	startObserved      bool
	sli                uint8
	pullStart, pullEnd time.Time
}

// nextOp is the operation_type of the sync about to run, as the kubelet
// names its pod work: the pod's first sync creates it, a sync after the
// informer showed a change updates it, one of a pod being stopped kills
// it, the last one (the pod gone from the API: cleanup) is terminated,
// others (wake-ups for events and timers, resyncs) sync it.
func (w *podWorker) nextOp() syncOp {
	updated := w.updated.Swap(false)
	pod, removed := w.snapshot()
	switch {
	case removed || pod == nil:
		return opTerminated
	case pod.DeletionTimestamp != nil || w.terminal:
		return opKill
	case !w.created:
		w.created = true
		return opCreate
	case updated:
		return opUpdate
	}
	return opSync
}

// recordPull records an image pull from start to end (the agent's clock).
func (w *podWorker) recordPull(start, end time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pullStart.IsZero() {
		w.pullStart = start
	}
	w.pullEnd = end
}

// pullDuration is the time from the first image pull's start to the last
// one's end, as the kubelet's tracker takes off the pod's startup latency.
func (w *podWorker) pullDuration() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pullStart.IsZero() || w.pullEnd.Before(w.pullStart) {
		return 0
	}
	return w.pullEnd.Sub(w.pullStart)
}

// newPodWorker returns a worker with nil maps: most pods never need most of
// them (reading and deleting from a nil map is fine; setIn allocates on the
// first write), and a process carries tens of thousands of workers.
func newPodWorker(uid types.UID, n *node) *podWorker {
	return &podWorker{uid: uid, node: n}
}

// setIn sets m[k] = v, making the map first if it is nil.
func setIn[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// setPod records a newer state of the pod, from the informer or from the
// agent's own writes; older states are ignored. Of two copies of the same
// state the informer's is kept, so the worker holds no second copy of what
// the informer's cache holds.
func (w *podWorker) setPod(pod *v1.Pod, fromInformer bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pod == nil || w.pod.ResourceVersion == "" {
		w.pod = pod
		return
	}
	if pod.ResourceVersion == w.pod.ResourceVersion {
		if fromInformer {
			w.pod = pod
		}
		return
	}
	if newerOrSame(pod.ResourceVersion, w.pod.ResourceVersion) {
		w.pod = pod
	}
}

// setWriting records the status a pods/status write is about to send, or
// clears it (nil) when the write is over.
func (w *podWorker) setWriting(status *v1.PodStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writing = status
}

// statusView is the pod as the kubelet API shows it: with the status being
// written, when a write is in flight.
func (w *podWorker) statusView() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pod == nil || w.writing == nil {
		return w.pod, w.removed
	}
	view := *w.pod
	view.Status = *w.writing
	return &view, w.removed
}

func (w *podWorker) setRemoved() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removed = true
}

func (w *podWorker) snapshot() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.removed
}

func (w *podWorker) key() string {
	pod, _ := w.snapshot()
	if pod == nil {
		return string(w.uid)
	}
	return pod.Namespace + "/" + pod.Name
}

// podFormat is the kubelet's format.Pod: name_namespace(uid).
func podFormat(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// syncPod brings the pod's containers where its spec and status say they
// should be, and writes the pod's status. It returns when the pod wants
// its next sync (zero: only on events).
func (a *Agent) syncPod(ctx context.Context, w *podWorker) (time.Time, error) {
	pod, removed := w.snapshot()
	n := w.node
	if removed || pod == nil {
		// Gone from the API (deleted by us after termination, or forced):
		// whatever still runs is killed at once.
		if err := n.runtime.StopPodSandbox(ctx, w.uid); err != nil {
			return time.Time{}, err
		}
		if err := n.runtime.RemovePod(ctx, w.uid); err != nil {
			return time.Time{}, err
		}
		n.addresses().release(w.uid)
		n.admissions.release(w.uid)
		a.forget(w.uid)
		return time.Time{}, nil
	}
	if !n.isRegistered() {
		return a.clock.Now().Add(500 * time.Millisecond), nil // until the node is registered
	}
	now := a.clock.Now()
	switch {
	case w.rejected != nil:
		return a.syncRejected(ctx, w, pod, now)
	case isTerminalPhase(pod.Status.Phase):
		// Ended: no longer holds any of the node's resources.
		n.admissions.release(w.uid)
	case !w.admitted && pod.DeletionTimestamp == nil:
		rej, err := a.admitPod(ctx, w, pod)
		if err != nil {
			return time.Time{}, err
		}
		if rej != nil {
			w.rejected = rej
			return a.syncRejected(ctx, w, pod, now)
		}
		w.admitted = true
	}
	rs, err := n.runtime.GetPodStatus(ctx, w.uid)
	if err != nil {
		return time.Time{}, err
	}
	if w.startTime.IsZero() {
		w.startTime = now
		if pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero() {
			w.startTime = pod.Status.StartTime.Time
		}
	}
	var deadline time.Time
	if ads := pod.Spec.ActiveDeadlineSeconds; ads != nil {
		deadline = w.startTime.Add(time.Duration(*ads) * time.Second)
	}
	pastDeadline := !deadline.IsZero() && !now.Before(deadline) && !isTerminalPhase(pod.Status.Phase)
	if pod.DeletionTimestamp != nil || pastDeadline || w.terminal || isTerminalPhase(pod.Status.Phase) || w.eviction() != nil {
		return a.syncTerminating(ctx, w, pod, rs, now, pastDeadline)
	}
	return a.syncRunning(ctx, w, pod, rs, now, deadline)
}

// statusFor computes the pod's status from the runtime's.
func (a *Agent) statusFor(w *podWorker, pod *v1.Pod, rs *runtime.PodStatus, now time.Time, podIsTerminal, deadlineExceeded bool) v1.PodStatus {
	var probes probeView = noProbes{}
	if w.probes != nil {
		probes = w.probes
	}
	var evicted string
	if ev := w.eviction(); ev != nil {
		evicted = ev.message
	}
	return generatePodStatus(statusInput{
		pod: pod, rs: rs, reasons: w.reasons, probes: probes,
		podIsTerminal: podIsTerminal, deadlineExceeded: deadlineExceeded, evicted: evicted,
		hostIP: w.node.ip, now: now, startTime: w.startTime,
	})
}

// syncRunning: probes, status, then the actions computePodActions decides
// (sandbox, init containers in order, then the containers, restarts with
// back-off, liveness kills), applied in order.
func (a *Agent) syncRunning(ctx context.Context, w *podWorker, pod *v1.Pod, rs *runtime.PodStatus, now, deadline time.Time) (time.Time, error) {
	rs, err := a.replaceChanged(ctx, w, pod, rs)
	if err != nil {
		return time.Time{}, err
	}
	next := a.runProbes(ctx, w, pod, rs, now)
	status := a.statusFor(w, pod, rs, now, false, false)
	if isTerminalPhase(status.Phase) {
		// Done per the restart policy: the final status is written once
		// the sandbox is down.
		w.terminal = true
		return a.syncTerminating(ctx, w, pod, rs, now, false)
	}
	pod, err = a.writeStatus(ctx, w, pod, status)
	if err != nil {
		return time.Time{}, err
	}
	actions := computePodActions(podActionsInput{
		pod: pod, rs: rs, now: now, probes: w.probes,
		stopping: w.stopping, backoff: w.backoff, backoffReset: a.cfg.BackoffReset,
	})

	n := w.node
	if actions.createSandbox {
		ip := n.ip
		if !pod.Spec.HostNetwork {
			if ip, err = n.addresses().allocate(w.uid); err != nil {
				a.events.podEvent(pod, "", n, v1.EventTypeWarning, "FailedCreatePodSandBox",
					fmt.Sprintf("Failed to create pod sandbox: %v", err))
				return time.Time{}, err
			}
		}
		n.metrics.startedPods.Inc()
		if err := n.runtime.RunPodSandbox(ctx, runtime.SandboxConfig{UID: w.uid, Name: pod.Name, Namespace: pod.Namespace, Hostname: pod.Name, IP: ip}); err != nil {
			n.metrics.startedPodsErrors.Inc()
			return time.Time{}, err
		}
	}

	// Volumes before containers, as the kubelet's volume manager: a pod
	// whose token cannot be had starts nothing (ContainerCreating) and
	// tries again.
	refreshTokens, err := a.mountVolumes(ctx, w, pod)
	if err != nil {
		a.events.podEvent(pod, "", n, v1.EventTypeWarning, "FailedMount", err.Error())
		return now.Add(a.cfg.BackoffBase), nil
	}
	next = earliest(next, refreshTokens)

	reasonsBefore := len(w.reasons)
	wake, changedReasons, err := a.applyContainerActions(ctx, w, pod, actions.containers, now)
	if err != nil {
		return time.Time{}, err
	}
	next = earliest(next, wake)
	a.collectGarbage(ctx, w, pod, rs)
	if changedReasons || len(w.reasons) != reasonsBefore {
		// The status shows the new waiting reasons at the next sync.
		return now, nil
	}
	if !deadline.IsZero() {
		next = earliest(next, deadline)
	}
	return earliest(next, now.Add(a.resyncInterval())), nil
}

// applyContainerActions does the containers' actions in order, stopping at
// the first error. It returns when the pod wants its next sync for them
// (zero: no wish) and whether a container's waiting reason changed.
func (a *Agent) applyContainerActions(ctx context.Context, w *podWorker, pod *v1.Pod, actions []containerAction, now time.Time) (time.Time, bool, error) {
	var next time.Time
	changed := false
	for _, act := range actions {
		c := act.container
		switch act.kind {
		case actStart:
			changed = a.startContainer(ctx, w, pod, c, act.attempt) || changed
		case actRestart:
			w.nextBackOff(c.Name, act.latest.FinishedAt, now, a.cfg)
			changed = a.startContainer(ctx, w, pod, c, act.attempt) || changed
		case actBackOff:
			next = earliest(next, act.until)
			changed = a.backOff(w, pod, c, act.latest, act.backoff) || changed
		case actStop:
			if err := a.stopContainer(ctx, w, pod, c, act.latest.ID, act.grace, act.message); err != nil {
				return time.Time{}, false, err
			}
			if act.wake {
				next = earliest(next, w.node.runtime.NextChange(w.uid))
			}
		case actAwaitStop:
			next = earliest(next, w.node.runtime.NextChange(w.uid))
		case actReplace:
			if err := a.stopContainer(ctx, w, pod, c, act.latest.ID, act.grace, act.message); err != nil {
				return time.Time{}, false, err
			}
			setIn(&w.replacing, c.Name, act.latest.ID)
			next = earliest(next, w.node.runtime.NextChange(w.uid))
		}
	}
	return next, changed, nil
}

// replaceChanged starts the successors of the containers stopped because
// their definition changed once they have exited, before the pod's status
// is computed (the kubelet kills and starts within one sync: its status
// never shows the old container exited and not replaced, which with
// restartPolicy Never would fail the pod). It returns the runtime's status
// as it then is.
func (a *Agent) replaceChanged(ctx context.Context, w *podWorker, pod *v1.Pod, rs *runtime.PodStatus) (*runtime.PodStatus, error) {
	starts, forget := replacements(pod, rs, w.replacing)
	for _, name := range forget {
		delete(w.replacing, name)
	}
	if len(starts) == 0 {
		return rs, nil
	}
	for _, act := range starts {
		a.startContainer(ctx, w, pod, act.container, act.attempt)
	}
	rs, err := w.node.runtime.GetPodStatus(ctx, w.uid)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", podFormat(pod), err)
	}
	return rs, nil
}

// anyRegularToRun: a regular container runs, or is yet to start, or will
// be restarted.
func anyRegularToRun(pod *v1.Pod, rs *runtime.PodStatus) bool {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := findRuntimeStatus(rs, c.Name)
		if latest == nil || latest.State != runtime.ContainerStateExited || shouldContainerBeRestarted(c, pod, rs) {
			return true
		}
	}
	return false
}

// stopContainer is the kubelet's killContainer: the Killing event (with
// message, by default "Stopping container <name>"), the preStop hook, then
// SIGTERM, and SIGKILL once grace has passed. A container being stopped
// already is stopped again only to shorten its grace period, silently.
func (a *Agent) stopContainer(ctx context.Context, w *podWorker, pod *v1.Pod, c *v1.Container, id string, grace time.Duration, message string) error {
	sent, ok := w.stopping[id]
	if ok && grace >= sent {
		return nil
	}
	fp := containerFieldPath(pod, c.Name)
	opts := runtime.StopOptions{Timeout: grace}
	hookFailed := false
	if !ok {
		if message == "" {
			message = fmt.Sprintf("Stopping container %s", c.Name)
		}
		a.events.podEvent(pod, fp, w.node, v1.EventTypeNormal, "Killing", message)
		// The kubelet runs the hook only when there is time for it.
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
			switch h := c.Lifecycle.PreStop; {
			case h.Exec != nil:
				opts.PreStop = h.Exec.Command
			case h.Sleep != nil:
				opts.PreStop = []string{"sleep", strconv.FormatInt(h.Sleep.Seconds, 10)}
			case h.HTTPGet != nil:
				// The container runs: it answers at once.
			default:
				// TCP handlers: the kubelet does not run them.
				hookFailed = true
			}
		}
	}
	err := w.node.runtime.StopContainer(ctx, id, opts)
	if errors.Is(err, runtime.ErrPreStopHook) {
		hookFailed, err = true, nil
	}
	if hookFailed {
		// As the kubelet: the hook's message stays out of the event.
		a.events.podEvent(pod, fp, w.node, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
	}
	if err != nil {
		return fmt.Errorf("stop container %s of pod %s: %w", c.Name, podFormat(pod), err)
	}
	setIn(&w.stopping, id, grace)
	return nil
}

// resyncInterval is SyncFrequency with up to 50% jitter (as the kubelet's
// pod workers), so that pods started together do not resync together.
func (a *Agent) resyncInterval() time.Duration {
	return a.cfg.SyncFrequency + time.Duration(rand.Float64()*0.5*float64(a.cfg.SyncFrequency))
}

// backOff records that an exited container waits out its back-off
// (CrashLoopBackOff, backoff the current step), with one BackOff event per
// exited container. It returns whether the container's waiting reason
// changed.
func (a *Agent) backOff(w *podWorker, pod *v1.Pod, c *v1.Container, latest *runtime.ContainerStatus, backoff time.Duration) bool {
	reason := waitingReason{reasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.Name, podFormat(pod))}
	changed := w.reasons[c.Name] != reason
	setIn(&w.reasons, c.Name, reason)
	if w.backOffEvents[c.Name] != latest.ID {
		setIn(&w.backOffEvents, c.Name, latest.ID)
		a.events.podEvent(pod, containerFieldPath(pod, c.Name), w.node, v1.EventTypeWarning, "BackOff",
			fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podFormat(pod)))
	}
	return changed
}

// firstAttempt is the restart count of a container the runtime has no
// record of: 0, unless the pod's status shows it ran before (the runtime lost
// it, e.g. the agent restarted), in which case the count goes on, as the
// kubelet's (which reads it from the container log directory).
func firstAttempt(statuses []v1.ContainerStatus, name string) int {
	st, ok := getContainerStatus(statuses, name)
	if !ok || (st.ContainerID == "" && st.LastTerminationState.Terminated == nil) {
		return 0
	}
	if st.ContainerID == "" {
		return int(st.RestartCount)
	}
	return int(st.RestartCount) + 1
}

// killGracePeriod is the grace period of a probe kill: the probe's own, or
// the pod's.
func killGracePeriod(pod *v1.Pod, c *v1.Container) time.Duration {
	for _, p := range []*v1.Probe{c.StartupProbe, c.LivenessProbe} {
		if p != nil && p.TerminationGracePeriodSeconds != nil {
			return time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
		}
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// collectGarbage removes the containers older than the newest two of each
// name (the newest is the state, the one before it the last state).
func (a *Agent) collectGarbage(ctx context.Context, w *podWorker, pod *v1.Pod, rs *runtime.PodStatus) {
	seen := map[string]int{}
	for _, cs := range rs.ContainerStatuses { // newest first
		seen[cs.Name]++
		if seen[cs.Name] > 2 && cs.State == runtime.ContainerStateExited {
			if err := w.node.runtime.RemoveContainer(ctx, cs.ID); err != nil {
				a.log.Debug("container not removed", "pod", pod.Name, "container", cs.ID, "err", err)
			}
			delete(w.stopping, cs.ID)
		}
	}
}

// syncTerminating stops the pod's containers (deletion, active deadline or
// completion), writes the final status, and deletes a deleted pod.
func (a *Agent) syncTerminating(ctx context.Context, w *podWorker, pod *v1.Pod, rs *runtime.PodStatus, now time.Time, pastDeadline bool) (time.Time, error) {
	n := w.node
	evict := w.eviction()
	w.terminal = w.terminal || pastDeadline || evict != nil
	if pastDeadline && !w.deadlineSent {
		w.deadlineSent = true
		a.events.podEvent(pod, "", n, v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	}
	grace := podGracePeriod(pod)
	if evict != nil {
		// The eviction manager's override replaces the pod's own.
		grace = evict.grace
	}
	// The regular containers (and init containers) stop first; sidecars
	// once they are gone, within what is left of the grace period.
	running := false
	for _, cs := range rs.ContainerStatuses {
		running = running || cs.State == runtime.ContainerStateRunning
	}
	for _, act := range terminationStops(pod, rs, grace, now) {
		if err := a.stopContainer(ctx, w, pod, act.container, act.latest.ID, act.grace, act.message); err != nil {
			return time.Time{}, err
		}
	}
	if running {
		// Stops can end containers at once (servers on SIGTERM).
		var err error
		if rs, err = n.runtime.GetPodStatus(ctx, w.uid); err != nil {
			return time.Time{}, err
		}
		running = false
		for _, cs := range rs.ContainerStatuses {
			running = running || cs.State == runtime.ContainerStateRunning
		}
	}
	deadlineExceeded := pastDeadline || pod.Status.Reason == reasonDeadlineExceeded
	if running {
		status := a.statusFor(w, pod, rs, now, false, deadlineExceeded)
		if isTerminalPhase(status.Phase) && !isTerminalPhase(pod.Status.Phase) {
			// Not terminal while containers could still run.
			status.Phase, status.Reason, status.Message = pod.Status.Phase, pod.Status.Reason, pod.Status.Message
		}
		if _, err := a.writeStatus(ctx, w, pod, status); err != nil {
			return time.Time{}, err
		}
		// The PLEG reports the exits; wake for the kill deadline anyway.
		return earliest(n.runtime.NextChange(w.uid), now.Add(a.resyncInterval())), nil
	}

	if rs.SandboxReady {
		if err := n.runtime.StopPodSandbox(ctx, w.uid); err != nil {
			return time.Time{}, err
		}
		n.addresses().release(w.uid)
		var err error
		if rs, err = n.runtime.GetPodStatus(ctx, w.uid); err != nil {
			return time.Time{}, err
		}
	}
	status := a.statusFor(w, pod, rs, now, true, deadlineExceeded)
	terminatePod(pod, &status)
	pod, err := a.writeStatus(ctx, w, pod, status)
	if err != nil {
		return time.Time{}, err
	}
	if pod.DeletionTimestamp == nil || w.deleteSent {
		return time.Time{}, nil
	}
	if err := n.runtime.RemovePod(ctx, w.uid); err != nil {
		return time.Time{}, err
	}
	if err := a.deletePod(ctx, pod); err != nil {
		return time.Time{}, err
	}
	w.deleteSent = true
	return time.Time{}, nil
}

// deletePod deletes a deleted pod that has stopped, as the kubelet's status
// manager does: at once, and only that very pod (a UID precondition).
func (a *Agent) deletePod(ctx context.Context, pod *v1.Pod) error {
	err := a.clientFor(pod.Spec.NodeName).CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		// A new pod of the same name: ours is gone.
	default:
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// podGracePeriod is how long the pod's containers get to stop: the
// deletion's grace period, else the pod's.
func podGracePeriod(pod *v1.Pod) time.Duration {
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// writeStatus writes status through pods/status when it differs from the
// pod's; it returns the pod as it now is.
func (a *Agent) writeStatus(ctx context.Context, w *podWorker, pod *v1.Pod, status v1.PodStatus) (*v1.Pod, error) {
	if apiequality.Semantic.DeepEqual(pod.Status, status) {
		return pod, nil
	}
	next := pod.DeepCopy()
	next.Status = status
	w.setWriting(&next.Status)
	updated, err := a.clientFor(pod.Spec.NodeName).CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	// setPod below records the written status; until then the kubelet API
	// reads the one in flight.
	defer w.setWriting(nil)
	if err == nil {
		w.setPod(updated, false)
		// As the kubelet: the pod went from Pending to Running, measured
		// from when it was first seen.
		if !w.startObserved && status.Phase == v1.PodRunning && (pod.Status.Phase == v1.PodPending || pod.Status.Phase == "") && !w.firstSeen.IsZero() {
			w.startObserved = true
			w.node.metrics.podStart.Observe(a.clock.Since(w.firstSeen).Seconds())
		}
		return updated, nil
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Someone else wrote the pod: sync again from its newest state.
		fresh, gerr := a.clientFor(pod.Spec.NodeName).CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case gerr == nil && fresh.UID == pod.UID:
			w.setPod(fresh, false)
		case apierrors.IsNotFound(gerr) || (gerr == nil && fresh.UID != pod.UID):
			w.setRemoved()
		}
		return nil, errRequeue
	}
	return nil, fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// backoffEntry is a container's restart back-off, as client-go's
// flowcontrol.Backoff the kubelet uses.
type backoffEntry struct {
	backoff    time.Duration
	lastUpdate time.Time
}

// inBackOff: the container finished at finished and may not restart
// before the returned time.
func (w *podWorker) inBackOff(name string, finished, now time.Time, reset time.Duration) (time.Time, bool) {
	return backOffUntil(w.backoff, name, finished, now, reset)
}

// nextBackOff records a restart: the first back-off is the base, each next
// one doubles up to the maximum; after the reset period without a crash it
// starts over.
func (w *podWorker) nextBackOff(name string, finished, now time.Time, cfg Config) {
	e, ok := w.backoff[name]
	if !ok || finished.Sub(e.lastUpdate) > cfg.BackoffReset {
		setIn(&w.backoff, name, &backoffEntry{backoff: cfg.BackoffBase, lastUpdate: now})
		return
	}
	e.backoff *= 2
	if e.backoff > cfg.BackoffMax {
		e.backoff = cfg.BackoffMax
	}
	e.lastUpdate = now
}
