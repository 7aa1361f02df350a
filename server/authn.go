package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/server/audit"
	"github.com/corekube/corekube/storage/trace"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errUnauthorized is kube's 401: nothing about why, which goes to the log.
var errUnauthorized = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusUnauthorized, Reason: metav1.StatusReasonUnauthorized,
	Message: "Unauthorized",
}}

// newLoopbackToken returns a random bearer token for the server's own
// clients (the in-process controllers and node agents of `up`), as kube's
// loopback client token: it lives only in memory.
func newLoopbackToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("loopback token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// buildAuthenticator is kube's authenticator union for cfg: client
// certificates, then bearer tokens (the loopback token, static tokens,
// ServiceAccount tokens, OIDC issuers), then anonymous when allowed.
func (s *Server) buildAuthenticator() (authenticator.Request, error) {
	loopbackUser := &user.Info{Name: user.APIServer, UID: string(s.loopbackUID), Groups: []string{user.SystemPrivilegedGroup}}
	tokens := authenticator.UnionToken{
		authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
			if token != s.loopbackToken {
				return nil, false, nil
			}
			return &authenticator.Response{User: loopbackUser}, true, nil
		}),
	}
	static, oidcTokens, err := s.tokenAuthenticators()
	if err != nil {
		return nil, err
	}
	if static != nil {
		tokens = append(tokens, static)
	}
	if s.saTokens != nil {
		tokens = append(tokens, s.saTokens.validator)
	}
	if oidcTokens != nil {
		// An OIDC token's verification is remembered for 10 s, as kube's
		// token cache does (ServiceAccount tokens have a cache of their
		// own that re-checks the ServiceAccount and pod on every use).
		cacheMetrics, err := authenticator.NewTokenCacheMetrics(s.metrics)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, authenticator.NewCachedToken(oidcTokens, 10*time.Second, 4096).WithMetrics(cacheMetrics))
	}
	union := authenticator.Union{}
	if s.tls != nil {
		union = append(union, s.tls.x509Authenticator())
	}
	union = append(union, authenticator.BearerToken(tokens))
	var authn authenticator.Request = authenticator.WithAuthenticatedGroup(union)
	if s.cfg.AnonymousAuth {
		// Anonymous comes after system:authenticated is added, so that it
		// stays only in system:unauthenticated.
		authn = authenticator.OrAnonymous(authn)
	}
	// TokenReviews run every token authenticator, without anonymous.
	s.tokenReviewAuthn = authenticator.WithAuthenticatedGroup(authenticator.BearerToken(tokens))
	return authn, nil
}

// withAuthentication puts the user behind each request in its context
// (user.From) or answers kube's 401. Why a request was refused goes to the
// log at debug level (never its credentials).
func (s *Server) withAuthentication(authn authenticator.Request) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := monotonic()
			resp, ok, err := authn.AuthenticateRequest(r)
			s.authMetrics.authenticated(resp, ok, err, monotonic()-start)
			if err != nil || !ok {
				if err != nil {
					s.log.Info("unable to authenticate the request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
				}
				s.logFailedAuthentication(w, r)
				handlers.WriteError(w, r, errUnauthorized)
				return
			}
			tr := trace.From(r.Context())
			tr.SetUser(&resp.User.Name)
			tr.Mark(trace.Authenticated)
			next.ServeHTTP(w, r.WithContext(user.WithUser(r.Context(), resp.User)))
		})
	}
}

// Impersonation headers, as kube's.
const (
	impersonateUserHeader        = authenticationv1.ImpersonateUserHeader
	impersonateGroupHeader       = authenticationv1.ImpersonateGroupHeader
	impersonateUIDHeader         = authenticationv1.ImpersonateUIDHeader
	impersonateExtraHeaderPrefix = authenticationv1.ImpersonateUserExtraHeaderPrefix
)

// withImpersonation acts on the Impersonate-* headers: the request goes on
// as the user they name, when its authenticated user may impersonate each
// of the user, groups, uid and extras (the impersonate verb,
// authorizeImpersonation).
func (s *Server) withImpersonation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target, err := impersonationTarget(r.Header)
		if err != nil {
			handlers.WriteError(w, r, apierrors.NewInternalError(err))
			return
		}
		if target == nil {
			next.ServeHTTP(w, r)
			return
		}
		requester, _ := user.From(r.Context())
		if err := s.authorizeImpersonation(r.Context(), requester, r.Header); err != nil {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			handlers.WriteError(w, r, err)
			return
		}
		for k := range r.Header {
			if k == impersonateUserHeader || k == impersonateGroupHeader || k == impersonateUIDHeader || strings.HasPrefix(k, impersonateExtraHeaderPrefix) {
				r.Header.Del(k)
			}
		}
		audit.LogImpersonatedUser(r.Context(), target)
		next.ServeHTTP(w, r.WithContext(user.WithUser(r.Context(), target)))
	})
}

// impersonationTarget reads the user the Impersonate-* headers name (nil
// when there are none), completed as kube completes it: a ServiceAccount's
// groups when none are named, system:authenticated for everyone but
// system:anonymous (who gets system:unauthenticated).
func impersonationTarget(h http.Header) (*user.Info, error) {
	name := h.Get(impersonateUserHeader)
	groups := h.Values(impersonateGroupHeader)
	uid := h.Get(impersonateUIDHeader)
	var extra map[string][]string
	for k, vs := range h {
		if !strings.HasPrefix(k, impersonateExtraHeaderPrefix) {
			continue
		}
		key, err := url.PathUnescape(strings.ToLower(k[len(impersonateExtraHeaderPrefix):]))
		if err != nil {
			return nil, fmt.Errorf("impersonation extra key %q: %w", k, err)
		}
		if extra == nil {
			extra = map[string][]string{}
		}
		extra[key] = append(extra[key], vs...)
	}
	if name == "" {
		switch {
		case len(groups) > 0:
			return nil, fmt.Errorf("requested %v without impersonating a user", groups)
		case extra != nil:
			return nil, fmt.Errorf("requested %v without impersonating a user", extra)
		case uid != "":
			return nil, fmt.Errorf("requested uid %q without impersonating a user", uid)
		}
		return nil, nil
	}
	u := &user.Info{Name: name, UID: uid, Groups: groups, Extra: extra}
	if ns, _, ok := strings.Cut(strings.TrimPrefix(name, user.ServiceAccountUsernamePrefix), ":"); ok && strings.HasPrefix(name, user.ServiceAccountUsernamePrefix) && len(groups) == 0 {
		u.Groups = []string{user.ServiceAccountsGroup, user.ServiceAccountGroupPrefix + ns}
	}
	switch {
	case name == user.Anonymous && !u.InGroup(user.AllUnauthenticated):
		u.Groups = append(u.Groups, user.AllUnauthenticated)
	case name != user.Anonymous && !u.InGroup(user.AllAuthenticated):
		u.Groups = append(u.Groups, user.AllAuthenticated)
	}
	return u, nil
}
