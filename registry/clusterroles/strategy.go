// Package clusterroles is the registry strategy of
// rbac.authorization.k8s.io/v1 ClusterRoles as kube-apiserver v1.32 has it
// (pkg/registry/rbac/clusterrole): names are path segments, rules and the
// aggregationRule validated as kube's ValidateClusterRole; kube has no
// printer for them, so tables are the default (Name, Created At); the
// mechanism is the one both kinds of role share (registry/internal/rbac).
package clusterroles

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// NewStrategy returns the clusterroles strategy.
func NewStrategy() *rbac.RoleStrategy {
	return rbac.NewRoleStrategy(rbac.RoleKind{
		Info: registry.ResourceInfo{
			Group: rbac.GroupName, Version: "v1", Resource: "clusterroles", Singular: "clusterrole",
			Kind: "ClusterRole", ListKind: "ClusterRoleList",
		},
		New:     func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		// The rules and the aggregation rule.
		Validate: func(obj runtime.Object) field.ErrorList {
			cr := obj.(*rbacv1.ClusterRole)
			return append(rbac.ValidateRules(cr.Rules, false), rbac.ValidateAggregationRule(cr.AggregationRule)...)
		},
	})
}
