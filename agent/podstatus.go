package agent

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// This file computes a pod's status from the runtime's view exactly as the
// kubelet v1.32 does (generateAPIPodStatus, convertToAPIContainerStatuses,
// getPhase, the status generators of pkg/kubelet/status and the status
// manager's lastTransitionTime/startTime rules). It is pure: everything it
// needs is in statusInput.

// Container waiting reasons and condition reasons, as the kubelet's.
const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
	reasonCrashLoopBackOff  = "CrashLoopBackOff"
	reasonStatusUnknown     = "ContainerStatusUnknown"

	reasonUnknownContainerStatuses = "UnknownContainerStatuses"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"

	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// waitingReason is why a container waits (the kubelet's reason cache):
// CrashLoopBackOff, ErrImagePull, ImagePullBackOff, RunContainerError...
type waitingReason struct {
	reason, message string
}

// probeView answers what the prober knows of a running container.
type probeView interface {
	// started: no startup probe, or it succeeded, for this container.
	started(c *v1.Container, containerID string) bool
	// ready: started, and no readiness probe or it succeeded.
	ready(c *v1.Container, containerID string) bool
}

// noProbes treats probes as never run.
type noProbes struct{}

func (noProbes) started(c *v1.Container, _ string) bool { return c.StartupProbe == nil }
func (noProbes) ready(c *v1.Container, _ string) bool {
	return c.StartupProbe == nil && c.ReadinessProbe == nil
}

// statusInput is everything a pod's status is computed from.
type statusInput struct {
	pod *v1.Pod
	// rs is the runtime's status of the pod (not nil).
	rs      *runtime.PodStatus
	reasons map[string]waitingReason
	probes  probeView
	// podIsTerminal: the pod is done (deleted and stopped, or finished);
	// its containers will not restart whatever the restart policy.
	podIsTerminal bool
	// deadlineExceeded: activeDeadlineSeconds passed (the pod fails).
	deadlineExceeded bool
	// evicted, when set, is the eviction manager's message: the pod fails
	// with reason Evicted and carries the DisruptionTarget condition.
	evicted string
	hostIP  string
	now     time.Time
	// startTime is when the agent first saw the pod.
	startTime time.Time
}

// generatePodStatus is the status the agent writes for the pod.
func generatePodStatus(in statusInput) v1.PodStatus {
	pod := in.pod
	old := pod.Status
	if in.probes == nil {
		in.probes = noProbes{}
	}
	s := v1.PodStatus{QOSClass: old.QOSClass}
	if s.QOSClass == "" {
		s.QOSClass = podQOS(pod)
	}
	for _, ip := range in.rs.IPs {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) == 0 {
		s.PodIPs = append(s.PodIPs, old.PodIPs...)
	}
	hasInit := len(pod.Spec.InitContainers) > 0
	s.ContainerStatuses = convertContainerStatuses(in, old.ContainerStatuses, pod.Spec.Containers, hasInit, false)
	s.InitContainerStatuses = convertContainerStatuses(in, old.InitContainerStatuses, pod.Spec.InitContainers, hasInit, true)
	applyProbes(in, &s)

	all := append(append([]v1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
	s.Phase = getPhase(pod, all, in.podIsTerminal, hasAnyRegularContainerStarted(pod, in.rs))
	if s.Phase != v1.PodFailed && s.Phase != v1.PodSucceeded && isTerminalPhase(old.Phase) {
		s.Phase = old.Phase
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
	}
	if in.deadlineExceeded {
		s.Phase, s.Reason, s.Message = v1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
	}
	if in.evicted != "" && !isTerminalPhase(old.Phase) {
		s.Phase, s.Reason, s.Message = v1.PodFailed, reasonEvicted, in.evicted
	}
	// Pods never leave a terminal phase.
	if isTerminalPhase(old.Phase) && s.Phase != old.Phase {
		s.Phase = old.Phase
	}

	// Conditions: those the kubelet does not own first, as they are.
	for _, c := range old.Conditions {
		if !conditionByKubelet(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	if c := findPodCondition(old.Conditions, v1.DisruptionTarget); c != nil {
		s.Conditions = replaceOrAppendCondition(s.Conditions, *c)
	}
	if in.evicted != "" {
		// The eviction manager's condition, as the kubelet's
		// UpdatePodCondition: the transition time stays while the status
		// does.
		dt := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: v1.PodReasonTerminationByKubelet, Message: in.evicted, LastTransitionTime: metav1.NewTime(in.now)}
		if c := findPodCondition(old.Conditions, v1.DisruptionTarget); c != nil && c.Status == dt.Status {
			dt.LastTransitionTime, dt.LastProbeTime = c.LastTransitionTime, c.LastProbeTime
		}
		s.Conditions = replaceOrAppendCondition(s.Conditions, dt)
	}
	readyToStart := v1.ConditionFalse
	if in.rs.SandboxReady {
		readyToStart = v1.ConditionTrue
	}
	allStatuses := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Conditions = append(s.Conditions,
		v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: readyToStart},
		podInitializedCondition(pod, allStatuses, s.Phase),
		podReadyCondition(pod, s.Conditions, allStatuses, s.Phase),
		containersReadyCondition(pod, allStatuses, s.Phase),
		v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	)

	if in.hostIP != "" {
		s.HostIP = in.hostIP
		s.HostIPs = []v1.HostIP{{IP: in.hostIP}}
		if pod.Spec.HostNetwork && len(s.PodIPs) == 0 {
			s.PodIPs = []v1.PodIP{{IP: in.hostIP}}
		}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}

	// The status manager: transition times change only with the status,
	// and the start time never changes.
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if !conditionByKubelet(c.Type) {
			continue
		}
		c.LastTransitionTime = metav1.NewTime(in.now)
		if oc := findPodCondition(old.Conditions, c.Type); oc != nil && oc.Status == c.Status {
			c.LastTransitionTime = oc.LastTransitionTime
		}
	}
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		s.StartTime = old.StartTime.DeepCopy()
	case !in.startTime.IsZero():
		s.StartTime = ptr.To(metav1.NewTime(in.startTime))
	default:
		s.StartTime = ptr.To(metav1.NewTime(in.now))
	}
	s.NominatedNodeName = old.NominatedNodeName
	s.ResourceClaimStatuses = old.ResourceClaimStatuses
	s.EphemeralContainerStatuses = old.EphemeralContainerStatuses
	normalizeStatus(&s)
	return s
}

// terminatePod is the status manager's TerminatePod: at the end of a pod's
// life, once the pod has initialized, every container that is not
// terminated is reported as lost (137); so are the init containers that
// tried to start; a pod still Pending or Running becomes Failed.
func terminatePod(pod *v1.Pod, s *v1.PodStatus) {
	lost := func(cs *v1.ContainerStatus) {
		cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Reason:   reasonStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: 137,
		}}
	}
	if hasPodInitialized(pod, s) {
		for i := range s.ContainerStatuses {
			if s.ContainerStatuses[i].State.Terminated == nil {
				lost(&s.ContainerStatuses[i])
			}
		}
	}
	// All but the trailing init containers that never left waiting (at
	// least the first one).
	n := 0
	for i := len(s.InitContainerStatuses) - 1; i >= 0; i-- {
		if cs := s.InitContainerStatuses[i]; cs.State.Waiting == nil || cs.LastTerminationState.Terminated != nil {
			n = i + 1
			break
		}
	}
	if n == 0 && len(s.InitContainerStatuses) > 0 {
		n = 1
	}
	for i := 0; i < n; i++ {
		if s.InitContainerStatuses[i].State.Terminated == nil {
			lost(&s.InitContainerStatuses[i])
		}
	}
	if !isTerminalPhase(s.Phase) {
		s.Phase = v1.PodFailed
	}
}

// hasPodInitialized: the pod has no init containers, or a regular
// container left waiting, or the last init container completed.
func hasPodInitialized(pod *v1.Pod, s *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, cs := range s.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			return true
		}
	}
	if l := len(s.InitContainerStatuses); l > 0 && l <= len(pod.Spec.InitContainers) {
		c, cs := &pod.Spec.InitContainers[l-1], s.InitContainerStatuses[l-1]
		if isRestartableInit(c) {
			return cs.State.Running != nil && cs.Started != nil && *cs.Started
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode == 0 {
			return true
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			return true
		}
	}
	return false
}

func isTerminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// conditionByKubelet: the conditions the kubelet owns.
func conditionByKubelet(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodReadyToStartContainers:
		return true
	}
	return false
}

func findPodCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func replaceOrAppendCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

func findRuntimeStatus(rs *runtime.PodStatus, name string) *runtime.ContainerStatus {
	for i := range rs.ContainerStatuses { // newest first
		if rs.ContainerStatuses[i].Name == name {
			return &rs.ContainerStatuses[i]
		}
	}
	return nil
}

// shouldContainerBeRestarted is the kubelet's ShouldContainerBeRestarted.
func shouldContainerBeRestarted(c *v1.Container, pod *v1.Pod, rs *runtime.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	st := findRuntimeStatus(rs, c.Name)
	if st == nil {
		return true
	}
	switch st.State {
	case runtime.ContainerStateRunning:
		return false
	case runtime.ContainerStateUnknown, runtime.ContainerStateCreated:
		return true
	}
	if isRestartableInit(c) {
		return true // sidecars restart whatever the pod's policy
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return st.ExitCode != 0
	}
	return true
}

// convertContainerStatuses is the kubelet's convertToAPIContainerStatuses.
func convertContainerStatuses(in statusInput, previous []v1.ContainerStatus, containers []v1.Container, hasInit, isInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	pod, rs := in.pod, in.rs
	oldStatuses := make(map[string]v1.ContainerStatus, len(previous))
	for _, st := range previous {
		oldStatuses[st.Name] = st
	}
	defaultWaiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonContainerCreating}}
	if hasInit {
		defaultWaiting = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonPodInitializing}}
	}
	statuses := make(map[string]*v1.ContainerStatus, len(containers))
	for _, c := range containers {
		st := &v1.ContainerStatus{Name: c.Name, Image: c.Image, State: *defaultWaiting.DeepCopy()}
		if old, ok := oldStatuses[c.Name]; ok {
			if old.State.Terminated != nil {
				st = old.DeepCopy()
			} else {
				st.RestartCount = old.RestartCount
				st.LastTerminationState = *old.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = st
	}

	// A container the runtime lost while the old status says it ran: it
	// terminated, with an unknown status.
	for _, c := range containers {
		if findRuntimeStatus(rs, c.Name) != nil {
			continue
		}
		old, ok := oldStatuses[c.Name]
		if !ok || old.State.Terminated != nil || old.State.Running == nil {
			continue
		}
		st := statuses[c.Name]
		isDefault := st.State.Waiting != nil && st.State.Waiting.Reason == defaultWaiting.Waiting.Reason
		if !isDefault || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
			Reason:   reasonStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: 137,
		}
		if pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}

	// The newest container of each name is its state, the one before its
	// last state.
	seen := map[string]int{}
	for i := range rs.ContainerStatuses {
		cs := &rs.ContainerStatuses[i]
		st, ok := statuses[cs.Name]
		if !ok || seen[cs.Name] >= 2 {
			continue
		}
		var oldPtr *v1.ContainerStatus
		if old, ok := oldStatuses[cs.Name]; ok {
			oldPtr = &old
		}
		conv := convertContainerStatus(cs, oldPtr)
		if seen[cs.Name] == 0 {
			statuses[cs.Name] = conv
		} else {
			st.LastTerminationState = conv.State
		}
		seen[cs.Name]++
	}

	// Containers about to be restarted wait, with the reason the last
	// attempt gave (CrashLoopBackOff...).
	for i := range containers {
		c := &containers[i]
		if isInit {
			if cs := findRuntimeStatus(rs, c.Name); cs != nil && cs.State == runtime.ContainerStateExited && cs.ExitCode == 0 {
				continue
			}
		}
		if !shouldContainerBeRestarted(c, pod, rs) {
			continue
		}
		reason, ok := in.reasons[c.Name]
		if !ok {
			continue
		}
		st := statuses[c.Name]
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason.reason, Message: reason.message}}
	}

	out := make([]v1.ContainerStatus, 0, len(containers))
	if isInit {
		for _, c := range containers { // spec order
			out = append(out, *statuses[c.Name])
		}
		return out
	}
	for _, st := range statuses {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// convertContainerStatus converts one runtime status.
func convertContainerStatus(cs *runtime.ContainerStatus, old *v1.ContainerStatus) *v1.ContainerStatus {
	st := &v1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.Attempt),
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  cs.ID,
	}
	switch {
	case cs.State == runtime.ContainerStateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
	case cs.State == runtime.ContainerStateCreated:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	case cs.State == runtime.ContainerStateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: cs.ID,
		}
	case cs.State == runtime.ContainerStateUnknown && old != nil && old.State.Running != nil:
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason:   reasonStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: 137,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// applyProbes is the prober manager's UpdatePodStatus: started and ready
// for every container.
func applyProbes(in statusInput, s *v1.PodStatus) {
	specOf := func(list []v1.Container, name string) *v1.Container {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
		return nil
	}
	for i := range s.ContainerStatuses {
		st := &s.ContainerStatuses[i]
		c := specOf(in.pod.Spec.Containers, st.Name)
		started := st.State.Running != nil && c != nil && in.probes.started(c, st.ContainerID)
		st.Started = ptr.To(started)
		st.Ready = started && in.probes.ready(c, st.ContainerID)
	}
	for i := range s.InitContainerStatuses {
		st := &s.InitContainerStatuses[i]
		c := specOf(in.pod.Spec.InitContainers, st.Name)
		started := st.State.Running != nil && c != nil && in.probes.started(c, st.ContainerID)
		st.Started = ptr.To(started)
		if c != nil && isRestartableInit(c) {
			st.Ready = started && in.probes.ready(c, st.ContainerID)
			continue
		}
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
	}
}

func isRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func getContainerStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, st := range statuses {
		if st.Name == name {
			return st, true
		}
	}
	return v1.ContainerStatus{}, false
}

// hasAnyRegularContainerStarted: a regular container of the pod runs or
// ran (the pod has been initialized).
func hasAnyRegularContainerStarted(pod *v1.Pod, rs *runtime.PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		if cs := findRuntimeStatus(rs, c.Name); cs != nil && (cs.State == runtime.ContainerStateRunning || cs.State == runtime.ContainerStateExited) {
			return true
		}
	}
	return false
}

// getPhase is the kubelet's getPhase (v1.32).
func getPhase(pod *v1.Pod, info []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := pod.Spec
	pendingRestartableInit, pendingRegularInit, failedInitialization := 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if isRestartableInit(c) {
			continue
		}
		st, ok := getContainerStatus(info, c.Name)
		if !ok {
			pendingRegularInit++
			continue
		}
		switch {
		case st.State.Running != nil:
			pendingRegularInit++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInitialization++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				if st.LastTerminationState.Terminated.ExitCode != 0 {
					failedInitialization++
				}
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !isRestartableInit(c) {
			continue
		}
		st, ok := getContainerStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case st.State.Running != nil:
			if st.Started == nil || !*st.Started {
				pendingRestartableInit++
			}
			running++
		case st.State.Terminated != nil:
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated == nil {
				pendingRestartableInit++
				waiting++
			}
		default:
			pendingRestartableInit++
			unknown++
		}
	}
	for _, c := range spec.Containers {
		st, ok := getContainerStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInitialization > 0 && spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingRegularInit > 0 || (pendingRestartableInit > 0 && !podHasInitialized):
		return v1.PodPending
	case waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	default:
		return v1.PodPending
	}
}

// containersReadyCondition is the kubelet's GenerateContainersReadyCondition.
func containersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	if statuses == nil {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reasonUnknownContainerStatuses}
	}
	var unknown, unready []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !isRestartableInit(c) {
			continue
		}
		if st, ok := getContainerStatus(statuses, c.Name); !ok {
			unknown = append(unknown, c.Name)
		} else if !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		if st, ok := getContainerStatus(statuses, c.Name); !ok {
			unknown = append(unknown, c.Name)
		} else if !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	if (phase == v1.PodSucceeded && len(unknown) == 0) || phase == v1.PodFailed {
		return terminalCondition(v1.ContainersReady, phase)
	}
	if msg := containersMessage(unknown, "unready", unready); msg != "" {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reasonContainersNotReady, Message: msg}
	}
	return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
}

// containersMessage is the kubelet's message for a condition that is not
// True: "containers with unknown status: [a], containers with <state>
// status: [b]", each part only when it names containers; "" when none do.
func containersMessage(unknown []string, state string, names []string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(names) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", state, names))
	}
	return strings.Join(msgs, ", ")
}

func terminalCondition(t v1.PodConditionType, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: t, Status: v1.ConditionFalse}
	if phase == v1.PodFailed {
		c.Reason = reasonPodFailed
	} else if phase == v1.PodSucceeded {
		c.Reason = reasonPodCompleted
	}
	return c
}

// podReadyCondition is the kubelet's GeneratePodReadyCondition: ready when
// the containers are and every readiness gate's condition is True.
func podReadyCondition(pod *v1.Pod, conditions []v1.PodCondition, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(pod, statuses, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, rg := range pod.Spec.ReadinessGates {
		c := findPodCondition(conditions, rg.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: reasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// podInitializedCondition is the kubelet's GeneratePodInitializedCondition.
func podInitializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	if statuses == nil && len(pod.Spec.InitContainers) > 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: reasonUnknownContainerStatuses}
	}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st, ok := getContainerStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		if isRestartableInit(c) {
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, c.Name)
			}
			continue
		}
		if !st.Ready {
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: reasonPodCompleted}
	}
	// A regular container that started means the pod was initialized.
	for _, c := range pod.Spec.Containers {
		if st, ok := getContainerStatus(statuses, c.Name); ok && (st.State.Running != nil || st.State.Terminated != nil) {
			return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
		}
	}
	if msg := containersMessage(unknown, "incomplete", incomplete); msg != "" {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: reasonContainersNotInitialized, Message: msg}
	}
	return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
}

// normalizeStatus truncates times to seconds, as the API stores them, so
// that a status compares equal to itself read back.
func normalizeStatus(s *v1.PodStatus) {
	norm := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			*t = t.Rfc3339Copy()
		}
	}
	if s.StartTime != nil {
		norm(s.StartTime)
	}
	for i := range s.Conditions {
		norm(&s.Conditions[i].LastProbeTime)
		norm(&s.Conditions[i].LastTransitionTime)
	}
	normStates := func(list []v1.ContainerStatus) {
		for i := range list {
			for _, st := range []*v1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if st.Running != nil {
					norm(&st.Running.StartedAt)
				}
				if st.Terminated != nil {
					norm(&st.Terminated.StartedAt)
					norm(&st.Terminated.FinishedAt)
				}
			}
		}
	}
	normStates(s.ContainerStatuses)
	normStates(s.InitContainerStatuses)
}

// podQOS is the QoS class of a pod (the server computes it at creation;
// this is for pods that lack it).
func podQOS(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := 0, 0
	guaranteed := true
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq && !req.IsZero() {
				requests++
			}
			if hasLim && !lim.IsZero() {
				limits++
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case requests == 0 && limits == 0:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}
