package scheduler

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripPod keeps, of a pod the informer stores, only what the scheduler
// reads, so 30,000 pods stay small in memory.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: v1.PodSpec{
			NodeName:         pod.Spec.NodeName,
			SchedulerName:    pod.Spec.SchedulerName,
			NodeSelector:     pod.Spec.NodeSelector,
			Tolerations:      pod.Spec.Tolerations,
			Priority:         pod.Spec.Priority,
			PreemptionPolicy: pod.Spec.PreemptionPolicy,
			SchedulingGates:  pod.Spec.SchedulingGates,
			Overhead:         pod.Spec.Overhead,
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
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	// PodScheduled for the scheduler's own status writes; DisruptionTarget
	// tells a pod terminating because it was preempted.
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled || c.Type == v1.DisruptionTarget {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out, nil
}

func stripContainers(cs []v1.Container) []v1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]v1.Container, len(cs))
	for i := range cs {
		out[i] = v1.Container{
			Name:          cs[i].Name,
			Resources:     v1.ResourceRequirements{Requests: cs[i].Resources.Requests},
			RestartPolicy: cs[i].RestartPolicy,
		}
		for _, p := range cs[i].Ports {
			if p.HostPort > 0 {
				out[i].Ports = append(out[i].Ports, p)
			}
		}
	}
	return out
}

// stripNamespace keeps a namespace's name and labels.
func stripNamespace(obj any) (any, error) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return obj, nil
	}
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels}}, nil
}

// stripNode drops the parts of a node the scheduler never reads.
func stripNode(obj any) (any, error) {
	if node, ok := obj.(*v1.Node); ok {
		node.ManagedFields = nil
		node.Status.Images = nil
	}
	return obj, nil
}
