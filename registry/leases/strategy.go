// Package leases is the registry strategy of coordination.k8s.io/v1 Leases
// as kube-apiserver v1.32 has it (pkg/registry/coordination/lease and
// ValidateLease/ValidateLeaseSpec in pkg/apis/coordination/validation).
//
// The CoordinatedLeaderElection feature is alpha (off) in v1.32, so
// spec.strategy and spec.preferredHolder are dropped unless an update finds
// them already stored.
package leases

import (
	"context"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Strategy is the strategy of the leases resource.
type Strategy struct{ registry.Base }

var _ registry.Strategy = (*Strategy)(nil)

// NewStrategy returns the leases strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes leases as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group:      "coordination.k8s.io",
			Version:    "v1",
			Resource:   "leases",
			Singular:   "lease",
			Kind:       "Lease",
			ListKind:   "LeaseList",
			Namespaced: true,
		},
		NewObject:     func() runtime.Object { return &coordinationv1.Lease{} },
		NewListObject: func() runtime.Object { return &coordinationv1.LeaseList{} },
		// AllowCreateOnUpdate is true, as in kube: PUT creates a missing lease.
		CreateOnUpdate: true,
	}}
}

// PrepareForCreate drops the fields of the disabled CoordinatedLeaderElection
// feature.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	lease := obj.(*coordinationv1.Lease)
	lease.Spec.Strategy = nil
	lease.Spec.PreferredHolder = nil
}

// PrepareForUpdate drops the CoordinatedLeaderElection fields unless the
// stored lease already has them.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	lease, oldLease := obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease)
	if oldLease.Spec.Strategy == nil {
		lease.Spec.Strategy = nil
	}
	if oldLease.Spec.PreferredHolder == nil {
		lease.Spec.PreferredHolder = nil
	}
}

// Validate validates a new lease's spec.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

// ValidateUpdate validates the new lease's spec; nothing is immutable.
func (*Strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

var validStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// validateSpec is kube's ValidateLeaseSpec. holderIdentity, acquireTime and
// renewTime are free.
func validateSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseDurationSeconds"), spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseTransitions"), spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if s := spec.Strategy; s != nil {
		// kube reports these at spec.strategy.strategy.
		path := fldPath.Child("strategy", "strategy")
		if !strings.Contains(string(*s), "/") {
			if !slices.Contains(validStrategies, *s) {
				allErrs = append(allErrs, field.NotSupported(path, *s, validStrategies))
			}
		} else {
			for _, msg := range validation.IsQualifiedName(string(*s)) {
				allErrs = append(allErrs, field.Invalid(path, *s, msg))
			}
		}
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return allErrs
}
