// Package rbac holds what the four rbac.authorization.k8s.io registry
// strategies share: kube's RBAC validation (pkg/apis/rbac/validation), the
// v1 defaulting of role references and subjects, and the subject strings
// of the binding printers.
package rbac

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// GroupName is the API group of RBAC.
const GroupName = rbacv1.GroupName

// ValidateName is kube's ValidateRBACName: any path segment (RBAC objects
// are named after users and groups, which may hold colons and more).
func ValidateName(name string, prefix bool) []string {
	return path.IsValidPathSegmentName(name)
}

// ValidatePolicyRule is kube's ValidatePolicyRule: verbs always; either
// non-resource URLs (cluster roles only) or API groups and resources.
func ValidatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(fld.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(fld.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(fld.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(fld.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(fld.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// ValidateRules validates each rule of a role.
func ValidateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		errs = append(errs, ValidatePolicyRule(rule, namespaced, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ValidateAggregationRule is the aggregationRule part of kube's
// ValidateClusterRole.
func ValidateAggregationRule(rule *rbacv1.AggregationRule) field.ErrorList {
	if rule == nil {
		return nil
	}
	var errs field.ErrorList
	fld := field.NewPath("aggregationRule", "clusterRoleSelectors")
	if len(rule.ClusterRoleSelectors) == 0 {
		errs = append(errs, field.Required(fld, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	for i := range rule.ClusterRoleSelectors {
		sel := &rule.ClusterRoleSelectors[i]
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, fld.Index(i))...)
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(fld.Index(i), sel, "invalid label selector."))
		}
	}
	return errs
}

// ValidateBinding is kube's ValidateRoleBinding / ValidateClusterRoleBinding
// without the metadata: roleKinds are the kinds roleRef may name (Role and
// ClusterRole for a RoleBinding, ClusterRole for a ClusterRoleBinding).
func ValidateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool, roleKinds []string) field.ErrorList {
	var errs field.ErrorList
	if ref.APIGroup != GroupName {
		errs = append(errs, field.NotSupported(field.NewPath("roleRef", "apiGroup"), ref.APIGroup, []string{GroupName}))
	}
	if !contains(roleKinds, ref.Kind) {
		errs = append(errs, field.NotSupported(field.NewPath("roleRef", "kind"), ref.Kind, roleKinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(field.NewPath("roleRef", "name"), ""))
	} else {
		for _, msg := range ValidateName(ref.Name, false) {
			errs = append(errs, field.Invalid(field.NewPath("roleRef", "name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// ValidateRoleRefUpdate refuses a change of roleRef: a binding's role is
// fixed for its life (delete and recreate to rebind), as in kube.
func ValidateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), RoleRef(ref), "cannot change roleRef")}
	}
	return nil
}

// RoleRef is rbacv1.RoleRef under the name kube's message prints it with:
// kube validates its internal type, which %#v shows as rbac.RoleRef{...}.
type RoleRef rbacv1.RoleRef

// validateSubject is kube's ValidateRoleBindingSubject.
func validateSubject(s rbacv1.Subject, namespaced bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(fld.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(fld.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(fld.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != GroupName {
			errs = append(errs, field.NotSupported(fld.Child("apiGroup"), s.APIGroup, []string{GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(fld.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// DefaultBinding applies kube's rbac/v1 defaults: roleRef.apiGroup is the
// RBAC group; User and Group subjects are of the RBAC group.
func DefaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = GroupName
		}
	}
}

// SubjectStrings is kube's SubjectsStrings as the binding printers use it:
// user names, group names and ServiceAccounts as namespace/name.
func SubjectStrings(subjects []rbacv1.Subject) (users, groups, serviceAccounts string) {
	var u, g, sa []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sa = append(sa, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
		case rbacv1.UserKind:
			u = append(u, s.Name)
		case rbacv1.GroupKind:
			g = append(g, s.Name)
		}
	}
	return strings.Join(u, ", "), strings.Join(g, ", "), strings.Join(sa, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
