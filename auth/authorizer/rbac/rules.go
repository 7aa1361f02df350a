// Package rbac is kube's RBAC authorizer: a request is allowed when a
// ClusterRoleBinding, or a RoleBinding in the request's namespace, binds
// one of the request's subjects (user, groups, ServiceAccount) to a role
// with a rule that allows it. Roles and bindings are read from a Cache
// kept current by watches (never from etcd per decision). The package
// also holds kube's rule comparison for escalation prevention
// (Covers, CompactString), the escalation admission check and the
// bootstrap policy.
package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/corekube/corekube/auth/authorizer"
)

// RuleAllows reports whether rule allows the request a, as kube's
// RuleAllows: verbs, API groups, resources (resource/subresource, "*" and
// "*/subresource"), resource names; or verbs and non-resource URLs (exact,
// "*", or a prefix ending in "*").
func RuleAllows(a *authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !verbMatches(rule, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		return nonResourceURLMatches(rule, a.Path)
	}
	return apiGroupMatches(rule, a.APIGroup) && resourceMatches(rule, a.Resource, a.Subresource) && resourceNameMatches(rule, a.Name)
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

// resourceMatches compares without building "resource/subresource".
func resourceMatches(rule *rbacv1.PolicyRule, resource, subresource string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll {
			return true
		}
		if subresource == "" {
			if r == resource {
				return true
			}
			continue
		}
		// resource/subresource exactly, or */subresource.
		if len(r) == len(resource)+1+len(subresource) && strings.HasPrefix(r, resource) && r[len(resource)] == '/' && strings.HasSuffix(r, subresource) {
			return true
		}
		if len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource) {
			return true
		}
	}
	return false
}

func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}

// appliesTo reports whether subject names u; namespace is the binding's
// ("" for a ClusterRoleBinding), the default of a ServiceAccount subject's.
func appliesTo(u *userView, s *rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.name == s.Name
	case rbacv1.GroupKind:
		for _, g := range u.groups {
			if g == s.Name {
				return true
			}
		}
		return false
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = namespace
		}
		if ns == "" || !u.isSA {
			return false
		}
		return u.saNamespace == ns && u.saName == s.Name
	}
	return false
}
