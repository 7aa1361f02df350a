package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
)

// impersonationChecks are the authorizations an Impersonate-* request
// needs, as kube's buildImpersonationRequests: the user (a ServiceAccount
// in its namespace, or a user), each group, each extra value (resource
// userextras, subresource its key), the uid; all with verb impersonate.
func impersonationChecks(requester *user.Info, h http.Header) []authorizer.Attributes {
	base := authorizer.Attributes{User: requester, Verb: "impersonate", APIVersion: "v1", ResourceRequest: true}
	var out []authorizer.Attributes
	if name := h.Get(impersonateUserHeader); name != "" {
		a := base
		if rest, ok := strings.CutPrefix(name, user.ServiceAccountUsernamePrefix); ok {
			if ns, sa, ok := strings.Cut(rest, ":"); ok && ns != "" && sa != "" && !strings.Contains(sa, ":") {
				a.Resource, a.Namespace, a.Name = "serviceaccounts", ns, sa
			}
		}
		if a.Resource == "" {
			a.Resource, a.Name = "users", name
		}
		out = append(out, a)
	}
	for _, g := range h.Values(impersonateGroupHeader) {
		a := base
		a.Resource, a.Name = "groups", g
		out = append(out, a)
	}
	for k, vs := range h {
		if !strings.HasPrefix(k, impersonateExtraHeaderPrefix) {
			continue
		}
		key, err := url.PathUnescape(strings.ToLower(k[len(impersonateExtraHeaderPrefix):]))
		if err != nil {
			continue // impersonationTarget has refused it already
		}
		for _, v := range vs {
			a := base
			a.APIGroup, a.Resource, a.Subresource, a.Name = "authentication.k8s.io", "userextras", key, v
			out = append(out, a)
		}
	}
	if uid := h.Get(impersonateUIDHeader); uid != "" {
		a := base
		a.APIGroup, a.Resource, a.Name = "authentication.k8s.io", "uids", uid
		out = append(out, a)
	}
	return out
}

// authorizeImpersonation answers kube's 403 for the first impersonation
// the requester may not do, nil when all are allowed.
func (s *Server) authorizeImpersonation(ctx context.Context, requester *user.Info, h http.Header) error {
	for _, a := range impersonationChecks(requester, h) {
		d, reason, err := s.authorization.authz.Authorize(ctx, a)
		if err != nil || d != authorizer.DecisionAllow {
			// kube answers 403 here even when the authorizer failed.
			return forbidden(a, reason)
		}
	}
	return nil
}
