package rbac

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
)

// EscalationCheck is kube's escalation prevention on RBAC writes (its
// policy-based role and binding storage) as an admission plugin: a user
// may only create or update a role whose rules they hold, unless allowed
// to `escalate` on it, and only bind a role whose rules they hold, unless
// allowed to `bind` it. system:masters may do anything. Registered as the
// last mutator, it refuses where kube's storage does: after mutating
// admission, before defaulting and validation (so the v1 defaults it
// needs are applied to a copy here).
type EscalationCheck struct {
	// Authorizer is the server's whole authorizer, asked about escalate
	// and bind.
	Authorizer authorizer.Authorizer
	// Rules resolves what the requester holds and what a role grants.
	Rules *Authorizer
}

var _ admission.Mutator = (*EscalationCheck)(nil)

// fullAuthority is what a ClusterRole with an aggregationRule may come to
// grant: everything, so using one needs escalate (or everything).
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Admit refuses an RBAC write that escalates, with kube's 403; it changes
// nothing.
func (e *EscalationCheck) Admit(ctx context.Context, a *admission.Attributes) error {
	if e == nil || e.Rules == nil || a.Resource.Group != rbacv1.GroupName || a.Subresource != "" ||
		(a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	u, ok := user.From(ctx)
	if !ok {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("no user on context"))
	}
	if u.IsPrivileged() {
		return nil
	}
	obj := withDefaults(a.Object)
	if a.Operation == admission.Update && onlyGCFieldsChanged(obj, a.OldObject) {
		return nil
	}
	gr := a.Resource.GroupResource()
	name := ""
	if a.Operation == admission.Update {
		name = a.Name
	}
	var rules []rbacv1.PolicyRule
	switch obj := obj.(type) {
	case *rbacv1.Role:
		if e.allowed(ctx, u, "escalate", gr, a.Namespace, name) {
			return nil
		}
		rules = obj.Rules
	case *rbacv1.ClusterRole:
		if e.allowed(ctx, u, "escalate", gr, "", name) {
			return nil
		}
		if err := e.confirmNoEscalation(u, "", obj.Rules); err != nil {
			return apierrors.NewForbidden(gr, obj.Name, err)
		}
		// An aggregationRule can gather anything (and, removed, keeps
		// what it gathered): setting, changing or dropping one takes
		// everything.
		old, _ := a.OldObject.(*rbacv1.ClusterRole)
		if hasAggregationRule(obj) || (old != nil && hasAggregationRule(old)) {
			if err := e.confirmNoEscalation(u, "", fullAuthority); err != nil {
				return apierrors.NewForbidden(gr, obj.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	case *rbacv1.RoleBinding:
		if e.bindAllowed(ctx, u, obj.RoleRef, a.Namespace) {
			return nil
		}
		var err error
		if rules, err = e.Rules.RoleRefRules(obj.RoleRef, a.Namespace); err != nil {
			return err // kube answers the lister's NotFound as it is
		}
	case *rbacv1.ClusterRoleBinding:
		if e.bindAllowed(ctx, u, obj.RoleRef, "") {
			return nil
		}
		var err error
		if rules, err = e.Rules.RoleRefRules(obj.RoleRef, ""); err != nil {
			return err
		}
	default:
		return nil
	}
	if err := e.confirmNoEscalation(u, a.Namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, objectName(a.Object), err)
	}
	return nil
}

// withDefaults returns obj, or for a binding a copy with kube's rbac/v1
// defaults (roleRef.apiGroup, User and Group subjects' apiGroup), which
// kube applies when decoding, before its escalation check.
func withDefaults(obj runtime.Object) runtime.Object {
	defaultBinding := func(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
		if ref.APIGroup == "" {
			ref.APIGroup = rbacv1.GroupName
		}
		for i := range subjects {
			if s := &subjects[i]; s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
				s.APIGroup = rbacv1.GroupName
			}
		}
	}
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		b = b.DeepCopy()
		defaultBinding(&b.RoleRef, b.Subjects)
		return b
	case *rbacv1.ClusterRoleBinding:
		b = b.DeepCopy()
		defaultBinding(&b.RoleRef, b.Subjects)
		return b
	}
	return obj
}

func hasAggregationRule(r *rbacv1.ClusterRole) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

func (e *EscalationCheck) allowed(ctx context.Context, u *user.Info, verb string, gr schema.GroupResource, namespace, name string) bool {
	if e.Authorizer == nil {
		return false
	}
	d, _, _ := e.Authorizer.Authorize(ctx, authorizer.Attributes{
		User: u, Verb: verb, APIGroup: gr.Group, APIVersion: "*", Resource: gr.Resource,
		Namespace: namespace, Name: name, ResourceRequest: true,
	})
	return d == authorizer.DecisionAllow
}

// bindAllowed is kube's BindingAuthorized: bind on the role the binding
// names, in the binding's namespace ("" for a ClusterRoleBinding).
func (e *EscalationCheck) bindAllowed(ctx context.Context, u *user.Info, ref rbacv1.RoleRef, namespace string) bool {
	var resource string
	switch ref.Kind {
	case "ClusterRole":
		resource = "clusterroles"
	case "Role":
		resource = "roles"
	default:
		return false
	}
	return e.allowed(ctx, u, "bind", schema.GroupResource{Group: ref.APIGroup, Resource: resource}, namespace, ref.Name)
}

// confirmNoEscalation is kube's ConfirmNoEscalation: every rule must be
// covered by what u holds in namespace; the message lists what is not.
func (e *EscalationCheck) confirmNoEscalation(u *user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	owner, resolveErr := e.Rules.RulesFor(u, namespace)
	ok, missing := Covers(owner, rules)
	if ok {
		return nil
	}
	lines := map[string]bool{}
	for _, r := range CompactRules(missing) {
		lines[CompactString(r)] = true
	}
	sorted := make([]string, 0, len(lines))
	for l := range lines {
		sorted = append(sorted, l)
	}
	sort.Strings(sorted)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(sorted, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", []error{resolveErr})
	}
	return errors.New(msg)
}

func objectName(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetName()
}

// onlyGCFieldsChanged is kube's IsOnlyMutatingGCFields: an update that
// changes nothing but owner references and finalizers (the garbage
// collector's) needs no escalation check.
func onlyGCFieldsChanged(obj, old runtime.Object) bool {
	if old == nil || reflect.TypeOf(obj) != reflect.TypeOf(old) {
		return false
	}
	copied := old.DeepCopyObject()
	cm, err1 := meta.Accessor(copied)
	om, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil {
		return false
	}
	cm.SetOwnerReferences(om.GetOwnerReferences())
	cm.SetFinalizers(om.GetFinalizers())
	// The store sets the resourceVersion and other system fields on obj
	// from old already; compare the rest.
	return equality.Semantic.DeepEqual(copied, obj)
}

// Covers is kube's Covers: whether owner rules cover every rule of
// servant, and the one-verb, one-resource pieces they do not.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, r := range servant {
		for _, sub := range breakdown(r) {
			covered := false
			for i := range owner {
				if ruleCovers(&owner[i], &sub) {
					covered = true
					break
				}
			}
			if !covered {
				missing = append(missing, sub)
			}
		}
	}
	return len(missing) == 0, missing
}

// breakdown splits a rule into rules of one group, resource, verb and
// resource name (or one URL and verb), as kube's BreakdownRule.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if len(r.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}})
					continue
				}
				for _, n := range r.ResourceNames {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}, ResourceNames: []string{n}})
				}
			}
		}
	}
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
		}
	}
	return out
}

func has(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !has(set, w) {
			return false
		}
	}
	return true
}

// ruleCovers is kube's ruleCovers: owner (any shape) covers sub (one of
// each).
func ruleCovers(owner, sub *rbacv1.PolicyRule) bool {
	verbs := has(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)
	groups := has(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)
	resources := resourcesCover(owner.Resources, sub.Resources)
	urls := urlsCover(owner.NonResourceURLs, sub.NonResourceURLs)
	names := len(owner.ResourceNames) == 0 || (len(sub.ResourceNames) > 0 && hasAll(owner.ResourceNames, sub.ResourceNames))
	return verbs && groups && resources && names && urls
}

func resourcesCover(set, want []string) bool {
	if has(set, rbacv1.ResourceAll) || hasAll(set, want) {
		return true
	}
	for _, p := range want {
		if has(set, p) {
			continue
		}
		_, sub, ok := strings.Cut(p, "/")
		if !ok || !has(set, "*/"+sub) {
			return false
		}
	}
	return true
}

func urlsCover(set, want []string) bool {
	for _, p := range want {
		covered := false
		for _, o := range set {
			if o == p || (strings.HasSuffix(o, "*") && strings.HasPrefix(p, strings.TrimRight(o, "*"))) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

// CompactRules merges rules of one group and one resource (and at most one
// name) into one rule with all their verbs, as kube's CompactRules.
func CompactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name string }
	var out []rbacv1.PolicyRule
	simple := map[key]*rbacv1.PolicyRule{}
	var order []key
	for _, r := range rules {
		if len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := key{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.name = r.ResourceNames[0]
		}
		if ex, ok := simple[k]; ok {
			for _, v := range r.Verbs {
				if !has(ex.Verbs, v) {
					ex.Verbs = append(ex.Verbs, v)
				}
			}
			continue
		}
		simple[k] = r.DeepCopy()
		order = append(order, k)
	}
	for _, k := range order {
		out = append(out, *simple[k])
	}
	return out
}

// CompactString prints a rule as kube's CompactString:
// {APIGroups:["g"], Resources:["r"], ResourceNames:["n"], Verbs:["v"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
