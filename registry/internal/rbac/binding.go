package rbac

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// BindingParts are the fields a binding strategy works on, whatever the
// binding's type.
type BindingParts struct {
	Meta     *metav1.ObjectMeta
	RoleRef  *rbacv1.RoleRef
	Subjects []rbacv1.Subject
}

// BindingKind describes one kind of binding (RoleBinding,
// ClusterRoleBinding) to BindingStrategy.
type BindingKind struct {
	Info    registry.ResourceInfo
	New     func() runtime.Object
	NewList func() runtime.Object
	// Parts returns obj's parts, false when obj is not of the kind.
	Parts func(obj runtime.Object) (BindingParts, bool)
	// RoleKinds are the kinds its roleRef may name.
	RoleKinds []string
	// Column is the name kube's printer gives the first column's
	// description ("roleBinding", "clusterRoleBinding").
	Column string
}

// BindingStrategy is the registry strategy both kinds of binding share, as
// kube's: v1 defaults, ValidateRoleBinding / ValidateClusterRoleBinding
// (ServiceAccount subjects of a RoleBinding default to its namespace), an
// immutable roleRef, and kube's binding printer.
type BindingStrategy struct {
	strategyBase
	kind BindingKind
}

var (
	_ registry.Strategy               = (*BindingStrategy)(nil)
	_ registry.NameValidationStrategy = (*BindingStrategy)(nil)
	_ registry.TableConvertor         = (*BindingStrategy)(nil)
)

// NewBindingStrategy returns the strategy of kind.
func NewBindingStrategy(kind BindingKind) *BindingStrategy {
	return &BindingStrategy{strategyBase: newStrategyBase(kind.Info, kind.New, kind.NewList), kind: kind}
}

func (s *BindingStrategy) parts(obj runtime.Object) BindingParts {
	p, ok := s.kind.Parts(obj)
	if !ok {
		panic(fmt.Sprintf("%s strategy given a %T", s.kind.Info.Kind, obj))
	}
	return p
}

// Default applies the v1 defaults, which kube applies when it decodes a
// request: before the field manager runs, so that a write that differs
// from the stored binding only by them changes no ownership.
func (s *BindingStrategy) Default(obj runtime.Object) {
	p := s.parts(obj)
	DefaultBinding(p.RoleRef, p.Subjects)
}

// PrepareForCreate applies the v1 defaults.
func (s *BindingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	p := s.parts(obj)
	DefaultBinding(p.RoleRef, p.Subjects)
}

// PrepareForUpdate applies the v1 defaults.
func (s *BindingStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	p := s.parts(obj)
	DefaultBinding(p.RoleRef, p.Subjects)
}

// Validate validates the roleRef and subjects.
func (s *BindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	p := s.parts(obj)
	return ValidateBinding(*p.RoleRef, p.Subjects, s.kind.Info.Namespaced, s.kind.RoleKinds)
}

// ValidateUpdate validates as on create; roleRef is immutable.
func (s *BindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	return append(errs, ValidateRoleRefUpdate(*s.parts(obj).RoleRef, *s.parts(old).RoleRef)...)
}

// TableColumns are kube's binding columns.
func (s *BindingStrategy) TableColumns() []metav1.TableColumnDefinition {
	return BindingColumns(s.kind.Column)
}

// TableRow prints a binding as kube's printRoleBinding /
// printClusterRoleBinding.
func (s *BindingStrategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	p, ok := s.kind.Parts(obj)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a %s, got %T", s.kind.Info.Kind, obj)
	}
	return BindingRow(p.Meta.Name, p.Meta.CreationTimestamp, *p.RoleRef, p.Subjects, now), nil
}
