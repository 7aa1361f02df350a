// Package namespaces is the registry strategy of core/v1 Namespaces as
// kube-apiserver v1.32 has it (pkg/registry/core/namespace, ValidateNamespace*
// in pkg/apis/core/validation, SetDefaults_Namespace/NamespaceStatus): new
// namespaces are Active with the "kubernetes" finalizer, every namespace
// carries the label kubernetes.io/metadata.name=<name>, and spec.finalizers
// only change through /finalize (FinalizeStrategy).
package namespaces

import (
	"context"
	"fmt"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Strategy is the strategy of the namespaces resource.
type Strategy struct{ registry.Base }

// StatusStrategy is the strategy of namespaces/status: it keeps the old spec.
type StatusStrategy struct{}

// FinalizeStrategy is the strategy of namespaces/finalize: only
// spec.finalizers may change (the status is kept).
type FinalizeStrategy struct{}

var (
	_ registry.Strategy       = (*Strategy)(nil)
	_ registry.StatusStrategy = (*StatusStrategy)(nil)
	_ registry.StatusStrategy = (*FinalizeStrategy)(nil)
)

// NewStrategy returns the namespaces strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes namespaces as kube's discovery does.
		Resource: registry.ResourceInfo{
			Version:              "v1",
			Resource:             "namespaces",
			Singular:             "namespace",
			Kind:                 "Namespace",
			ListKind:             "NamespaceList",
			ShortNames:           []string{"ns"},
			CustomFieldSelectors: true,
			// kube serves no deletecollection for namespaces.
			Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		},
		NewObject:     func() runtime.Object { return &v1.Namespace{} },
		NewListObject: func() runtime.Object { return &v1.NamespaceList{} },
		// AllowCreateOnUpdate is false for namespaces.
	}}
}

// NewStatusStrategy returns the namespaces/status strategy.
func NewStatusStrategy() *StatusStrategy { return &StatusStrategy{} }

// NewFinalizeStrategy returns the namespaces/finalize strategy.
func NewFinalizeStrategy() *FinalizeStrategy { return &FinalizeStrategy{} }

// Default sets the metadata.name label, as kube's defaulting does when it
// decodes a request: before the field manager runs, so that the writer of
// a create owns the label in managedFields as on kube.
func (*Strategy) Default(obj runtime.Object) { SetNameLabel(obj.(*v1.Namespace)) }

// PrepareForCreate sets status.phase Active, appends the "kubernetes"
// finalizer when missing and sets the metadata.name label.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	ns := obj.(*v1.Namespace)
	ns.Status = v1.NamespaceStatus{Phase: v1.NamespaceActive}
	if !slices.Contains(ns.Spec.Finalizers, v1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, v1.FinalizerKubernetes)
	}
	SetNameLabel(ns)
}

// PrepareForUpdate keeps the old status and spec.finalizers and sets the
// metadata.name label.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	ns, oldNS := obj.(*v1.Namespace), old.(*v1.Namespace)
	ns.Spec.Finalizers = oldNS.Spec.Finalizers
	ns.Status = oldNS.Status
	SetNameLabel(ns)
}

// Validate validates spec.finalizers (errors at spec.finalizers, unindexed,
// as kube reports them).
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	var allErrs field.ErrorList
	for _, f := range obj.(*v1.Namespace).Spec.Finalizers {
		allErrs = append(allErrs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return allErrs
}

// ValidateUpdate validates an update of the main resource.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// GetAttrs returns the namespace's labels and its selectable fields:
// metadata.name and status.phase.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return nil, nil, fmt.Errorf("not a namespace")
	}
	return labels.Set(ns.Labels), fields.Set{
		"metadata.name": ns.Name,
		"status.phase":  string(ns.Status.Phase),
	}, nil
}

// Canonicalize sets the metadata.name label. kube also does this after
// validation for namespaces created with generateName, whose name is not
// known yet when PrepareForCreate runs; a Store that generates names after
// PrepareForCreate should call it.
func (*Strategy) Canonicalize(obj runtime.Object) { SetNameLabel(obj.(*v1.Namespace)) }

// PrepareForUpdate keeps the old spec and defaults an empty phase to Active.
func (*StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	ns := obj.(*v1.Namespace)
	ns.Spec = old.(*v1.Namespace).Spec
	if ns.Status.Phase == "" {
		ns.Status.Phase = v1.NamespaceActive
	}
	SetNameLabel(ns)
}

// ValidateUpdate checks that the phase agrees with metadata.deletionTimestamp
// (path status.Phase, capitalised as in kube).
func (*StatusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	ns := obj.(*v1.Namespace)
	path := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != v1.NamespaceActive {
			return field.ErrorList{field.Invalid(path, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
		}
	} else if ns.Status.Phase != v1.NamespaceTerminating {
		return field.ErrorList{field.Invalid(path, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}

// PrepareForUpdate keeps the old status: only spec.finalizers may change.
func (*FinalizeStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	ns := obj.(*v1.Namespace)
	ns.Status = old.(*v1.Namespace).Status
	SetNameLabel(ns)
}

// ValidateUpdate validates the new spec.finalizers (indexed paths).
func (*FinalizeStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	var allErrs field.ErrorList
	path := field.NewPath("spec", "finalizers")
	for i, f := range obj.(*v1.Namespace).Spec.Finalizers {
		allErrs = append(allErrs, validateFinalizerName(string(f), path.Index(i))...)
	}
	return allErrs
}

// SetNameLabel sets the label kubernetes.io/metadata.name to the namespace's
// name, as kube's defaulting does for every named namespace.
func SetNameLabel(ns *v1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[v1.LabelMetadataName] = ns.Name
}

// validateFinalizerName requires a qualified name that, unless
// domain-prefixed, is one of kube's standard finalizers.
func validateFinalizerName(name string, path *field.Path) field.ErrorList {
	allErrs := apivalidation.ValidateFinalizerName(name, path)
	if !strings.Contains(name, "/") && !slices.Contains(standardFinalizers, name) {
		allErrs = append(allErrs, field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified"))
	}
	return allErrs
}

var standardFinalizers = []string{string(v1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// GetResetFields: an update of the namespace never changes its status, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "status")
}

// GetResetFields: a status update never changes the spec, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "spec")
}

// GetResetFields: finalize changes only spec.finalizers, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*FinalizeStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "status")
}
