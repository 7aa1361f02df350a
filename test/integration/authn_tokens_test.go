package integration

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/authenticator/oidc/oidctest"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	"github.com/golang-jwt/jwt/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestTokenAuthenticators: a server of its own, without anonymous
// requests, with a token file and an OIDC issuer (a real HTTPS one) in its
// authentication config. client-go gets in with either kind of token and
// is refused kube's 401 with anything else; who the server takes the user
// for shows in impersonation, which only system:masters may do.
func TestTokenAuthenticators(t *testing.T) {
	iss := oidctest.New(t)
	files := t.TempDir()
	tokenFile := filepath.Join(files, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("static-admin-token,admin,uid-admin,\"system:masters,ops\"\nstatic-dev-token,dev,uid-dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authnConfig := filepath.Join(files, "authentication.yaml")
	config := `apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ` + iss.URL + `
    audiences: [corekube]
    certificateAuthority: |
      ` + strings.ReplaceAll(strings.TrimSpace(iss.CAPEM), "\n", "\n      ") + `
  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
    groups: {claim: groups, prefix: "oidc:"}
`
	if err := os.WriteFile(authnConfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testserver.SyncBuffer{}
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.AnonymousAuth = false
		c.TokenAuthFile = tokenFile
		c.AuthenticationConfigFile = authnConfig
	})

	clientFor := func(token, impersonate string) kubernetes.Interface {
		c := rest.AnonymousClientConfig(s.Config)
		c.BearerToken = token
		c.Impersonate.UserName = impersonate
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	list := func(token, impersonate string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := clientFor(token, impersonate).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err
	}
	unauthorized := func(name, token string) {
		t.Helper()
		err := list(token, "")
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: got %v, want 401", name, err)
			return
		}
		if status := err.(apierrors.APIStatus).Status(); status.Message != "Unauthorized" || status.Reason != metav1.StatusReasonUnauthorized {
			t.Errorf("%s: status %+v", name, status)
		}
	}

	oidcClaims := func() jwt.MapClaims {
		c := iss.Claims("alice", "corekube")
		c["groups"] = []string{"dev"}
		return c
	}
	oidcToken := iss.Sign(t, oidcClaims())

	for name, token := range map[string]string{"static token": "static-admin-token", "OIDC token": oidcToken} {
		if err := list(token, ""); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	unauthorized("no token", "")
	unauthorized("unknown static token", "static-admin-token-not")
	wrongAudience := iss.Claims("alice", "someone-else")
	unauthorized("OIDC token for another audience", iss.Sign(t, wrongAudience))
	expired := oidcClaims()
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	unauthorized("expired OIDC token", iss.Sign(t, expired))
	other := oidctest.New(t)
	unauthorized("token of an issuer not configured", other.Sign(t, other.Claims("alice", "corekube")))
	parts := strings.Split(oidcToken, ".")
	unauthorized("OIDC token with another's signature", parts[0]+"."+parts[1]+"."+strings.Split(iss.Sign(t, iss.Claims("bob", "corekube")), ".")[2])

	// Identity as the server sees it: the static admin is in
	// system:masters and may impersonate; the others may not, and kube's
	// 403 names them.
	if err := list("static-admin-token", "someone"); err != nil {
		t.Errorf("impersonation by the static admin: %v", err)
	}
	for token, want := range map[string]string{
		"static-dev-token": `User "dev" cannot impersonate`,
		oidcToken:          `User "oidc:alice" cannot impersonate`,
	} {
		err := list(token, "someone")
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("impersonation: got %v, want 403 with %q", err, want)
		}
	}

	// Refusals are logged with their reason, never with the credential.
	text := logs.String()
	if !strings.Contains(text, "token has invalid audience") {
		t.Errorf("the log does not say why a token was refused:\n%s", text)
	}
	for _, secret := range []string{"static-admin-token", "static-dev-token", parts[1], parts[2]} {
		if strings.Contains(text, secret) {
			t.Errorf("the server log carries a credential (%.12s...)", secret)
		}
	}
}

// TestTokenAuthenticatorsBadConfig: a token file or authentication config
// that does not load fails the start with the flag and the reason.
func TestTokenAuthenticatorsBadConfig(t *testing.T) {
	files := t.TempDir()
	badTokens := filepath.Join(files, "tokens.csv")
	if err := os.WriteFile(badTokens, []byte("token-only,user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badConfig := filepath.Join(files, "authn.yaml")
	if err := os.WriteFile(badConfig, []byte("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: http://x, audiences: [a]}\n  claimMappings: {username: {claim: sub}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		configure func(*server.Config)
		want      []string
	}{
		{func(c *server.Config) { c.TokenAuthFile = badTokens }, []string{"--token-auth-file", "must have at least 3 columns"}},
		{func(c *server.Config) { c.AuthenticationConfigFile = badConfig }, []string{"--authentication-config", "URL scheme must be https", "prefix is required when claim is set"}},
		{func(c *server.Config) { c.AuthenticationConfigFile = filepath.Join(files, "missing.yaml") }, []string{"--authentication-config", "no such file"}},
	} {
		cfg := server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), UnsafeNoFsync: true, Logger: testserver.Logger()}
		tc.configure(&cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		srv, err := server.Start(ctx, cfg)
		cancel()
		if err == nil {
			srv.Shutdown(context.Background())
			t.Errorf("started with %v", tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
	}
}
