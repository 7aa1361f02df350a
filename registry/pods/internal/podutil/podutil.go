// Package podutil walks a pod's containers for the pod strategy and its
// validation alike (kube's pkg/api/pod VisitContainers), so that both see
// init, regular and ephemeral containers the same way.
package podutil

import v1 "k8s.io/api/core/v1"

// EachContainer calls f with every init, regular and ephemeral container of
// spec, in that order, as kube's podutil.VisitContainers.
func EachContainer(spec *v1.PodSpec, f func(*v1.Container)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		f(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		f((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// AnyContainer reports whether f holds for a container of spec (nil: none).
func AnyContainer(spec *v1.PodSpec, f func(*v1.Container) bool) bool {
	if spec == nil {
		return false
	}
	found := false
	EachContainer(spec, func(c *v1.Container) {
		if !found && f(c) {
			found = true
		}
	})
	return found
}
