package pods

import (
	"github.com/corekube/corekube/registry/quantity"
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
	// The quantities of each resource, summed and compared at a bounded
	// cost (quantity.SumsEqual): Quantity.Add of "1e100000000" and "1"
	// computes 10^100000000.
	requests := map[v1.ResourceName][]resource.Quantity{}
	limits := map[v1.ResourceName][]resource.Quantity{}
	guaranteed := true
	all := make([]v1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	all = append(all, pod.Spec.Containers...)
	all = append(all, pod.Spec.InitContainers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if isQoSResource(name) && q.Sign() > 0 {
				requests[name] = append(requests[name], q)
			}
		}
		cpuLimit, memLimit := false, false
		for name, q := range c.Resources.Limits {
			if isQoSResource(name) && q.Sign() > 0 {
				limits[name] = append(limits[name], q)
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
			if lim, ok := limits[name]; !ok || !quantity.SumsEqual(lim, req) {
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
