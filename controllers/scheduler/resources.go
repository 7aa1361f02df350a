package scheduler

import (
	"github.com/corekube/corekube/controllers/scheduler/podresources"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Requests kube-scheduler assumes for scoring when a container names none
// (DefaultMilliCPURequest, DefaultMemoryRequest), so that pods without
// requests still spread.
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// nonZeroDefaults are those requests as PodRequests takes them.
var nonZeroDefaults = v1.ResourceList{
	v1.ResourceCPU:    *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI),
	v1.ResourceMemory: *resource.NewQuantity(defaultMemoryRequest, resource.BinarySI),
}

// resources is an amount of every resource the scheduler accounts for
// (cpu, memory, ephemeral storage, and as scalars extended resources,
// hugepages and attachable volumes).
type resources = podresources.Resources

// isScalarResourceName reports the resources kube-scheduler accounts as
// scalars: extended resources, hugepages and attachable volumes.
func isScalarResourceName(name v1.ResourceName) bool {
	return podresources.IsHugePages(name) || podresources.IsAttachableVolumes(name) || podresources.IsExtended(name)
}

// podRequests is kube's resource helper PodRequests (see
// podresources.PodRequests); nonZero fills in kube's scoring defaults for
// cpu and memory when a container names no request for them.
func podRequests(pod *v1.Pod, nonZero bool) resources {
	opts := podresources.Options{Scalar: isScalarResourceName}
	if nonZero {
		opts.NonMissingContainerRequests = nonZeroDefaults
	}
	return podresources.PodRequests(pod, opts)
}

// nodeAllocatable reads a node's allocatable resources and pod count.
func nodeAllocatable(node *v1.Node) (resources, int64) {
	var r podresources.Resources
	r.AddList(node.Status.Allocatable, isScalarResourceName)
	pods := node.Status.Allocatable[v1.ResourcePods]
	return r, pods.Value()
}
