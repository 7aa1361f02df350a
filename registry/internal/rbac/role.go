package rbac

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// RoleKind describes one kind of role (Role, ClusterRole) to RoleStrategy.
type RoleKind struct {
	Info    registry.ResourceInfo
	New     func() runtime.Object
	NewList func() runtime.Object
	// Validate is kube's ValidateRole / ValidateClusterRole of an object of
	// the kind, on create and on update alike: nothing in a role is
	// immutable.
	Validate func(obj runtime.Object) field.ErrorList
}

// RoleStrategy is the registry strategy both kinds of role share, as
// kube's: names are path segments, PUT creates a missing role, and kube has
// no printer for roles, so tables are the default (Name, Created At).
type RoleStrategy struct {
	strategyBase
	kind RoleKind
}

var (
	_ registry.Strategy               = (*RoleStrategy)(nil)
	_ registry.NameValidationStrategy = (*RoleStrategy)(nil)
)

// NewRoleStrategy returns the strategy of kind.
func NewRoleStrategy(kind RoleKind) *RoleStrategy {
	return &RoleStrategy{strategyBase: newStrategyBase(kind.Info, kind.New, kind.NewList), kind: kind}
}

// Validate validates the role as its kind does.
func (s *RoleStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return s.kind.Validate(obj)
}

// ValidateUpdate validates as on create; nothing is immutable.
func (s *RoleStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.kind.Validate(obj)
}
