package server

import (
	"context"
	"errors"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
	accessreviews "github.com/corekube/corekube/registry/authorization"
)

// serveAccessReviews serves the authorization.k8s.io/v1 access reviews.
// They ask the server's authorizer, read when a review comes (it is built
// once the RBAC caches are synced), so that a review's answer is the
// decision the request it describes would get.
func (s *Server) serveAccessReviews(api *handlers.API) {
	authz := authorizer.Func(func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		return s.authorization.authz.Authorize(ctx, a)
	})
	rules := s.ruleResolvers()
	api.AddCreateOnly(
		&handlers.CreateOnly{Info: accessreviews.LocalSubjectAccessReviewInfo(), Creater: accessreviews.NewLocalSubjectAccessReviewREST(authz)},
		&handlers.CreateOnly{Info: accessreviews.SelfSubjectAccessReviewInfo(), Creater: accessreviews.NewSelfSubjectAccessReviewREST(authz)},
		&handlers.CreateOnly{Info: accessreviews.SelfSubjectRulesReviewInfo(), Creater: accessreviews.NewSelfSubjectRulesReviewREST(rules)},
		&handlers.CreateOnly{Info: accessreviews.SubjectAccessReviewInfo(), Creater: accessreviews.NewSubjectAccessReviewREST(authz)},
	)
}

// ruleResolvers are the rule resolvers of the configured modes, in order,
// as kube builds them beside its authorizers: system:masters is not one
// (its members see what RBAC grants them), AlwaysDeny lists nothing.
func (s *Server) ruleResolvers() authorizer.RuleResolvers {
	modes := s.cfg.AuthorizationModes
	if len(modes) == 0 {
		modes = DefaultAuthorizationModes
	}
	var out authorizer.RuleResolvers
	rbacAdded := false
	for _, m := range modes {
		switch m {
		case authorizer.ModeAlwaysAllow:
			out = append(out, authorizer.AlwaysAllowRules)
		case authorizer.ModeNode:
			out = append(out, nodeRules)
		case authorizer.ModeRBAC:
			if !rbacAdded && s.authorization.rbac != nil {
				rbacAdded = true
				z := s.authorization.rbac
				out = append(out, authorizer.RuleResolverFunc(func(_ context.Context, u *user.Info, ns string) ([]rbacv1.PolicyRule, bool, error) {
					rules, err := z.RulesFor(u, ns)
					return rules, false, err
				}))
			}
		}
	}
	return out
}

// errNodeRules is the Node authorizer's answer to a rules review of a
// node, kube's: what it grants depends on the objects tied to the node.
var errNodeRules = errors.New("node authorizer does not support user rule resolution")

// nodeRules is the Node authorizer as a rule resolver: it cannot list the
// rules of a node identity (incomplete, with kube's error), and grants
// nothing to anyone else.
var nodeRules = authorizer.RuleResolverFunc(func(_ context.Context, u *user.Info, _ string) ([]rbacv1.PolicyRule, bool, error) {
	if u != nil && strings.HasPrefix(u.Name, "system:node:") && len(u.Name) > len("system:node:") && hasGroup(u, "system:nodes") {
		return nil, true, errNodeRules
	}
	return nil, false, nil
})

func hasGroup(u *user.Info, group string) bool {
	for _, g := range u.Groups {
		if g == group {
			return true
		}
	}
	return false
}
