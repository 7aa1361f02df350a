// Package authorizer decides whether a request may run, as kube's
// authorizers do: each says Allow, Deny or has no opinion about the
// request's Attributes (who asks to do what to what), a Union asks them in
// order and the first Allow or Deny wins. Members of system:masters are
// always allowed (Privileged, kube's privileged group authorizer). RBAC
// lives in authorizer/rbac.
package authorizer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corekube/corekube/auth/user"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Decision is an authorizer's answer.
type Decision int

// Decisions, as kube's.
const (
	// DecisionDeny refuses the request; no later authorizer is asked.
	DecisionDeny Decision = iota
	// DecisionAllow lets the request run; no later authorizer is asked.
	DecisionAllow
	// DecisionNoOpinion leaves the decision to the next authorizer; when
	// none allows, the request is refused.
	DecisionNoOpinion
)

func (d Decision) String() string {
	switch d {
	case DecisionDeny:
		return "Deny"
	case DecisionAllow:
		return "Allow"
	default:
		return "NoOpinion"
	}
}

// Attributes describe one request to authorize, as kube's
// authorizer.AttributesRecord: a resource request (ResourceRequest true:
// Verb on APIGroup/Resource[/Subresource] Name in Namespace) or a
// non-resource request (Verb, the lower-case method, on Path).
type Attributes struct {
	User            *user.Info
	Verb            string
	Namespace       string
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Name            string
	ResourceRequest bool
	Path            string

	// The selectors of a list, watch or deletecollection, parsed once
	// from the query (kube's AuthorizeWithSelectors, on by default in
	// 1.32), so that an authorizer can allow a narrowed read: the Node
	// authorizer lets a node list only its own pods. A selector that does
	// not parse leaves its requirements nil and says why in its Err;
	// authorizers then treat the request as unselected.
	FieldSelector    fields.Requirements
	FieldSelectorErr error
	LabelSelector    labels.Requirements
	LabelSelectorErr error
}

// ParseSelectors sets a's selector requirements from the raw query values
// (empty means none), as kube's attributes parse RequestInfo's selectors.
func (a *Attributes) ParseSelectors(fieldSelector, labelSelector string) {
	if fieldSelector != "" {
		sel, err := fields.ParseSelector(fieldSelector)
		if err != nil {
			a.FieldSelectorErr = fmt.Errorf("parse field selector: %w", err)
		} else {
			a.FieldSelector = sel.Requirements()
		}
	}
	if labelSelector != "" {
		sel, err := labels.Parse(labelSelector)
		if err != nil {
			a.LabelSelectorErr = fmt.Errorf("parse label selector: %w", err)
		} else {
			reqs, _ := sel.Requirements()
			a.LabelSelector = reqs
		}
	}
}

// Authorizer decides on requests. reason says why, for the 403 and the
// log; an error is a failure to decide, not a refusal.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// Func adapts a function to Authorizer.
type Func func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize calls f.
func (f Func) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// Union asks each authorizer in order; the first Allow or Deny is the
// answer with its reason. When all have no opinion, the answer is
// NoOpinion with their reasons joined by newlines and their errors.
type Union []Authorizer

// Authorize asks the authorizers in order.
func (u Union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range u {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if d == DecisionAllow || d == DecisionDeny {
			return d, reason, err
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return DecisionNoOpinion, strings.Join(reasons, "\n"), errors.Join(errs...)
}

// Privileged allows every request of a member of system:masters, and has
// no opinion about the others: kube's privileged group authorizer, always
// first, so that the server's own loopback clients and the cluster admin
// never depend on RBAC's state.
var Privileged Authorizer = Func(func(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User.IsPrivileged() {
		return DecisionAllow, "", nil
	}
	return DecisionNoOpinion, "", nil
})

// AlwaysAllow allows every request (--authorization-mode=AlwaysAllow).
var AlwaysAllow Authorizer = Func(func(context.Context, Attributes) (Decision, string, error) {
	return DecisionAllow, "", nil
})

// AlwaysDeny has no opinion about any request, with kube's reason
// (--authorization-mode=AlwaysDeny).
var AlwaysDeny Authorizer = Func(func(context.Context, Attributes) (Decision, string, error) {
	return DecisionNoOpinion, "Everything is forbidden.", nil
})

// Modes, kube's --authorization-mode names this server knows.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeRBAC        = "RBAC"
	ModeNode        = "Node"
)

// ParseModes splits and checks a --authorization-mode value: known modes,
// none twice, at least one.
func ParseModes(value string) ([]string, error) {
	var modes []string
	seen := map[string]bool{}
	for _, m := range strings.Split(value, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case ModeAlwaysAllow, ModeAlwaysDeny, ModeRBAC, ModeNode:
		case "":
			continue
		default:
			return nil, fmt.Errorf("authorization-mode %q is not a valid mode (valid: %s, %s, %s, %s)", m, ModeAlwaysAllow, ModeAlwaysDeny, ModeNode, ModeRBAC)
		}
		if seen[m] {
			return nil, fmt.Errorf("authorization-mode %q has mode specified more than once: %q", value, m)
		}
		seen[m] = true
		modes = append(modes, m)
	}
	if len(modes) == 0 {
		return nil, errors.New("at least one authorization-mode must be passed")
	}
	return modes, nil
}

// RuleResolver lists the rules an authorizer grants a user in a namespace
// (cluster-wide ones included), as kube's authorizer.RuleResolver, for
// SelfSubjectRulesReview. A rule with Resources is a resource rule, one
// with NonResourceURLs a non-resource rule. incomplete says the list may
// lack rules the authorizer would grant (it cannot enumerate them).
type RuleResolver interface {
	RulesFor(ctx context.Context, u *user.Info, namespace string) (rules []rbacv1.PolicyRule, incomplete bool, err error)
}

// RuleResolverFunc adapts a function to RuleResolver.
type RuleResolverFunc func(ctx context.Context, u *user.Info, namespace string) ([]rbacv1.PolicyRule, bool, error)

// RulesFor calls f.
func (f RuleResolverFunc) RulesFor(ctx context.Context, u *user.Info, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	return f(ctx, u, namespace)
}

// RuleResolvers asks every resolver, as kube's union of rule resolvers:
// the rules of all, incomplete when any is, their errors joined.
type RuleResolvers []RuleResolver

// RulesFor asks every resolver in order.
func (rs RuleResolvers) RulesFor(ctx context.Context, u *user.Info, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	incomplete := false
	for _, r := range rs {
		got, inc, err := r.RulesFor(ctx, u, namespace)
		rules = append(rules, got...)
		incomplete = incomplete || inc
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rules, incomplete, errors.Join(errs...)
}

// AlwaysAllowRules are AlwaysAllow's rules: everything, as kube's
// alwaysAllowAuthorizer lists them.
var AlwaysAllowRules RuleResolver = RuleResolverFunc(func(context.Context, *user.Info, string) ([]rbacv1.PolicyRule, bool, error) {
	return []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
	}, false, nil
})
