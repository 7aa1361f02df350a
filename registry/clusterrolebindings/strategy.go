// Package clusterrolebindings is the registry strategy of
// rbac.authorization.k8s.io/v1 ClusterRoleBindings as kube-apiserver v1.32
// has it (pkg/registry/rbac/clusterrolebinding): v1 defaults, kube's
// ValidateClusterRoleBinding, an immutable roleRef, and kube's printer.
package clusterrolebindings

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// Strategy is the strategy of the clusterrolebindings resource.
type Strategy struct{}

var (
	_ registry.Strategy               = (*Strategy)(nil)
	_ registry.NameValidationStrategy = (*Strategy)(nil)
	_ registry.TableConvertor         = (*Strategy)(nil)
)

// NewStrategy returns the clusterrolebindings strategy.
func NewStrategy() *Strategy { return &Strategy{} }

// Info describes clusterrolebindings as kube's discovery does.
func (*Strategy) Info() registry.ResourceInfo {
	return registry.ResourceInfo{
		Group:    rbac.GroupName,
		Version:  "v1",
		Resource: "clusterrolebindings",
		Singular: "clusterrolebinding",
		Kind:     "ClusterRoleBinding",
		ListKind: "ClusterRoleBindingList",
	}
}

// New returns an empty ClusterRoleBinding.
func (*Strategy) New() runtime.Object { return &rbacv1.ClusterRoleBinding{} }

// NewList returns an empty ClusterRoleBindingList.
func (*Strategy) NewList() runtime.Object { return &rbacv1.ClusterRoleBindingList{} }

// ValidateName accepts any path segment, as kube's ValidateRBACName.
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return rbac.ValidateName(name, prefix)
}

// PrepareForCreate applies the v1 defaults.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	b := obj.(*rbacv1.ClusterRoleBinding)
	rbac.DefaultBinding(&b.RoleRef, b.Subjects)
}

// PrepareForUpdate applies the v1 defaults.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	b := obj.(*rbacv1.ClusterRoleBinding)
	rbac.DefaultBinding(&b.RoleRef, b.Subjects)
}

var roleKinds = []string{"ClusterRole"}

// Validate is kube's ValidateClusterRoleBinding: ServiceAccount subjects
// need a namespace.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.ClusterRoleBinding)
	return rbac.ValidateBinding(b.RoleRef, b.Subjects, false, roleKinds)
}

// ValidateUpdate is kube's ValidateClusterRoleBindingUpdate: roleRef is
// immutable.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.ClusterRoleBinding)
	errs := rbac.ValidateBinding(b.RoleRef, b.Subjects, false, roleKinds)
	return append(errs, rbac.ValidateRoleRefUpdate(b.RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)...)
}

// AllowCreateOnUpdate is true, as kube's clusterrolebinding strategy.
func (*Strategy) AllowCreateOnUpdate() bool { return true }

// GetAttrs returns the binding's labels and metadata.name.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	b, ok := obj.(*rbacv1.ClusterRoleBinding)
	if !ok {
		return nil, nil, fmt.Errorf("not a ClusterRoleBinding")
	}
	return labels.Set(b.Labels), fields.Set{"metadata.name": b.Name}, nil
}

// TableColumns are kube's ClusterRoleBinding columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return rbac.BindingColumns("clusterRoleBinding")
}

// TableRow prints a ClusterRoleBinding as kube's printClusterRoleBinding.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	b, ok := obj.(*rbacv1.ClusterRoleBinding)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a ClusterRoleBinding, got %T", obj)
	}
	return rbac.BindingRow(b.Name, b.CreationTimestamp, b.RoleRef, b.Subjects, now), nil
}
