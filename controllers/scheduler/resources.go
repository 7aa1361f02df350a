package scheduler

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Requests kube-scheduler assumes for scoring when a container names none
// (DefaultMilliCPURequest, DefaultMemoryRequest), so that pods without
// requests still spread.
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// resources is an amount of every resource the scheduler accounts for.
type resources struct {
	milliCPU  int64
	memory    int64
	ephemeral int64
	// scalar holds extended resources and hugepages; nil when none.
	scalar map[v1.ResourceName]int64
}

func (r *resources) addScalar(name v1.ResourceName, v int64) {
	if v == 0 {
		return
	}
	if r.scalar == nil {
		r.scalar = map[v1.ResourceName]int64{}
	}
	r.scalar[name] += v
	if r.scalar[name] == 0 {
		delete(r.scalar, name)
	}
}

// addList adds a ResourceList.
func (r *resources) addList(list v1.ResourceList) {
	for name, q := range list {
		switch name {
		case v1.ResourceCPU:
			r.milliCPU += q.MilliValue()
		case v1.ResourceMemory:
			r.memory += q.Value()
		case v1.ResourceEphemeralStorage:
			r.ephemeral += q.Value()
		default:
			if isScalarResourceName(name) {
				r.addScalar(name, q.Value())
			}
		}
	}
}

func (r *resources) add(o resources) {
	r.milliCPU += o.milliCPU
	r.memory += o.memory
	r.ephemeral += o.ephemeral
	for name, v := range o.scalar {
		r.addScalar(name, v)
	}
}

func (r *resources) sub(o resources) {
	r.milliCPU -= o.milliCPU
	r.memory -= o.memory
	r.ephemeral -= o.ephemeral
	for name, v := range o.scalar {
		r.addScalar(name, -v)
	}
}

// setMax raises every resource of r to at least o's.
func (r *resources) setMax(o resources) {
	r.milliCPU = max(r.milliCPU, o.milliCPU)
	r.memory = max(r.memory, o.memory)
	r.ephemeral = max(r.ephemeral, o.ephemeral)
	for name, v := range o.scalar {
		if v > r.scalar[name] {
			r.addScalar(name, v-r.scalar[name])
		}
	}
}

func (r resources) clone() resources {
	out := r
	out.scalar = nil
	for name, v := range r.scalar {
		out.addScalar(name, v)
	}
	return out
}

func (r resources) isZero() bool {
	return r.milliCPU == 0 && r.memory == 0 && r.ephemeral == 0 && len(r.scalar) == 0
}

// containerRequests is what one container asks for; nonZero fills in
// kube's scoring defaults for cpu and memory when the container names no
// request for them.
func containerRequests(c *v1.Container, nonZero bool) resources {
	var r resources
	r.addList(c.Resources.Requests)
	if nonZero {
		if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok {
			r.milliCPU += defaultMilliCPURequest
		}
		if _, ok := c.Resources.Requests[v1.ResourceMemory]; !ok {
			r.memory += defaultMemoryRequest
		}
	}
	return r
}

// podRequests is kube's resource helper PodRequests: the containers and
// sidecars (restartable init containers) run together and add up; each
// ordinary init container runs alone beside the sidecars started before
// it, and the pod needs at least the largest of those; overhead comes on
// top.
func podRequests(pod *v1.Pod, nonZero bool) resources {
	var sum resources
	for i := range pod.Spec.Containers {
		sum.add(containerRequests(&pod.Spec.Containers[i], nonZero))
	}
	var sidecars, initMax resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c, nonZero)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum.add(req)
			sidecars.add(req)
			req = sidecars.clone()
		} else {
			req.add(sidecars)
		}
		initMax.setMax(req)
	}
	sum.setMax(initMax)
	if pod.Spec.Overhead != nil {
		sum.addList(pod.Spec.Overhead)
	}
	return sum
}

// isScalarResourceName reports the resources kube-scheduler accounts as
// scalars: extended resources, hugepages and attachable volumes.
func isScalarResourceName(name v1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, v1.ResourceHugePagesPrefix) || strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix) {
		return true
	}
	native := !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix)
	return !native && !strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}

// nodeAllocatable reads a node's allocatable resources and pod count.
func nodeAllocatable(node *v1.Node) (resources, int64) {
	var r resources
	r.addList(node.Status.Allocatable)
	pods := node.Status.Allocatable[v1.ResourcePods]
	return r, pods.Value()
}
