// Package priorityclasses is the registry strategy of scheduling.k8s.io/v1
// PriorityClasses as kube-apiserver v1.32 has them
// (pkg/registry/scheduling/priorityclass, ValidatePriorityClass and
// ValidatePriorityClassUpdate in pkg/apis/scheduling/validation, the v1
// defaults and helpers).
//
// The built-in classes (SystemClasses) are created by the server at start
// (server/resources.go), and only they may carry the "system-" prefix. That
// only one class is the global default is not checked here but by the
// Priority admission plugin, as in kube.
package priorityclasses

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Kube's constants (pkg/apis/scheduling).
const (
	// SystemPrefix is reserved for the built-in classes.
	SystemPrefix = "system-"
	// HighestUserDefinablePriority is the largest value a class not
	// built in may have.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the value of system-cluster-critical.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemNodeCritical and SystemClusterCritical name the built-ins.
	SystemNodeCritical    = "system-node-critical"
	SystemClusterCritical = "system-cluster-critical"
)

// SystemClasses returns new copies of kube's built-in classes (the
// descriptions are the API data kube stores).
func SystemClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: SystemNodeCritical},
			Value:       SystemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.",
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Name: SystemClusterCritical},
			Value:       SystemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
		},
	}
}

// isSystemClass reports whether name is one of the built-ins.
func isSystemClass(name string) bool {
	return name == SystemNodeCritical || name == SystemClusterCritical
}

// checkKnownSystemClass is kube's IsKnownSystemPriorityClass: a class named
// like a built-in must have its value and globalDefault.
func checkKnownSystemClass(pc *schedulingv1.PriorityClass) error {
	for _, spc := range SystemClasses() {
		if spc.Name != pc.Name {
			continue
		}
		if spc.Value != pc.Value {
			return fmt.Errorf("value of %v PriorityClass must be %v", spc.Name, spc.Value)
		}
		if spc.GlobalDefault != pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", spc.Name, spc.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}

// Strategy is the strategy of the priorityclasses resource.
type Strategy struct{ registry.Base }

var (
	_ registry.Strategy    = (*Strategy)(nil)
	_ registry.Defaulter   = (*Strategy)(nil)
	_ registry.DeleteGuard = (*Strategy)(nil)
	// A GenerationStrategy for kube's generation 1 at create; kube never
	// bumps it (its PrepareForUpdate changes nothing).
	_ registry.GenerationStrategy = (*Strategy)(nil)
)

// NewStrategy returns the priorityclasses strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes priorityclasses as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group:      "scheduling.k8s.io",
			Version:    "v1",
			Resource:   "priorityclasses",
			Singular:   "priorityclass",
			Kind:       "PriorityClass",
			ListKind:   "PriorityClassList",
			ShortNames: []string{"pc"},
		},
		NewObject:     func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewListObject: func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// Default is kube's SetDefaults_PriorityClass: preemptionPolicy
// PreemptLowerPriority.
func (*Strategy) Default(obj runtime.Object) {
	pc := obj.(*schedulingv1.PriorityClass)
	if pc.PreemptionPolicy == nil {
		p := v1.PreemptLowerPriority
		pc.PreemptionPolicy = &p
	}
}

// PrepareForCreate defaults again (a mutating webhook may have dropped the
// policy).
func (s *Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) { s.Default(obj) }

// PrepareForUpdate defaults the new object, so that an update omitting
// preemptionPolicy does not read as a change of it.
func (s *Strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) { s.Default(obj) }

// Validate is kube's ValidatePriorityClass (the metadata is the Store's).
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return Validate(obj.(*schedulingv1.PriorityClass))
}

// Validate checks a new class: the "system-" prefix only for the built-ins
// as they are, the value of the others at most
// HighestUserDefinablePriority, preemptionPolicy one of kube's two.
func Validate(pc *schedulingv1.PriorityClass) field.ErrorList {
	var allErrs field.ErrorList
	if strings.HasPrefix(pc.Name, SystemPrefix) {
		if err := checkKnownSystemClass(pc); err != nil {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if p := pc.PreemptionPolicy; p != nil {
		path := field.NewPath("preemptionPolicy")
		switch *p {
		case v1.PreemptLowerPriority, v1.PreemptNever:
		case "":
			allErrs = append(allErrs, field.Required(path, ""))
		default:
			allErrs = append(allErrs, field.NotSupported(path, *p, []v1.PreemptionPolicy{v1.PreemptLowerPriority, v1.PreemptNever}))
		}
	}
	return allErrs
}

// ValidateUpdate is kube's ValidatePriorityClassUpdate: value and
// preemptionPolicy are immutable. Nothing else of the create validation
// runs again, as in kube.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateUpdate(obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass))
}

// ValidateUpdate checks pc as a replacement of old.
func ValidateUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	var allErrs field.ErrorList
	if pc.Value != old.Value {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	if !equalPolicy(pc.PreemptionPolicy, old.PreemptionPolicy) {
		// kube's ValidateImmutableField: the new value, "field is immutable".
		var value any = pc.PreemptionPolicy
		if pc.PreemptionPolicy != nil {
			value = *pc.PreemptionPolicy
		}
		allErrs = append(allErrs, field.Invalid(field.NewPath("preemptionPolicy"), value, "field is immutable"))
	}
	return allErrs
}

func equalPolicy(a, b *v1.PreemptionPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// SpecChanged is false: a class keeps metadata.generation 1, as in kube.
func (*Strategy) SpecChanged(_, _ runtime.Object) bool { return false }

// CheckDelete refuses deleting a built-in class, as kube's priorityclass
// REST does (its DELETE only: a deletecollection removes them, as in kube).
func (*Strategy) CheckDelete(_ context.Context, _, name string) error {
	if isSystemClass(name) {
		return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), name,
			errors.New("this is a system priority class and cannot be deleted"))
	}
	return nil
}
