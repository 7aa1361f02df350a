// Package rolebindings is the registry strategy of
// rbac.authorization.k8s.io/v1 RoleBindings as kube-apiserver v1.32 has it
// (pkg/registry/rbac/rolebinding): v1 defaults, kube's
// ValidateRoleBinding, an immutable roleRef, and kube's printer (ROLE as
// Kind/name, USERS, GROUPS, SERVICEACCOUNTS wide).
package rolebindings

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

// Strategy is the strategy of the rolebindings resource.
type Strategy struct{}

var (
	_ registry.Strategy               = (*Strategy)(nil)
	_ registry.NameValidationStrategy = (*Strategy)(nil)
	_ registry.TableConvertor         = (*Strategy)(nil)
)

// NewStrategy returns the rolebindings strategy.
func NewStrategy() *Strategy { return &Strategy{} }

// Info describes rolebindings as kube's discovery does (no short names).
func (*Strategy) Info() registry.ResourceInfo {
	return registry.ResourceInfo{
		Group:      rbac.GroupName,
		Version:    "v1",
		Resource:   "rolebindings",
		Singular:   "rolebinding",
		Kind:       "RoleBinding",
		ListKind:   "RoleBindingList",
		Namespaced: true,
	}
}

// New returns an empty RoleBinding.
func (*Strategy) New() runtime.Object { return &rbacv1.RoleBinding{} }

// NewList returns an empty RoleBindingList.
func (*Strategy) NewList() runtime.Object { return &rbacv1.RoleBindingList{} }

// ValidateName accepts any path segment, as kube's ValidateRBACName.
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return rbac.ValidateName(name, prefix)
}

// PrepareForCreate applies the v1 defaults.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	b := obj.(*rbacv1.RoleBinding)
	rbac.DefaultBinding(&b.RoleRef, b.Subjects)
}

// PrepareForUpdate applies the v1 defaults.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	b := obj.(*rbacv1.RoleBinding)
	rbac.DefaultBinding(&b.RoleRef, b.Subjects)
}

var roleKinds = []string{"Role", "ClusterRole"}

// Validate is kube's ValidateRoleBinding.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.RoleBinding)
	return rbac.ValidateBinding(b.RoleRef, b.Subjects, true, roleKinds)
}

// ValidateUpdate is kube's ValidateRoleBindingUpdate: roleRef is immutable.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.RoleBinding)
	errs := rbac.ValidateBinding(b.RoleRef, b.Subjects, true, roleKinds)
	return append(errs, rbac.ValidateRoleRefUpdate(b.RoleRef, old.(*rbacv1.RoleBinding).RoleRef)...)
}

// AllowCreateOnUpdate is true, as kube's rolebinding strategy.
func (*Strategy) AllowCreateOnUpdate() bool { return true }

// GetAttrs returns the binding's labels and metadata.name/namespace.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	b, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		return nil, nil, fmt.Errorf("not a RoleBinding")
	}
	return labels.Set(b.Labels), fields.Set{"metadata.name": b.Name, "metadata.namespace": b.Namespace}, nil
}

// TableColumns are kube's RoleBinding columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return rbac.BindingColumns("roleBinding")
}

// TableRow prints a RoleBinding as kube's printRoleBinding.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	b, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a RoleBinding, got %T", obj)
	}
	return rbac.BindingRow(b.Name, b.CreationTimestamp, b.RoleRef, b.Subjects, now), nil
}
