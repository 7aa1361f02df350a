package pods

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/registry/pods/internal/podutil"
)

// dropDisabledPodFields mirrors kube's podutil.DropDisabledPodFields for the
// fields of k8s.io/api v0.32 whose feature gates are off by default in
// kube-apiserver v1.32: they are silently cleared unless the stored object
// (old, nil on create) already uses them.
//
//   - spec.resources (PodLevelResources, alpha)
//   - containers[*].resizePolicy (InPlacePodVerticalScaling, alpha)
//   - spec.resourceClaims, containers[*].resources.claims
//     (DynamicResourceAllocation, beta but disabled by default)
//   - spec.hostUsers (UserNamespacesSupport, beta but disabled by default)
//   - securityContext.supplementalGroupsPolicy (SupplementalGroupsPolicy, alpha)
//   - securityContext.seLinuxChangePolicy (SELinuxChangePolicy, alpha)
func dropDisabledPodFields(pod, old *v1.Pod) {
	var oldSpec *v1.PodSpec
	if old != nil {
		oldSpec = &old.Spec
	}
	spec := &pod.Spec
	if spec.Resources != nil && (oldSpec == nil || oldSpec.Resources == nil) {
		spec.Resources = nil
	}
	if !podutil.AnyContainer(oldSpec, func(c *v1.Container) bool { return len(c.ResizePolicy) > 0 }) {
		podutil.EachContainer(spec, func(c *v1.Container) { c.ResizePolicy = nil })
	}
	draInUse := oldSpec != nil && (len(oldSpec.ResourceClaims) > 0 ||
		podutil.AnyContainer(oldSpec, func(c *v1.Container) bool { return len(c.Resources.Claims) > 0 }))
	if !draInUse {
		spec.ResourceClaims = nil
		podutil.EachContainer(spec, func(c *v1.Container) { c.Resources.Claims = nil })
	}
	if spec.HostUsers != nil && (oldSpec == nil || oldSpec.HostUsers == nil) {
		spec.HostUsers = nil
	}
	if sc := spec.SecurityContext; sc != nil {
		var oldSC *v1.PodSecurityContext
		if oldSpec != nil {
			oldSC = oldSpec.SecurityContext
		}
		if sc.SupplementalGroupsPolicy != nil && (oldSC == nil || oldSC.SupplementalGroupsPolicy == nil) {
			sc.SupplementalGroupsPolicy = nil
		}
		if sc.SELinuxChangePolicy != nil && (oldSC == nil || oldSC.SELinuxChangePolicy == nil) {
			sc.SELinuxChangePolicy = nil
		}
	}
	if old != nil {
		dropDisabledPodStatusFields(&pod.Status, &old.Status)
	}
}

// dropDisabledPodStatusFields clears the status fields of alpha/disabled
// features (status.resize, containerStatuses[*].allocatedResources,
// .resources, .user, .allocatedResourcesStatus, status.resourceClaimStatuses)
// unless the stored status already has them.
func dropDisabledPodStatusFields(st, old *v1.PodStatus) {
	if st.Resize != "" && old.Resize == "" {
		st.Resize = ""
	}
	if len(st.ResourceClaimStatuses) > 0 && len(old.ResourceClaimStatuses) == 0 {
		st.ResourceClaimStatuses = nil
	}
	inUse := func(f func(*v1.ContainerStatus) bool) bool {
		for _, l := range [][]v1.ContainerStatus{old.ContainerStatuses, old.InitContainerStatuses, old.EphemeralContainerStatuses} {
			for i := range l {
				if f(&l[i]) {
					return true
				}
			}
		}
		return false
	}
	resizeInUse := inUse(func(s *v1.ContainerStatus) bool { return s.AllocatedResources != nil || s.Resources != nil })
	userInUse := inUse(func(s *v1.ContainerStatus) bool { return s.User != nil })
	healthInUse := inUse(func(s *v1.ContainerStatus) bool { return s.AllocatedResourcesStatus != nil })
	for _, l := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range l {
			if !resizeInUse {
				l[i].AllocatedResources = nil
				l[i].Resources = nil
			}
			if !userInUse {
				l[i].User = nil
			}
			if !healthInUse {
				l[i].AllocatedResourcesStatus = nil
			}
		}
	}
}

// applyMatchLabelKeys is kube's mutatePodAffinity (MatchLabelKeysInPodAffinity
// is on by default in v1.32): matchLabelKeys / mismatchLabelKeys of pod
// (anti-)affinity terms are merged into the term's label selector as In /
// NotIn requirements with the pod's own label values.
func applyMatchLabelKeys(pod *v1.Pod) {
	a := pod.Spec.Affinity
	if a == nil {
		return
	}
	apply := func(t *v1.PodAffinityTerm) {
		if (len(t.MatchLabelKeys) == 0 && len(t.MismatchLabelKeys) == 0) || t.LabelSelector == nil {
			return
		}
		add := func(keys []string, op metav1.LabelSelectorOperator) {
			for _, k := range keys {
				if v, ok := pod.Labels[k]; ok {
					t.LabelSelector.MatchExpressions = append(t.LabelSelector.MatchExpressions,
						metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
				}
			}
		}
		add(t.MatchLabelKeys, metav1.LabelSelectorOpIn)
		add(t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn)
	}
	if pa := a.PodAffinity; pa != nil {
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			apply(&pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			apply(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			apply(&pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
		}
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			apply(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
}
