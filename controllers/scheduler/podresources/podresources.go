// Package podresources is pod resource arithmetic shared by the scheduler
// and the node agents' admission, as kube's component-helpers/resource:
// a resource vector and PodRequests.
//
// It lives under the scheduler because the scheduler owns resource
// accounting: the node agents' admission re-runs the scheduler's resource
// fit, as the kubelet's admission calls kube-scheduler's noderesources
// plugin. The agents are API clients like the controllers and already
// import controllers/ packages, never the reverse, so agent → scheduler's
// podresources keeps the one direction; the package imports nothing of the
// scheduler, so the agents do not pull the scheduler in.
//
// What counts besides cpu, memory and ephemeral storage differs between
// the callers (the scheduler also accounts attachable volumes; the agents
// leave out extended resources their node does not have), so the callers
// choose it: see Options.
package podresources

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources is an amount of every resource accounted for, in the
// scheduler's units (millicores, bytes, counts).
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// Scalar holds the other resources counted (hugepages, extended
	// resources, ...); nil when none, and never an entry of 0.
	Scalar map[v1.ResourceName]int64
}

// AddScalar adds v of a scalar resource.
func (r *Resources) AddScalar(name v1.ResourceName, v int64) {
	if v == 0 {
		return
	}
	if r.Scalar == nil {
		r.Scalar = map[v1.ResourceName]int64{}
	}
	r.Scalar[name] += v
	if r.Scalar[name] == 0 {
		delete(r.Scalar, name)
	}
}

// AddList adds a ResourceList: cpu, memory, ephemeral storage, and the
// other resources scalar reports (none when scalar is nil).
func (r *Resources) AddList(list v1.ResourceList, scalar func(v1.ResourceName) bool) {
	for name, q := range list {
		r.addQuantity(name, q, scalar)
	}
}

func (r *Resources) addQuantity(name v1.ResourceName, q resource.Quantity, scalar func(v1.ResourceName) bool) {
	switch name {
	case v1.ResourceCPU:
		r.MilliCPU += q.MilliValue()
	case v1.ResourceMemory:
		r.Memory += q.Value()
	case v1.ResourceEphemeralStorage:
		r.EphemeralStorage += q.Value()
	default:
		if scalar != nil && scalar(name) {
			r.AddScalar(name, q.Value())
		}
	}
}

// Add adds o to r.
func (r *Resources) Add(o Resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	for name, v := range o.Scalar {
		r.AddScalar(name, v)
	}
}

// Sub takes o from r.
func (r *Resources) Sub(o Resources) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	for name, v := range o.Scalar {
		r.AddScalar(name, -v)
	}
}

// SetMax raises every resource of r to at least o's.
func (r *Resources) SetMax(o Resources) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	for name, v := range o.Scalar {
		if v > r.Scalar[name] {
			r.AddScalar(name, v-r.Scalar[name])
		}
	}
}

// Clone is r with a Scalar map of its own.
func (r Resources) Clone() Resources {
	out := r
	out.Scalar = nil
	for name, v := range r.Scalar {
		out.AddScalar(name, v)
	}
	return out
}

// IsZero reports whether r holds nothing.
func (r Resources) IsZero() bool {
	return r.MilliCPU == 0 && r.Memory == 0 && r.EphemeralStorage == 0 && len(r.Scalar) == 0
}

// IsHugePages: hugepages-<size>, as v1helper.IsHugePageResourceName.
func IsHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// IsAttachableVolumes: attachable-volumes-<plugin>, as
// v1helper.IsAttachableVolumeResourceName.
func IsAttachableVolumes(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceAttachableVolumesPrefix)
}

// IsExtended: a resource outside the kubernetes.io namespace
// (example.com/gpu) that is not a requests.* quota name, as
// v1helper.IsExtendedResourceName.
func IsExtended(name v1.ResourceName) bool {
	s := string(name)
	native := !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix)
	return !native && !strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}

// Options is what PodRequests counts, as kube's PodResourcesOptions.
type Options struct {
	// Scalar picks the resources besides cpu, memory and ephemeral
	// storage that count, in containers' requests and the overhead alike;
	// nil: none.
	Scalar func(v1.ResourceName) bool
	// SkipContainerRequest leaves a resource out of the containers'
	// requests (not the overhead); nil: none.
	SkipContainerRequest func(v1.ResourceName) bool
	// NonMissingContainerRequests are amounts a container is taken to
	// request of a resource it names no request for (kube's scoring
	// defaults); nil: none.
	NonMissingContainerRequests v1.ResourceList
}

// containerRequests is what one container asks for.
func containerRequests(c *v1.Container, opts *Options) Resources {
	var r Resources
	if opts.SkipContainerRequest == nil {
		r.AddList(c.Resources.Requests, opts.Scalar)
	} else {
		for name, q := range c.Resources.Requests {
			if !opts.SkipContainerRequest(name) {
				r.addQuantity(name, q, opts.Scalar)
			}
		}
	}
	for name, q := range opts.NonMissingContainerRequests {
		if _, ok := c.Resources.Requests[name]; !ok {
			r.addQuantity(name, q, opts.Scalar)
		}
	}
	return r
}

// IsRestartableInit reports whether an init container is a sidecar
// (restartPolicy Always).
func IsRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// PodRequests is kube's resource helper PodRequests: the containers and
// sidecars (restartable init containers) run together and add up; each
// ordinary init container runs alone beside the sidecars started before
// it, and the pod needs at least the largest of those; overhead comes on
// top.
func PodRequests(pod *v1.Pod, opts Options) Resources {
	var sum Resources
	for i := range pod.Spec.Containers {
		sum.Add(containerRequests(&pod.Spec.Containers[i], &opts))
	}
	var sidecars, initMax Resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c, &opts)
		if IsRestartableInit(c) {
			sum.Add(req)
			sidecars.Add(req)
			req = sidecars.Clone()
		} else {
			req.Add(sidecars)
		}
		initMax.SetMax(req)
	}
	sum.SetMax(initMax)
	sum.AddList(pod.Spec.Overhead, opts.Scalar)
	return sum
}
