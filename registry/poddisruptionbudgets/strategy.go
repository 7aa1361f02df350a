// Package poddisruptionbudgets is the registry strategy of policy/v1
// PodDisruptionBudgets as kube-apiserver v1.32 has it
// (pkg/registry/policy/poddisruptionbudget, pkg/apis/policy/validation and
// the policy/v1 conversion): status is server-owned, spec changes bump
// metadata.generation, and the budget is validated as kube does. A nil
// selector is valid (it selects no pods), as in kube.
package poddisruptionbudgets

import (
	"context"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"strconv"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Strategy is the strategy of the poddisruptionbudgets resource.
type Strategy struct{ registry.Base }

// StatusStrategy is the strategy of poddisruptionbudgets/status: it keeps
// the old spec.
type StatusStrategy struct{}

var (
	_ registry.Strategy           = (*Strategy)(nil)
	_ registry.GenerationStrategy = (*Strategy)(nil)
	_ registry.StatusStrategy     = (*StatusStrategy)(nil)
)

// NewStrategy returns the poddisruptionbudgets strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes poddisruptionbudgets as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group:      "policy",
			Version:    "v1",
			Resource:   "poddisruptionbudgets",
			Singular:   "poddisruptionbudget",
			Kind:       "PodDisruptionBudget",
			ListKind:   "PodDisruptionBudgetList",
			Namespaced: true,
			ShortNames: []string{"pdb"},
		},
		NewObject:     func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewListObject: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		// AllowCreateOnUpdate is false for budgets.
	}}
}

// NewStatusStrategy returns the poddisruptionbudgets/status strategy.
func NewStatusStrategy() *StatusStrategy { return &StatusStrategy{} }

// PrepareForCreate clears the status and normalises the selector.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	pdb := obj.(*policyv1.PodDisruptionBudget)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{}
	normalizeSelector(pdb.Spec.Selector)
}

// PrepareForUpdate keeps the old status and normalises the selector.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	pdb := obj.(*policyv1.PodDisruptionBudget)
	pdb.Status = old.(*policyv1.PodDisruptionBudget).Status
	normalizeSelector(pdb.Spec.Selector)
}

// SpecChanged reports whether the spec differs semantically (nil and empty
// are equal), which makes the Store bump metadata.generation.
func (*Strategy) SpecChanged(obj, old runtime.Object) bool {
	return !equality.Semantic.DeepEqual(obj.(*policyv1.PodDisruptionBudget).Spec, old.(*policyv1.PodDisruptionBudget).Spec)
}

// Validate validates a new budget's spec.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, false)
}

// ValidateUpdate validates the new spec. Invalid label values in the selector
// are tolerated if the stored selector already failed validation.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	oldSelector := old.(*policyv1.PodDisruptionBudget).Spec.Selector
	allowInvalid := len(metav1validation.ValidateLabelSelector(oldSelector, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0
	return validateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, allowInvalid)
}

// PrepareForUpdate keeps the old spec.
func (*StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*policyv1.PodDisruptionBudget).Spec = old.(*policyv1.PodDisruptionBudget).Spec
}

// ValidateUpdate validates the status: conditions, and non-negative counts.
// kube does not check observedGeneration or disruptedPods.
func (*StatusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	status := obj.(*policyv1.PodDisruptionBudget).Status
	path := field.NewPath("status")
	allErrs := metav1validation.ValidateConditions(status.Conditions, path.Child("conditions"))
	for _, c := range []struct {
		name  string
		value int32
	}{
		{"disruptionsAllowed", status.DisruptionsAllowed},
		{"currentHealthy", status.CurrentHealthy},
		{"desiredHealthy", status.DesiredHealthy},
		{"expectedPods", status.ExpectedPods},
	} {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(c.value), path.Child(c.name))...)
	}
	return allErrs
}

// evictionPolicies are sorted, as kube lists them in its error.
var evictionPolicies = []policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}

// validateSpec is kube's ValidatePodDisruptionBudgetSpec, plus two rules
// corekube's issue 2 asks for and kube leaves out: a selector is required
// (kube lets a nil selector through, and it then matches no pod) and
// exactly one of minAvailable and maxUnavailable must be set (kube also
// accepts neither, and then allows no disruption at all).
func validateSpec(spec *policyv1.PodDisruptionBudgetSpec, allowInvalidLabelValue bool) field.ErrorList {
	var allErrs field.ErrorList
	path := field.NewPath("spec")
	switch {
	case spec.MinAvailable != nil && spec.MaxUnavailable != nil:
		allErrs = append(allErrs, field.Invalid(path, *spec, "minAvailable and maxUnavailable cannot be both set"))
	case spec.MinAvailable == nil && spec.MaxUnavailable == nil:
		allErrs = append(allErrs, field.Required(path.Child("minAvailable"), "one of minAvailable or maxUnavailable must be set"))
	}
	if spec.Selector == nil {
		allErrs = append(allErrs, field.Required(path.Child("selector"), ""))
	}
	if spec.MinAvailable != nil {
		allErrs = append(allErrs, validateIntOrPercent(*spec.MinAvailable, path.Child("minAvailable"))...)
	}
	if spec.MaxUnavailable != nil {
		allErrs = append(allErrs, validateIntOrPercent(*spec.MaxUnavailable, path.Child("maxUnavailable"))...)
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	allErrs = append(allErrs, metav1validation.ValidateLabelSelector(spec.Selector, opts, path.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.AlwaysAllow && *p != policyv1.IfHealthyBudget {
		allErrs = append(allErrs, field.NotSupported(path.Child("unhealthyPodEvictionPolicy"), *p, evictionPolicies))
	}
	return allErrs
}

// validateIntOrPercent accepts a non-negative integer or a percentage of at
// most 100% (kube's ValidatePositiveIntOrPercent + IsNotMoreThan100Percent).
func validateIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch v.Type {
	case intstr.String:
		msgs := validation.IsValidPercent(v.StrVal)
		for _, msg := range msgs {
			allErrs = append(allErrs, field.Invalid(path, v, msg))
		}
		if len(msgs) == 0 {
			if pct, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1]); pct > 100 {
				allErrs = append(allErrs, field.Invalid(path, v, "must not be greater than 100%"))
			}
		}
	case intstr.Int:
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), path)...)
	default:
		allErrs = append(allErrs, field.Invalid(path, v, "must be an integer or percentage (e.g '5%%')"))
	}
	return allErrs
}

// v1beta1SelectorLabel is the key kube reserves to encode policy/v1beta1's
// "empty selector matches nothing" in internal selectors.
const v1beta1SelectorLabel = "pdb.kubernetes.io/deprecated-v1beta1-empty-selector-match"

var (
	matchAll  = &metav1.LabelSelector{}
	matchNone = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v1beta1SelectorLabel, Operator: metav1.LabelSelectorOpExists}}}
)

// normalizeSelector mirrors the policy/v1 conversion: unless the selector is
// exactly kube's match-all or match-none form, expressions on the reserved
// v1beta1 key are removed.
func normalizeSelector(sel *metav1.LabelSelector) {
	if sel == nil || equality.Semantic.DeepEqual(sel, matchAll) || equality.Semantic.DeepEqual(sel, matchNone) {
		return
	}
	kept := sel.MatchExpressions[:0]
	for _, req := range sel.MatchExpressions {
		if req.Key != v1beta1SelectorLabel {
			kept = append(kept, req)
		}
	}
	sel.MatchExpressions = kept
}

// GetResetFields: an update of the budget never changes its status, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("policy/v1", "status")
}

// GetResetFields: a status update never changes the spec, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("policy/v1", "spec")
}
