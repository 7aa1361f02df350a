package agent

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeletAPIAuth: the kubelet API answers only authenticated callers
// the API server authorizes, as the kubelet with webhook authentication
// and authorization: anonymous callers and certificates of another CA get
// 401, an authenticated user without RBAC 403 (by client certificate and
// by ServiceAccount token through a TokenReview), nodes/metrics opens
// /metrics but not /debug/pprof/ (nodes/proxy) or container logs; /healthz
// is open to all. Answers are cached as the kubelet's: a refusal for
// AuthorizationUnauthorizedTTL (shortened here), an allowance longer.
func TestKubeletAPIAuth(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	e := &env{t: t, client: s.Client}
	cfg := fastConfig(1)
	cfg.AuthorizationUnauthorizedTTL = time.Second
	stop := e.startAgent(s.Config, cfg)
	defer stop()
	e.waitNodeReady("node-1")
	base := e.kubelet().url
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	get := func(c *http.Client, token, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	anonymous, err := testserver.KubeletHTTPClient("")
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := testserver.KubeletHTTPClient("nobody")
	if err != nil {
		t.Fatal(err)
	}
	// A certificate of another CA proves nothing.
	otherCA, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := otherCA.Client("system:admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, //nolint:gosec // the agent's certificate is self-signed
	}}}

	paths := []string{"/metrics", "/debug/pprof/", "/containerLogs/default/nope/main", "/stats/summary"}
	for _, path := range paths {
		if code, body := get(anonymous, "", path); code != http.StatusUnauthorized || body != "Unauthorized" {
			t.Errorf("anonymous GET %s: %d %q, want 401 Unauthorized", path, code, body)
		}
		if code, _ := get(anonymous, "not-a-token", path); code != http.StatusUnauthorized {
			t.Errorf("bad token GET %s: %d, want 401", path, code)
		}
		if code, _ := get(foreign, "", path); code != http.StatusUnauthorized {
			t.Errorf("foreign certificate GET %s: %d, want 401", path, code)
		}
		if code, body := get(nobody, "", path); code != http.StatusForbidden || !strings.HasPrefix(body, "Forbidden (user=nobody, verb=get, resource=nodes, subresource=") {
			t.Errorf("unprivileged GET %s: %d %q, want 403", path, code, body)
		}
	}
	for _, c := range []*http.Client{anonymous, nobody, foreign} {
		if code, body := get(c, "", "/healthz"); code != http.StatusOK || body != "ok" {
			t.Errorf("/healthz: %d %q, want 200 ok", code, body)
		}
	}
	if code, body := get(nobody, "", "/debug/pprof/"); !strings.Contains(body, "subresource=proxy") {
		t.Errorf("/debug/pprof/: %d %q, want nodes/proxy asked", code, body)
	}

	// A ServiceAccount's token, through a TokenReview; then RBAC's
	// nodes/metrics (what Prometheus is given) opens /metrics alone.
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper"}}
	if _, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "scraper", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	if code, body := get(anonymous, token, "/metrics"); code != http.StatusForbidden || !strings.Contains(body, "user=system:serviceaccount:default:scraper") {
		t.Errorf("token without RBAC: %d %q, want 403", code, body)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-scraper"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes/metrics"}},
	}}
	if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubelet-scraper"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: "default"}}}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.poll(10*time.Second, "nodes/metrics granted", func(context.Context) (bool, error) {
		code, _ := get(anonymous, token, "/metrics")
		return code == http.StatusOK, nil
	})
	if code, body := get(anonymous, token, "/metrics"); code != http.StatusOK || !strings.Contains(body, "kubelet_") {
		t.Errorf("token with nodes/metrics: %d %.100q", code, body)
	}
	for _, path := range []string{"/debug/pprof/", "/containerLogs/default/nope/main"} {
		if code, _ := get(anonymous, token, path); code != http.StatusForbidden {
			t.Errorf("token with nodes/metrics GET %s: %d, want 403", path, code)
		}
	}

	// Repeated scrapes cost the API server at most one more review of
	// each kind: the answers are cached.
	reviews := func() (tokens, accesses float64) {
		fs := metricstest.Scrape(t, testserver.HTTPClient(), s.URL()+"/metrics")
		tokens, _ = fs.Value("apiserver_request_total", "resource", "tokenreviews")
		accesses, _ = fs.Value("apiserver_request_total", "resource", "subjectaccessreviews")
		return tokens, accesses
	}
	tokens0, accesses0 := reviews()
	for range 20 {
		if code, _ := get(anonymous, token, "/metrics"); code != http.StatusOK {
			t.Fatalf("cached scrape: %d", code)
		}
	}
	if tokens, accesses := reviews(); tokens-tokens0 > 1 || accesses-accesses0 > 1 {
		t.Errorf("20 scrapes made %v TokenReviews and %v SubjectAccessReviews, want at most 1 each", tokens-tokens0, accesses-accesses0)
	}
}
