// Package roles is the registry strategy of rbac.authorization.k8s.io/v1
// Roles as kube-apiserver v1.32 has it (pkg/registry/rbac/role): names are
// path segments, rules validated as kube's ValidateRole; kube has no
// printer for roles, so tables are the default (Name, Created At).
// Escalation prevention is admission's (auth/authorizer/rbac), not here.
package roles

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// Strategy is the strategy of the roles resource.
type Strategy struct{ registry.Base }

var (
	_ registry.Strategy               = (*Strategy)(nil)
	_ registry.NameValidationStrategy = (*Strategy)(nil)
)

// NewStrategy returns the roles strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes roles as kube's discovery does (no short names).
		Resource: registry.ResourceInfo{
			Group:      rbac.GroupName,
			Version:    "v1",
			Resource:   "roles",
			Singular:   "role",
			Kind:       "Role",
			ListKind:   "RoleList",
			Namespaced: true,
		},
		NewObject:     func() runtime.Object { return &rbacv1.Role{} },
		NewListObject: func() runtime.Object { return &rbacv1.RoleList{} },
		// AllowCreateOnUpdate is true, as kube's role strategy.
		CreateOnUpdate: true,
	}}
}

// ValidateName accepts any path segment, as kube's ValidateRBACName.
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return rbac.ValidateName(name, prefix)
}

// Validate validates the rules (no non-resource URLs in a namespace).
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return rbac.ValidateRules(obj.(*rbacv1.Role).Rules, true)
}

// ValidateUpdate validates the new rules; nothing is immutable.
func (*Strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return rbac.ValidateRules(obj.(*rbacv1.Role).Rules, true)
}
