package oidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/authenticator/oidc/oidctest"
	"github.com/corekube/corekube/auth/user"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// clock is time.Now moved by Advance, for the rate limit of fetches.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// config is an issuer of iss for audience "corekube": user name the sub
// claim prefixed "oidc:", groups the groups claim prefixed "oidc:".
func config(iss *oidctest.Issuer) *AuthenticationConfiguration {
	p := "oidc:"
	return &AuthenticationConfiguration{JWT: []JWTAuthenticator{{
		Issuer: Issuer{URL: iss.URL, CertificateAuthority: iss.CAPEM, Audiences: []string{"corekube"}},
		ClaimMappings: ClaimMappings{
			Username: PrefixedClaimOrExpression{Claim: "sub", Prefix: &p},
			Groups:   PrefixedClaimOrExpression{Claim: "groups", Prefix: &p},
		},
	}}}
}

func newAuthenticator(t *testing.T, cfg *AuthenticationConfiguration, c *clock) *Authenticator {
	t.Helper()
	if c == nil {
		c = &clock{}
	}
	a, err := New(context.Background(), cfg, Options{Now: c.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func authenticate(t *testing.T, a *Authenticator, token string) *user.Info {
	t.Helper()
	resp, ok, err := a.AuthenticateToken(context.Background(), token)
	if err != nil || !ok {
		t.Fatalf("got %v, %v; want the token accepted", ok, err)
	}
	return resp.User
}

// refuse checks that token is refused with an error containing want
// (and not the token).
func refuse(t *testing.T, a *Authenticator, token, want string) {
	t.Helper()
	resp, ok, err := a.AuthenticateToken(context.Background(), token)
	if ok || err == nil || resp != nil {
		t.Fatalf("got %+v, %v, %v; want an error", resp, ok, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if sig := token[strings.LastIndex(token, ".")+1:]; strings.Contains(err.Error(), token) || sig != "" && strings.Contains(err.Error(), sig) {
		t.Errorf("the error carries the token: %v", err)
	}
}

func TestValidToken(t *testing.T) {
	iss := oidctest.New(t)
	a := newAuthenticator(t, config(iss), nil)
	claims := iss.Claims("alice", "corekube")
	claims["groups"] = []string{"dev", "ops"}
	u := authenticate(t, a, iss.Sign(t, claims))
	want := &user.Info{Name: "oidc:alice", Groups: []string{"oidc:dev", "oidc:ops"}}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("got %+v, want %+v", u, want)
	}
	if !a.Ready() {
		t.Error("not ready after a token was verified")
	}

	// ES256, and a token without a kid (any key of the set may verify it).
	ec := iss.AddKey(t, "ec-1", "ES256", true)
	iss.UseKey("ec-1")
	a = newAuthenticator(t, config(iss), nil)
	if u := authenticate(t, a, iss.Sign(t, iss.Claims("bob", "corekube"))); u.Name != "oidc:bob" || u.Groups != nil {
		t.Errorf("ES256: %+v", u)
	}
	if u := authenticate(t, a, ec.SignWithoutKID(t, iss.Claims("carol", "corekube"))); u.Name != "oidc:carol" {
		t.Errorf("without kid: %+v", u)
	}
}

func TestNotMine(t *testing.T) {
	iss := oidctest.New(t)
	other := oidctest.New(t)
	a := newAuthenticator(t, config(iss), nil)
	for name, token := range map[string]string{
		"other issuer":      other.Sign(t, other.Claims("alice", "corekube")),
		"not a JWT":         "0123456789abcdef",
		"four parts":        "a.b.c.d",
		"payload not JSON":  "e30." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".sig",
		"payload no issuer": "e30." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`)) + ".sig",
	} {
		if resp, ok, err := a.AuthenticateToken(context.Background(), token); ok || err != nil || resp != nil {
			t.Errorf("%s: got %+v, %v, %v; want not mine", name, resp, ok, err)
		}
	}
}

func TestRefusedTokens(t *testing.T) {
	iss := oidctest.New(t)
	a := newAuthenticator(t, config(iss), nil)
	now := time.Now()
	with := func(changes jwt.MapClaims) string {
		c := iss.Claims("alice", "corekube")
		for k, v := range changes {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return iss.Sign(t, c)
	}
	refuse(t, a, with(jwt.MapClaims{"aud": []string{"someone-else"}}), "token has invalid audience")
	refuse(t, a, with(jwt.MapClaims{"aud": nil}), "token is missing required claim: aud")
	refuse(t, a, with(jwt.MapClaims{"exp": now.Add(-2 * time.Minute).Unix()}), "token is expired")
	refuse(t, a, with(jwt.MapClaims{"exp": nil}), "token is missing required claim: exp")
	refuse(t, a, with(jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}), "token is not valid yet")
	refuse(t, a, with(jwt.MapClaims{"iat": now.Add(time.Hour).Unix()}), "token used before issued")
	refuse(t, a, with(jwt.MapClaims{"sub": nil}), `username: claim "sub" not present`)
	refuse(t, a, with(jwt.MapClaims{"sub": 42}), `username: claim "sub" is not a string`)
	refuse(t, a, with(jwt.MapClaims{"sub": ""}), `username: claim "sub" is empty`)
	refuse(t, a, with(jwt.MapClaims{"groups": []any{"a", 1}}), `groups: claim "groups" holds a value that is not a string`)

	// Within the leeway: accepted.
	authenticate(t, a, with(jwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix(), "nbf": now.Add(10 * time.Second).Unix()}))
	// A single string is one group, as kube.
	if u := authenticate(t, a, with(jwt.MapClaims{"groups": "admins"})); !reflect.DeepEqual(u.Groups, []string{"oidc:admins"}) {
		t.Errorf("groups %v", u.Groups)
	}

	// A signature that does not verify: the payload changed.
	good := with(nil)
	parts := strings.Split(good, ".")
	forged := iss.Claims("mallory", "corekube")
	parts[1] = encodeClaims(t, forged)
	refuse(t, a, strings.Join(parts, "."), "token signature is invalid")

	// A token signed by a key the issuer never published, with the kid of
	// one it did.
	rogue, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, iss.Claims("mallory", "corekube"))
	tok.Header["kid"] = "key-1"
	s, err := tok.SignedString(rogue)
	if err != nil {
		t.Fatal(err)
	}
	refuse(t, a, s, "token signature is invalid")

	// alg none and HMAC (with the public key's bytes as secret) are never
	// accepted.
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, iss.Claims("mallory", "corekube")).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	refuse(t, a, none, `signing algorithm "none" is not accepted`)
	hs, err := jwt.NewWithClaims(jwt.SigningMethodHS256, iss.Claims("mallory", "corekube")).SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	refuse(t, a, hs, `signing algorithm "HS256" is not accepted`)
}

func encodeClaims(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SigningString()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(s, ".")[1]
}

// TestKeyRotation: a token signed by a key not in the cached JWKS makes
// the authenticator fetch it again (at most once per MinRefetchInterval),
// so that the issuer's new key is accepted once published and a key it
// withdrew is no longer.
func TestKeyRotation(t *testing.T) {
	iss := oidctest.New(t)
	c := &clock{}
	a := newAuthenticator(t, config(iss), c)
	authenticate(t, a, iss.Sign(t, iss.Claims("alice", "corekube")))
	fetches := iss.JWKSFetches()

	next := iss.AddKey(t, "key-2", "RS256", false)
	token2 := next.Sign(t, iss.Claims("alice", "corekube"))
	c.Advance(DefaultMinRefetchInterval)
	refuse(t, a, token2, `no key of the issuer's JWKS matches: kid "key-2"`)
	if got := iss.JWKSFetches(); got != fetches+1 {
		t.Fatalf("%d JWKS fetches after an unknown kid, want %d", got, fetches+1)
	}

	// Published now, but the last fetch is too recent: no new fetch yet.
	iss.Publish("key-2")
	refuse(t, a, token2, `kid "key-2"`)
	if got := iss.JWKSFetches(); got != fetches+1 {
		t.Fatalf("%d JWKS fetches, want %d (rate-limited)", got, fetches+1)
	}

	c.Advance(DefaultMinRefetchInterval)
	if u := authenticate(t, a, token2); u.Name != "oidc:alice" {
		t.Errorf("user %+v", u)
	}
	if got := iss.JWKSFetches(); got != fetches+2 {
		t.Errorf("%d JWKS fetches, want %d", got, fetches+2)
	}
	// key-1 was withdrawn by that fetch.
	iss.UseKey("key-1")
	refuse(t, a, iss.Sign(t, iss.Claims("alice", "corekube")), `kid "key-1"`)
}

// TestBackgroundRefresh: keys are fetched again in the background, and
// Close stops it.
func TestBackgroundRefresh(t *testing.T) {
	iss := oidctest.New(t)
	a, err := New(context.Background(), config(iss), Options{RefreshInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for iss.JWKSFetches() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d JWKS fetches in 10s", iss.JWKSFetches())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Close waits for the background goroutine: it must return.
	a.Close()
}

func TestClaimMappingsAndRules(t *testing.T) {
	iss := oidctest.New(t)
	cfg := config(iss)
	empty := ""
	j := &cfg.JWT[0]
	j.Issuer.Audiences = []string{"corekube", "other"}
	j.Issuer.AudienceMatchPolicy = AudienceMatchPolicyMatchAny
	j.ClaimMappings.Username = PrefixedClaimOrExpression{Claim: "email", Prefix: &empty}
	j.ClaimMappings.Groups = PrefixedClaimOrExpression{Claim: "roles", Prefix: &empty}
	j.ClaimMappings.UID = ClaimOrExpression{Claim: "oid"}
	j.ClaimValidationRules = []ClaimValidationRule{{Claim: "hd", RequiredValue: "example.com"}}
	a := newAuthenticator(t, cfg, nil)

	token := func(changes jwt.MapClaims) string {
		c := iss.Claims("12345", "other")
		c["email"] = "alice@example.com"
		c["email_verified"] = true
		c["roles"] = []string{"admin"}
		c["oid"] = "uid-1"
		c["hd"] = "example.com"
		for k, v := range changes {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return iss.Sign(t, c)
	}
	want := &user.Info{Name: "alice@example.com", UID: "uid-1", Groups: []string{"admin"}}
	if u := authenticate(t, a, token(nil)); !reflect.DeepEqual(u, want) {
		t.Errorf("got %+v, want %+v", u, want)
	}
	// As kube: email_verified is checked when present.
	if u := authenticate(t, a, token(jwt.MapClaims{"email_verified": nil})); u.Name != "alice@example.com" {
		t.Errorf("without email_verified: %+v", u)
	}
	refuse(t, a, token(jwt.MapClaims{"email_verified": false}), "email not verified")
	refuse(t, a, token(jwt.MapClaims{"email_verified": "true"}), `"email_verified" is not a boolean`)
	refuse(t, a, token(jwt.MapClaims{"hd": nil}), `required claim: claim "hd" not present`)
	refuse(t, a, token(jwt.MapClaims{"hd": "evil.com"}), "required claim hd value does not match. Got = evil.com, want = example.com")
	refuse(t, a, token(jwt.MapClaims{"oid": nil}), `uid: claim "oid" not present`)
	if u := authenticate(t, a, token(jwt.MapClaims{"roles": nil})); u.Groups != nil {
		t.Errorf("no roles claim: groups %v", u.Groups)
	}
}

func TestDiscovery(t *testing.T) {
	iss := oidctest.New(t)

	// discoveryURL: the document is fetched there; its issuer is still
	// checked against url.
	cfg := config(iss)
	cfg.JWT[0].Issuer.DiscoveryURL = iss.URL + "/.well-known/openid-configuration"
	a := newAuthenticator(t, cfg, nil)
	authenticate(t, a, iss.Sign(t, iss.Claims("alice", "corekube")))

	cfg = config(iss)
	cfg.JWT[0].Issuer.URL = "https://elsewhere.example"
	cfg.JWT[0].Issuer.DiscoveryURL = iss.URL + "/.well-known/openid-configuration"
	a = newAuthenticator(t, cfg, nil)
	c := iss.Claims("alice", "corekube")
	c["iss"] = "https://elsewhere.example"
	refuse(t, a, iss.Sign(t, c), `issuer did not match the issuer returned by provider, expected "https://elsewhere.example" got "`+iss.URL+`"`)

	// Without the issuer's CA, its certificate is not trusted: no keys.
	cfg = config(iss)
	cfg.JWT[0].Issuer.CertificateAuthority = ""
	a = newAuthenticator(t, cfg, nil)
	refuse(t, a, iss.Sign(t, iss.Claims("alice", "corekube")), "certificate signed by unknown authority")
}

// TestLatencyMetric: kube's jwt authenticator latency, by result and the
// issuer URL's hash; tokens of other issuers are not counted.
func TestLatencyMetric(t *testing.T) {
	iss := oidctest.New(t)
	reg := prometheus.NewPedanticRegistry()
	a, err := New(context.Background(), config(iss), Options{Logger: slog.New(slog.DiscardHandler), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	authenticate(t, a, iss.Sign(t, iss.Claims("alice", "corekube")))
	refuse(t, a, iss.Sign(t, iss.Claims("alice", "someone-else")), "aud")
	other := oidctest.New(t)
	if _, ok, err := a.AuthenticateToken(context.Background(), other.Sign(t, other.Claims("bob", "corekube"))); ok || err != nil {
		t.Fatalf("another issuer's token: %v %v", ok, err)
	}
	hash := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(iss.URL)))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || len(families[0].GetMetric()) != 2 {
		t.Fatalf("families %v, want one with a success and a failure series", families)
	}
	f := families[0]
	if f.GetName() != "apiserver_authentication_jwt_authenticator_latency_seconds" ||
		f.GetHelp() != "[ALPHA] Latency of jwt authentication operations in seconds. This is the time spent authenticating a token for cache miss only (i.e. when the token is not found in the cache)." {
		t.Errorf("%s: help %q", f.GetName(), f.GetHelp())
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["jwt_issuer_hash"] != hash || (labels["result"] != "success" && labels["result"] != "failure") || m.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("series %v count %d", labels, m.GetHistogram().GetSampleCount())
		}
	}
}
