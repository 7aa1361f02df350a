package namespaces

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var (
	_ registry.NameValidationStrategy = (*Strategy)(nil)
	_ registry.DeleteStrategy         = (*Strategy)(nil)
)

// ValidateName: namespace names are DNS-1123 labels.
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return apivalidation.ValidateNamespaceName(name, prefix)
}

// PrepareForDelete moves the namespace to phase Terminating. It stays
// stored while spec.finalizers is not empty: the namespace controller
// deletes its content, then removes the "kubernetes" finalizer through
// /finalize, and that update deletes it.
func (*Strategy) PrepareForDelete(_ context.Context, obj runtime.Object) (pending bool) {
	ns := obj.(*v1.Namespace)
	if len(ns.Spec.Finalizers) == 0 {
		return false
	}
	ns.Status.Phase = v1.NamespaceTerminating
	return true
}
