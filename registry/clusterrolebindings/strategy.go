// Package clusterrolebindings is the registry strategy of
// rbac.authorization.k8s.io/v1 ClusterRoleBindings as kube-apiserver v1.32
// has it (pkg/registry/rbac/clusterrolebinding): v1 defaults, kube's
// ValidateClusterRoleBinding (ServiceAccount subjects need a namespace),
// an immutable roleRef, and kube's printer; the mechanism is the one both
// kinds of binding share (registry/internal/rbac).
package clusterrolebindings

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// NewStrategy returns the clusterrolebindings strategy.
func NewStrategy() *rbac.BindingStrategy {
	return rbac.NewBindingStrategy(rbac.BindingKind{
		Info: registry.ResourceInfo{
			Group: rbac.GroupName, Version: "v1", Resource: "clusterrolebindings", Singular: "clusterrolebinding",
			Kind: "ClusterRoleBinding", ListKind: "ClusterRoleBindingList",
		},
		New:     func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		Parts: func(obj runtime.Object) (rbac.BindingParts, bool) {
			b, ok := obj.(*rbacv1.ClusterRoleBinding)
			if !ok {
				return rbac.BindingParts{}, false
			}
			return rbac.BindingParts{Meta: &b.ObjectMeta, RoleRef: &b.RoleRef, Subjects: b.Subjects}, true
		},
		RoleKinds: []string{"ClusterRole"},
		Column:    "clusterRoleBinding",
	})
}
