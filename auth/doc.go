// Package auth is the home of who a request is on behalf of and whether it
// may do what it asks: its subpackages are the request's user (user), the
// authenticators that find it (authenticator and its kinds), the PKI that
// issues the certificates they check (pki) and the ServiceAccount tokens
// (serviceaccount).
//
// The request's identity lives in its context in one place, user.From, so
// that authorization, admission and audit read the same value.
package auth
