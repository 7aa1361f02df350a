package pods

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSClass computes the QoS class of pod from its container resources, as
// kube's qos.ComputePodQOS does (ephemeral containers are ignored; only cpu
// and memory count):
//
//   - BestEffort: no container (regular or init) requests or limits any
//     positive cpu or memory;
//   - Guaranteed: every container has positive cpu and memory limits and the
//     summed requests equal the summed limits for every resource;
//   - Burstable: anything else.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
	add := func(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		sum := q.DeepCopy()
		if prev, ok := l[name]; ok {
			sum.Add(prev)
		}
		l[name] = sum
	}
	all := make([]v1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	all = append(all, pod.Spec.Containers...)
	all = append(all, pod.Spec.InitContainers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if isQoSResource(name) && q.Sign() > 0 {
				add(requests, name, q)
			}
		}
		cpuLimit, memLimit := false, false
		for name, q := range c.Resources.Limits {
			if isQoSResource(name) && q.Sign() > 0 {
				add(limits, name, q)
				cpuLimit = cpuLimit || name == v1.ResourceCPU
				memLimit = memLimit || name == v1.ResourceMemory
			}
		}
		if !cpuLimit || !memLimit {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

func isQoSResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory
}

// podQOS is kube's qos.GetPodQOS: the persisted status.qosClass when set,
// else the computed class.
func podQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return QOSClass(pod)
}
