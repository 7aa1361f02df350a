package pods

import (
	"context"
	"fmt"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods/validation"
)

// Strategy is the registry strategy of the pods resource.
type Strategy struct{ registry.Base }

// StatusStrategy is the update strategy of pods/status.
type StatusStrategy struct{}

var (
	_ registry.Strategy               = (*Strategy)(nil)
	_ registry.GracefulDeleteStrategy = (*Strategy)(nil)
	_ registry.StatusStrategy         = (*StatusStrategy)(nil)
)

// NewStrategy returns the pods strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes the pods resource.
		Resource: registry.ResourceInfo{
			Group:                "",
			Version:              "v1",
			Resource:             "pods",
			Singular:             "pod",
			Kind:                 "Pod",
			ListKind:             "PodList",
			Namespaced:           true,
			ShortNames:           []string{"po"},
			Categories:           []string{"all"},
			CustomFieldSelectors: true,
		},
		NewObject:     func() runtime.Object { return &v1.Pod{} },
		NewListObject: func() runtime.Object { return &v1.PodList{} },
		// AllowCreateOnUpdate is false for pods.
	}}
}

// NewStatusStrategy returns the pods/status strategy.
func NewStatusStrategy() *StatusStrategy { return &StatusStrategy{} }

// Default applies kube's scheme defaults for pods (Default), which the
// Store applies before admission as kube does on decoding.
func (*Strategy) Default(obj runtime.Object) { Default(obj.(*v1.Pod)) }

// PrepareForCreate defaults the pod, applies the Priority admission defaults
// (priority 0, preemptionPolicy PreemptLowerPriority) and resets the status
// to phase Pending with the QoS class.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	pod := obj.(*v1.Pod)
	Default(pod)
	// The Priority admission plugin (admission/priority.go) has set
	// both already; these are its no-default-class answer, kept for a
	// server whose Priority plugin is disabled (kube would leave them
	// unset there; the scheduler and the agents read them as 0).
	if pod.Spec.Priority == nil {
		p := int32(0)
		pod.Spec.Priority = &p
	}
	if pod.Spec.PreemptionPolicy == nil {
		pp := v1.PreemptLowerPriority
		pod.Spec.PreemptionPolicy = &pp
	}
	// Like kube, the QoS class is qos.GetPodQOS of the incoming object: a
	// client-supplied status.qosClass is kept, else it is computed.
	pod.Status = v1.PodStatus{
		Phase:    v1.PodPending,
		QOSClass: podQOS(pod),
	}
	dropDisabledPodFields(pod, nil)
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{
			Type:    v1.PodScheduled,
			Status:  v1.ConditionFalse,
			Reason:  v1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		})
	}
	applyMatchLabelKeys(pod)
}

// Validate validates a new pod (everything but ObjectMeta syntax).
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidatePod(obj.(*v1.Pod))
}

// PrepareForUpdate keeps the stored status, defaults the new object and
// preserves priority/preemptionPolicy when the client omitted them (what
// the Priority admission plugin does on update).
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	pod, oldPod := obj.(*v1.Pod), old.(*v1.Pod)
	Default(pod)
	pod.Status = oldPod.Status
	if pod.Spec.Priority == nil && oldPod.Spec.Priority != nil {
		p := *oldPod.Spec.Priority
		pod.Spec.Priority = &p
	}
	if pod.Spec.PreemptionPolicy == nil && oldPod.Spec.PreemptionPolicy != nil {
		pp := *oldPod.Spec.PreemptionPolicy
		pod.Spec.PreemptionPolicy = &pp
	}
	dropDisabledPodFields(pod, oldPod)
}

// ValidateUpdate validates pod as a replacement of old.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidatePodUpdate(obj.(*v1.Pod), old.(*v1.Pod))
}

// GetAttrs returns the pod's labels and selectable fields.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a pod")
	}
	return labels.Set(pod.Labels), ToSelectableFields(pod), nil
}

// ToSelectableFields returns the field set kube's pod field selectors match
// on. Its key set is the set of field labels kube accepts for pods:
// "status.podIPs" is accepted by kube but never populated (it always
// compares as ""), and "spec.host" is kube's legacy alias of spec.nodeName.
func ToSelectableFields(pod *v1.Pod) fields.Set {
	podIP := pod.Status.PodIP
	if podIP == "" && len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"metadata.name":            pod.Name,
		"metadata.namespace":       pod.Namespace,
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.host":                pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.podIPs":            "",
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// CheckGracefulDelete decides the grace period of a pod deletion exactly as
// kube: the period from the options, else the pod's
// terminationGracePeriodSeconds (0 when unset); 0 for pods not bound to a
// node and for pods that already terminated (Succeeded/Failed); a negative
// period becomes 1. It always returns true (when options is non-nil) and
// stores the period in options.GracePeriodSeconds.
func (*Strategy) CheckGracefulDelete(_ context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*v1.Pod)
	period := int64(0)
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" {
		period = 0
	}
	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}

// PrepareForUpdate keeps the stored spec (and, as kube's pod status
// strategy, the stored ownerReferences and deletionTimestamp), backfills
// status.qosClass when the client omitted it and normalises podIP/podIPs.
func (*StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	pod, oldPod := obj.(*v1.Pod), old.(*v1.Pod)
	pod.Spec = *oldPod.Spec.DeepCopy()
	pod.DeletionTimestamp = oldPod.DeletionTimestamp.DeepCopy()
	pod.OwnerReferences = nil
	if oldPod.OwnerReferences != nil {
		pod.OwnerReferences = append([]metav1.OwnerReference{}, oldPod.OwnerReferences...)
	}
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = oldPod.Status.QOSClass
	}
	normalizePodIPs(&pod.Status)
	dropDisabledPodStatusFields(&pod.Status, &oldPod.Status)
}

// ValidateUpdate validates a status update.
func (*StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidatePodStatusUpdate(obj.(*v1.Pod), old.(*v1.Pod))
}

// GetResetFields: an update of the pod never changes its status, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "status")
}

// GetResetFields: a status update never changes the spec, the deletion timestamp or the owners, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "spec", "metadata.deletionTimestamp", "metadata.ownerReferences")
}
