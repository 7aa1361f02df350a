// Package authenticator finds the user behind a request, as kube-apiserver's
// authentication does: small authenticators of one kind each (client
// certificates, bearer tokens of several kinds, anonymous), combined into a
// union where the first success wins, every authenticated user getting
// system:authenticated.
//
// An authenticator answers (response, true, nil) when the credentials are
// its kind and valid, (nil, false, nil) when they are not its kind (the
// next one tries), and an error when they are its kind but invalid. The
// error says why for the server log; the client only ever sees kube's 401.
// Errors and logs never carry the credential itself.
package authenticator

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/corekube/corekube/auth/user"
)

// Response is a successful authentication.
type Response struct {
	User *user.Info
	// Audiences are the audiences the credential was valid for (tokens);
	// empty for credentials without audiences (certificates).
	Audiences []string
}

// Request authenticates an HTTP request.
type Request interface {
	AuthenticateRequest(r *http.Request) (*Response, bool, error)
}

// Token authenticates a bearer token.
type Token interface {
	AuthenticateToken(ctx context.Context, token string) (*Response, bool, error)
}

// RequestFunc is a Request authenticator of one function.
type RequestFunc func(r *http.Request) (*Response, bool, error)

// AuthenticateRequest calls f.
func (f RequestFunc) AuthenticateRequest(r *http.Request) (*Response, bool, error) { return f(r) }

// TokenFunc is a Token authenticator of one function.
type TokenFunc func(ctx context.Context, token string) (*Response, bool, error)

// AuthenticateToken calls f.
func (f TokenFunc) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	return f(ctx, token)
}

// Union tries each request authenticator in order: the first that
// authenticates wins; when none does, the errors of those that refused are
// returned together.
type Union []Request

// AuthenticateRequest tries the authenticators in order.
func (u Union) AuthenticateRequest(r *http.Request) (*Response, bool, error) {
	var errs []error
	for _, a := range u {
		resp, ok, err := a.AuthenticateRequest(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return resp, true, nil
		}
	}
	return nil, false, errors.Join(errs...)
}

// UnionToken tries each token authenticator in order, as Union.
type UnionToken []Token

// AuthenticateToken tries the authenticators in order.
func (u UnionToken) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	var errs []error
	for _, a := range u {
		resp, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return resp, true, nil
		}
	}
	return nil, false, errors.Join(errs...)
}

// errInvalidBearer is a malformed Authorization: Bearer header.
var errInvalidBearer = errors.New("invalid bearer token")

// BearerToken authenticates the token of an "Authorization: Bearer" header
// with tokens. A request without one is not its kind. A header that is
// Bearer with an empty token (two spaces) is an error, and so is a token
// none of tokens recognizes, as kube's.
func BearerToken(tokens Token) Request {
	return RequestFunc(func(r *http.Request) (*Response, bool, error) {
		auth := strings.TrimSpace(r.Header.Get("Authorization"))
		if auth == "" {
			return nil, false, nil
		}
		// As kube: the scheme, one space, the token up to the next space.
		parts := strings.SplitN(auth, " ", 3)
		if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") {
			return nil, false, nil
		}
		token := parts[1]
		if token == "" {
			return nil, false, errInvalidBearer
		}
		resp, ok, err := tokens.AuthenticateToken(r.Context(), token)
		if !ok && err == nil {
			// A token no authenticator knows is refused, never taken for
			// no credentials (kube's default "invalid bearer token"): its
			// sender meant to be someone.
			err = errInvalidBearer
		}
		if ok {
			// Nothing after authentication needs the credential: keep it
			// out of handlers, proxies and logs.
			r.Header.Del("Authorization")
		}
		return resp, ok, err
	})
}

// OrAnonymous authenticates with a, and a request a does not authenticate
// and does not refuse as anonymous: an invalid credential is never taken
// for none (kube's fail-on-error union in front of anonymous).
func OrAnonymous(a Request) Request {
	anonymous := Anonymous()
	return RequestFunc(func(r *http.Request) (*Response, bool, error) {
		resp, ok, err := a.AuthenticateRequest(r)
		if err != nil || ok {
			return resp, ok, err
		}
		return anonymous.AuthenticateRequest(r)
	})
}

// Anonymous authenticates every request as system:anonymous in
// system:unauthenticated: the last member of a union, when
// --anonymous-auth is on.
func Anonymous() Request {
	return RequestFunc(func(*http.Request) (*Response, bool, error) {
		return &Response{User: &user.Info{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
	})
}

// WithAuthenticatedGroup adds system:authenticated to the groups of every
// user a authenticates other than the anonymous one (kube's
// AuthenticatedGroupAdder).
func WithAuthenticatedGroup(a Request) Request {
	return RequestFunc(func(r *http.Request) (*Response, bool, error) {
		resp, ok, err := a.AuthenticateRequest(r)
		if err != nil || !ok {
			return resp, ok, err
		}
		u := resp.User
		if u.Name == user.Anonymous || slices.Contains(u.Groups, user.AllAuthenticated) || slices.Contains(u.Groups, user.AllUnauthenticated) {
			return resp, ok, err
		}
		groups := append(slices.Clip(u.Groups), user.AllAuthenticated)
		return &Response{User: &user.Info{Name: u.Name, UID: u.UID, Groups: groups, Extra: u.Extra}, Audiences: resp.Audiences}, true, nil
	})
}
