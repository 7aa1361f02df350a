// Package clusterroles is the registry strategy of
// rbac.authorization.k8s.io/v1 ClusterRoles as kube-apiserver v1.32 has it
// (pkg/registry/rbac/clusterrole): names are path segments, rules and the
// aggregationRule validated as kube's ValidateClusterRole; kube has no
// printer for them, so tables are the default (Name, Created At).
package clusterroles

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/internal/rbac"
)

// Strategy is the strategy of the clusterroles resource.
type Strategy struct{ registry.Base }

var (
	_ registry.Strategy               = (*Strategy)(nil)
	_ registry.NameValidationStrategy = (*Strategy)(nil)
)

// NewStrategy returns the clusterroles strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes clusterroles as kube's discovery does (no short names).
		Resource: registry.ResourceInfo{
			Group:    rbac.GroupName,
			Version:  "v1",
			Resource: "clusterroles",
			Singular: "clusterrole",
			Kind:     "ClusterRole",
			ListKind: "ClusterRoleList",
		},
		NewObject:     func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewListObject: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		// AllowCreateOnUpdate is true, as kube's clusterrole strategy.
		CreateOnUpdate: true,
	}}
}

// ValidateName accepts any path segment, as kube's ValidateRBACName.
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return rbac.ValidateName(name, prefix)
}

// Validate validates the rules and the aggregation rule.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	cr := obj.(*rbacv1.ClusterRole)
	return append(rbac.ValidateRules(cr.Rules, false), rbac.ValidateAggregationRule(cr.AggregationRule)...)
}

// ValidateUpdate validates as on create; nothing is immutable.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}
