package pods

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// nodeLostReason is the status reason the node lifecycle controller sets on
// pods of an unreachable node (kube's NodeUnreachablePodReason).
const nodeLostReason = "NodeLost"

var (
	podSucceededConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(v1.PodSucceeded), Message: "The pod has completed successfully."}}
	podFailedConditions    = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(v1.PodFailed), Message: "The pod failed."}}
)

// TableColumns are kube's pod columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Ready", "The aggregate readiness state of this pod for accepting traffic."),
		registry.StringColumn("Status", "The aggregate status of the containers in this pod."),
		registry.StringColumn("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
		registry.AgeColumn(),
		registry.WideColumn("IP", v1.PodStatus{}.SwaggerDoc()["podIP"]),
		registry.WideColumn("Node", v1.PodSpec{}.SwaggerDoc()["nodeName"]),
		registry.WideColumn("Nominated Node", v1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
		registry.WideColumn("Readiness Gates", v1.PodSpec{}.SwaggerDoc()["readinessGates"]),
	}
}

// TableRow prints a pod as kube's printPod does.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a Pod, got %T", obj)
	}
	var row metav1.TableRow
	switch pod.Status.Phase {
	case v1.PodSucceeded:
		row.Conditions = podSucceededConditions
	case v1.PodFailed:
		row.Conditions = podFailedConditions
	}
	s := summarize(pod, now)
	row.Cells = []any{pod.Name, s.ready, s.status, s.restarts, registry.TableAge(pod.CreationTimestamp, now),
		orNone(podIP(pod)), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), readinessGates(pod)}
	return row, nil
}

// podSummary is what the READY, STATUS and RESTARTS columns show.
type podSummary struct {
	ready, status, restarts string
}

// summarize computes READY, STATUS and RESTARTS as kube v1.32's printPod:
// the phase or status reason, overridden by SchedulingGated, by the first
// unfinished init container (Init:N/M, Init:<reason>, Init:ExitCode:N), by
// the last container with a waiting or terminated reason (CrashLoopBackOff,
// Completed, Error, ...), back to Running/NotReady while a container runs,
// and by Terminating (or Unknown for a lost node) while the pod is being
// deleted. Restartable init containers (sidecars) count as containers.
func summarize(pod *v1.Pod, now time.Time) podSummary {
	restarts, sidecarRestarts := 0, 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastSidecarRestart time.Time

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonSchedulingGated {
			reason = v1.PodReasonSchedulingGated
		}
	}

	initContainers := make(map[string]*v1.Container, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		initContainers[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if isSidecar(&pod.Spec.InitContainers[i]) {
			total++
		}
	}

	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		restarts += int(cs.RestartCount)
		lastRestart = later(lastRestart, cs.LastTerminationState)
		sidecar := isSidecar(initContainers[cs.Name])
		if sidecar {
			sidecarRestarts += int(cs.RestartCount)
			lastSidecarRestart = later(lastSidecarRestart, cs.LastTerminationState)
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case sidecar && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			switch {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || conditionTrue(pod, v1.PodInitialized) {
		restarts = sidecarRestarts
		lastRestart = lastSidecarRestart
		running := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			restarts += int(cs.RestartCount)
			lastRestart = later(lastRestart, cs.LastTerminationState)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", cs.State.Terminated.Signal)
			case cs.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				running = true
				ready++
			}
		}
		// A pod with a container still running is not Completed.
		if reason == "Completed" && running {
			if hasReadyCondition(pod) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case pod.Status.Reason == nodeLostReason:
			reason = "Unknown"
		case pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed:
			reason = "Terminating"
		}
	}

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, registry.TableAge(metav1.NewTime(lastRestart), now))
	}
	return podSummary{ready: fmt.Sprintf("%d/%d", ready, total), status: reason, restarts: restartsCell}
}

// later returns the later of t and the finish time of a container's last
// termination.
func later(t time.Time, last v1.ContainerState) time.Time {
	if last.Terminated != nil && t.Before(last.Terminated.FinishedAt.Time) {
		return last.Terminated.FinishedAt.Time
	}
	return t
}

// isSidecar reports whether an init container is restartable (a sidecar).
func isSidecar(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// conditionTrue reports whether the pod's first condition of type t is
// True.
func conditionTrue(pod *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// hasReadyCondition reports whether any Ready condition is True.
func hasReadyCondition(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

func podIP(pod *v1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return ""
}

// readinessGates is "<none>" or true gates / all gates.
func readinessGates(pod *v1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	n := 0
	for _, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType {
				if c.Status == v1.ConditionTrue {
					n++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", n, len(pod.Spec.ReadinessGates))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
