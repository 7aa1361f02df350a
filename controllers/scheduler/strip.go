package scheduler

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/controllers/internal/intern"
)

// transformPod is the pod informer's transform: a pod bound to a node
// becomes the scheduler's assignedPod (what its plugins and preemption
// read of a placed pod, the cache's own entry too), a pod waiting for one
// is stripped (stripPod). It is idempotent, as client-go wants.
func transformPod(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return stripPod(obj)
	}
	return newAssignedPod(pod), nil
}

// stripPod keeps, of a pod the informer stores, only what the scheduler
// reads, so 30,000 pods stay small in memory. A new pod is built, so that
// nothing else the decoder allocated stays reachable, and the parts pods
// of one template have in common (labels, node selector, tolerations, the
// stripped containers, the controller reference) are shared between pods
// (package intern): the informer's objects are read-only.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         intern.String(pod.Namespace),
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            intern.Labels(pod.Labels),
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: v1.PodSpec{
			NodeName:         intern.String(pod.Spec.NodeName),
			SchedulerName:    intern.String(pod.Spec.SchedulerName),
			NodeSelector:     intern.Labels(pod.Spec.NodeSelector),
			Tolerations:      intern.Tolerations(pod.Spec.Tolerations),
			Priority:         pod.Spec.Priority,
			PreemptionPolicy: pod.Spec.PreemptionPolicy,
			SchedulingGates:  pod.Spec.SchedulingGates,
			Overhead:         intern.ResourceList(pod.Spec.Overhead),
			Containers:       stripContainers(pod.Spec.Containers),
			InitContainers:   stripContainers(pod.Spec.InitContainers),
		},
		Status: v1.PodStatus{
			Phase:             pod.Status.Phase,
			NominatedNodeName: pod.Status.NominatedNodeName,
			// preemption spares the pods that started first
			StartTime: pod.Status.StartTime,
		},
	}
	if a := pod.Spec.Affinity; a != nil && (a.NodeAffinity != nil || a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		out.Spec.Affinity = &v1.Affinity{NodeAffinity: a.NodeAffinity, PodAffinity: a.PodAffinity, PodAntiAffinity: a.PodAntiAffinity}
	}
	out.Spec.TopologySpreadConstraints = pod.Spec.TopologySpreadConstraints
	// Only the controller reference: the default spreading reads it.
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		out.OwnerReferences = intern.OwnerReferences([]metav1.OwnerReference{*ref})
	}
	// DisruptionTarget tells a pod terminating because it was preempted;
	// PodScheduled is read only for the scheduler's own status writes on
	// a pod it has not placed, so a bound pod does not keep it.
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget || (c.Type == v1.PodScheduled && pod.Spec.NodeName == "") {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out, nil
}

// containerTable shares stripped container lists: the containers of the
// pods of one template strip to the same list.
var containerTable = intern.NewTable[[]v1.Container](intern.DefaultBound)

func stripContainers(cs []v1.Container) []v1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]v1.Container, len(cs))
	var key strings.Builder
	for i := range cs {
		out[i] = v1.Container{
			Name:          cs[i].Name,
			Resources:     v1.ResourceRequirements{Requests: intern.ResourceList(cs[i].Resources.Requests)},
			RestartPolicy: cs[i].RestartPolicy,
		}
		intern.Field(&key, cs[i].Name)
		if rp := cs[i].RestartPolicy; rp != nil {
			intern.Field(&key, string(*rp))
		} else {
			key.WriteByte('-')
		}
		intern.Field(&key, intern.ResourceListKey(out[i].Resources.Requests))
		for _, p := range cs[i].Ports {
			if p.HostPort > 0 {
				out[i].Ports = append(out[i].Ports, p)
				intern.Field(&key, p.Name)
				intern.Field(&key, p.HostIP)
				intern.Field(&key, string(p.Protocol))
				intern.Field(&key, strconv.Itoa(int(p.HostPort)))
				intern.Field(&key, strconv.Itoa(int(p.ContainerPort)))
			}
		}
		key.WriteByte(';')
	}
	return containerTable.Share(key.String(), out)
}

// stripNamespace keeps a namespace's name and labels.
func stripNamespace(obj any) (any, error) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return obj, nil
	}
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels}}, nil
}

// stripNode keeps what the scheduler reads of a node: its labels, taints
// and unschedulable flag, its allocatable resources (shared between the
// nodes that have the same) and its Ready condition. The images, the
// other conditions, addresses, system info and annotations (several KB
// per node, rewritten by every status update) are dropped.
func stripNode(obj any) (any, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	out := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.Name,
			UID:             node.UID,
			ResourceVersion: node.ResourceVersion,
			Labels:          node.Labels,
		},
		Spec: v1.NodeSpec{
			Unschedulable: node.Spec.Unschedulable,
			Taints:        node.Spec.Taints,
		},
		Status: v1.NodeStatus{Allocatable: intern.ResourceList(node.Status.Allocatable)},
	}
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			out.Status.Conditions = []v1.NodeCondition{c}
			break
		}
	}
	return out, nil
}
