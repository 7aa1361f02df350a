// Package roles is the registry strategy of rbac.authorization.k8s.io/v1
// Roles as kube-apiserver v1.32 has it (pkg/registry/rbac/role): names are
// path segments, rules validated as kube's ValidateRole; kube has no
// printer for roles, so tables are the default (Name, Created At); the
// mechanism is the one both kinds of role share (registry/internal/rbac).
// Escalation prevention is admission's (auth/authorizer/rbac), not here.
package roles

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// NewStrategy returns the roles strategy.
func NewStrategy() *rbac.RoleStrategy {
	return rbac.NewRoleStrategy(rbac.RoleKind{
		Info: registry.ResourceInfo{
			Group: rbac.GroupName, Version: "v1", Resource: "roles", Singular: "role",
			Kind: "Role", ListKind: "RoleList", Namespaced: true,
		},
		New:     func() runtime.Object { return &rbacv1.Role{} },
		NewList: func() runtime.Object { return &rbacv1.RoleList{} },
		// The rules, with no non-resource URLs in a namespace.
		Validate: func(obj runtime.Object) field.ErrorList {
			return rbac.ValidateRules(obj.(*rbacv1.Role).Rules, true)
		},
	})
}
