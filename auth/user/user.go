// Package user is the identity a request acts as: name, uid, groups and
// extra, as kube's user.Info, and the one place a request's context carries
// it (WithUser, From). Authentication puts it there; authorization,
// admission and audit read it from there.
package user

import (
	"context"
	"slices"
)

// Well-known users and groups, as kube names them.
const (
	// Anonymous is the user of a request without credentials.
	Anonymous = "system:anonymous"
	// APIServer is the user of the API server's own loopback requests.
	APIServer = "system:apiserver"

	// AllAuthenticated is the group of every authenticated user.
	AllAuthenticated = "system:authenticated"
	// AllUnauthenticated is the group of the anonymous user.
	AllUnauthenticated = "system:unauthenticated"
	// SystemPrivilegedGroup may do anything (kube's system:masters).
	SystemPrivilegedGroup = "system:masters"
	// NodesGroup is the group of node agents' identities.
	NodesGroup = "system:nodes"
	// ServiceAccountsGroup is the group of every ServiceAccount.
	ServiceAccountsGroup = "system:serviceaccounts"
	// ServiceAccountUsernamePrefix starts every ServiceAccount's user name:
	// system:serviceaccount:NAMESPACE:NAME.
	ServiceAccountUsernamePrefix = "system:serviceaccount:"
	// ServiceAccountGroupPrefix starts the group of a namespace's
	// ServiceAccounts: system:serviceaccounts:NAMESPACE.
	ServiceAccountGroupPrefix = "system:serviceaccounts:"
	// NodeUsernamePrefix starts every node's user name: system:node:NAME.
	NodeUsernamePrefix = "system:node:"
)

// Info is an authenticated (or anonymous) identity. It is immutable once
// in a request's context: code that needs another identity builds a new
// Info.
type Info struct {
	Name   string
	UID    string
	Groups []string
	// Extra is what the authenticator knows besides (a ServiceAccount
	// token's pod name and uid, its credential id); keys are lower case.
	Extra map[string][]string
}

// InGroup reports whether u is in group.
func (u *Info) InGroup(group string) bool {
	return u != nil && slices.Contains(u.Groups, group)
}

// IsPrivileged reports whether u is in system:masters, which every
// authorizer allows everything.
func (u *Info) IsPrivileged() bool { return u.InGroup(SystemPrivilegedGroup) }

type contextKey struct{}

// WithUser returns ctx carrying u as the request's user.
func WithUser(ctx context.Context, u *Info) context.Context {
	return context.WithValue(ctx, contextKey{}, u)
}

// From returns the user ctx carries, and whether it carries one.
func From(ctx context.Context) (*Info, bool) {
	u, ok := ctx.Value(contextKey{}).(*Info)
	return u, ok && u != nil
}
