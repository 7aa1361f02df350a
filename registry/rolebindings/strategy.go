// Package rolebindings is the registry strategy of
// rbac.authorization.k8s.io/v1 RoleBindings as kube-apiserver v1.32 has it
// (pkg/registry/rbac/rolebinding): v1 defaults, kube's
// ValidateRoleBinding, an immutable roleRef, and kube's printer (ROLE as
// Kind/name, USERS, GROUPS, SERVICEACCOUNTS wide); the mechanism is the
// one both kinds of binding share (registry/internal/rbac).
package rolebindings

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// NewStrategy returns the rolebindings strategy.
func NewStrategy() *rbac.BindingStrategy {
	return rbac.NewBindingStrategy(rbac.BindingKind{
		Info: registry.ResourceInfo{
			Group: rbac.GroupName, Version: "v1", Resource: "rolebindings", Singular: "rolebinding",
			Kind: "RoleBinding", ListKind: "RoleBindingList", Namespaced: true,
		},
		New:     func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
		Parts: func(obj runtime.Object) (rbac.BindingParts, bool) {
			b, ok := obj.(*rbacv1.RoleBinding)
			if !ok {
				return rbac.BindingParts{}, false
			}
			return rbac.BindingParts{Meta: &b.ObjectMeta, RoleRef: &b.RoleRef, Subjects: b.Subjects}, true
		},
		RoleKinds: []string{"Role", "ClusterRole"},
		Column:    "roleBinding",
	})
}
