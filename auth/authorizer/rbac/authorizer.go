package rbac

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
)

// Authorizer is kube's RBAC authorizer over a Cache.
type Authorizer struct {
	cache *Cache
}

// New returns the RBAC authorizer reading c.
func New(c *Cache) *Authorizer { return &Authorizer{cache: c} }

// userView is a request's user as subjects match it, computed once per
// decision.
type userView struct {
	name                string
	groups              []string
	isSA                bool
	saNamespace, saName string
}

func viewOf(u *user.Info) userView {
	if u == nil {
		return userView{}
	}
	v := userView{name: u.Name, groups: u.Groups}
	if rest, ok := strings.CutPrefix(u.Name, user.ServiceAccountUsernamePrefix); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok && ns != "" && name != "" {
			v.isSA, v.saNamespace, v.saName = true, ns, name
		}
	}
	return v
}

// Authorize allows a when a binding that applies to its user grants a rule
// allowing it; otherwise it has no opinion, with kube's reason: empty, or
// "RBAC: " and the errors met resolving roles (a binding to a missing
// role).
func (z *Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var errs []error
	allowedBy := ""
	z.visitRules(a.User, a.Namespace, func(src source, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(&a, rule) {
			allowedBy = src.String()
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowedBy != "" {
		return authorizer.DecisionAllow, "RBAC: allowed by " + allowedBy, nil
	}
	if len(errs) > 0 {
		return authorizer.DecisionNoOpinion, "RBAC: " + aggregate(errs), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// RulesFor returns every rule bound to u cluster-wide and in namespace
// (kube's RulesFor), with the errors met resolving role references.
func (z *Authorizer) RulesFor(u *user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	z.visitRules(u, namespace, func(_ source, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if len(errs) > 0 {
		return rules, errors.New(aggregate(errs))
	}
	return rules, nil
}

// RoleRefRules returns the rules of the role ref names, a RoleBinding's in
// namespace or a ClusterRoleBinding's (namespace ""); a missing role is
// kube's lister NotFound (`clusterrole.rbac.authorization.k8s.io "x" not
// found`).
func (z *Authorizer) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	z.cache.mu.RLock()
	defer z.cache.mu.RUnlock()
	return z.roleRefRulesLocked(ref, namespace)
}

func (z *Authorizer) roleRefRulesLocked(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		r, ok := z.cache.roles[namespace][ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "role"}, ref.Name)
		}
		return r.Rules, nil
	case "ClusterRole":
		r, ok := z.cache.clusterRoles[ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrole"}, ref.Name)
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// visitRules calls visit with each rule bound to u (cluster-wide, then in
// namespace) until visit returns false, as kube's VisitRulesFor; source
// describes the binding (formatted only when an allowed decision needs it).
func (z *Authorizer) visitRules(u *user.Info, namespace string, visit func(src source, rule *rbacv1.PolicyRule, err error) bool) {
	uv := viewOf(u)
	c := z.cache
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, b := range c.crbList {
		s := appliesToAny(&uv, b.Subjects, "")
		if s < 0 {
			continue
		}
		rules, err := z.roleRefRulesLocked(b.RoleRef, "")
		if err != nil {
			if !visit(source{}, nil, err) {
				return
			}
			continue
		}
		src := source{crb: b, subject: s}
		for i := range rules {
			if !visit(src, &rules[i], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	for _, b := range c.rbList[namespace] {
		s := appliesToAny(&uv, b.Subjects, namespace)
		if s < 0 {
			continue
		}
		rules, err := z.roleRefRulesLocked(b.RoleRef, namespace)
		if err != nil {
			if !visit(source{}, nil, err) {
				return
			}
			continue
		}
		src := source{rb: b, subject: s}
		for i := range rules {
			if !visit(src, &rules[i], nil) {
				return
			}
		}
	}
}

// source is the binding a rule comes from, for the reason of a decision.
type source struct {
	crb     *rbacv1.ClusterRoleBinding
	rb      *rbacv1.RoleBinding
	subject int
}

// String describes the binding as kube's describers do. (a RoleBinding as name/namespace, kube's order)
func (s source) String() string {
	if s.crb != nil {
		b := s.crb
		return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(&b.Subjects[s.subject], ""))
	}
	b := s.rb
	return fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(&b.Subjects[s.subject], b.Namespace))
}

// appliesToAny returns the index of the first subject naming u, or -1.
func appliesToAny(u *userView, subjects []rbacv1.Subject, namespace string) int {
	for i := range subjects {
		if appliesTo(u, &subjects[i], namespace) {
			return i
		}
	}
	return -1
}

func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, ns+"/"+s.Name)
	default:
		return fmt.Sprintf("%s %q", s.Kind, s.Name)
	}
}

// aggregate formats errors as kube's utilerrors.Aggregate: one message
// alone, several in brackets, duplicates once.
func aggregate(errs []error) string {
	seen := map[string]bool{}
	var msgs []string
	for _, e := range errs {
		if m := e.Error(); !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}
