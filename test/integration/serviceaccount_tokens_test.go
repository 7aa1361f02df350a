package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const defaultIssuer = "https://kubernetes.default.svc.cluster.local"

// asToken returns a clientset that authenticates with token alone.
func asToken(t testing.TB, base *rest.Config, token string) kubernetes.Interface {
	t.Helper()
	c := rest.AnonymousClientConfig(base)
	c.BearerToken = token
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// whoami returns who the server takes token for, or the error.
func whoami(t testing.TB, token string) (authenticationv1.UserInfo, error) {
	t.Helper()
	r, err := asToken(t, cfg, token).AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

func createSA(t testing.TB, ns, name string) *v1.ServiceAccount {
	t.Helper()
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(context.Background(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

func createToken(t testing.TB, ns, sa string, spec authenticationv1.TokenRequestSpec) *authenticationv1.TokenRequest {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token for %s/%s: %v", ns, sa, err)
	}
	return tr
}

// refusedAs401 polls until token is refused with kube's 401 (the watch
// cache learns of a deletion a moment after it).
func refusedAs401(t testing.TB, token, what string) {
	t.Helper()
	eventually(t, 10*time.Second, what, func(context.Context) (bool, error) {
		_, err := whoami(t, token)
		return apierrors.IsUnauthorized(err), nil
	})
	_, err := whoami(t, token)
	checkStatusErr(t, err, 401, metav1.StatusReasonUnauthorized, "Unauthorized")
}

func tokenReview(t testing.TB, token string, audiences ...string) authenticationv1.TokenReviewStatus {
	t.Helper()
	r, err := cs.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// warningRecorder keeps the Warning headers client-go receives.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warningRecorder) messages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// TestServiceAccountToken: a TokenRequest answers a token that
// authenticates as the ServiceAccount (bearer, TokenReview), with kube's
// defaults, until the ServiceAccount goes.
func TestServiceAccountToken(t *testing.T) {
	ns := newNamespace(t)
	sa := createSA(t, ns, "builder")
	before := time.Now().Truncate(time.Second)
	tr := createToken(t, ns, "builder", authenticationv1.TokenRequestSpec{})
	if tr.Name != "builder" || tr.Namespace != ns || tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != 3600 ||
		!slices.Equal(tr.Spec.Audiences, []string{defaultIssuer}) || tr.Status.Token == "" {
		t.Fatalf("token request answered %+v", tr)
	}
	if exp := tr.Status.ExpirationTimestamp.Time; exp.Before(before.Add(time.Hour)) || exp.After(time.Now().Add(time.Hour)) {
		t.Errorf("expirationTimestamp %v, want an hour from now", exp)
	}

	u, err := whoami(t, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	if u.Username != "system:serviceaccount:"+ns+":builder" || u.UID != string(sa.UID) || !slices.Equal(u.Groups, wantGroups) ||
		len(u.Extra["authentication.kubernetes.io/credential-id"]) != 1 || !strings.HasPrefix(u.Extra["authentication.kubernetes.io/credential-id"][0], "JTI=") {
		t.Errorf("whoami: %+v", u)
	}
	// The token works for the API too: as the ServiceAccount, which RBAC
	// refuses until a binding grants it something.
	saClient := asToken(t, cfg, tr.Status.Token)
	_, err = saClient.CoreV1().ServiceAccounts(ns).Get(context.Background(), "builder", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:`+ns+`:builder" cannot get resource "serviceaccounts"`) {
		t.Errorf("GET with the token before a binding: %v, want RBAC's 403", err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "builder-view"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "builder"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	untilNoError(t, "GET with the token once bound to view", func() error {
		_, err := saClient.CoreV1().ServiceAccounts(ns).Get(context.Background(), "builder", metav1.GetOptions{})
		return err
	})

	st := tokenReview(t, tr.Status.Token)
	if !st.Authenticated || st.User.Username != u.Username || !slices.Equal(st.Audiences, []string{defaultIssuer}) || st.Error != "" {
		t.Errorf("token review: %+v", st)
	}
	st = tokenReview(t, tr.Status.Token, "vault")
	if st.Authenticated || st.User.Username != "" || !strings.Contains(st.Error, `token audiences ["https://kubernetes.default.svc.cluster.local"] is invalid for the target audiences ["vault"]`) {
		t.Errorf("token review for another audience: %+v", st)
	}

	// A token for another audience is refused by the API, accepted by a
	// review for that audience.
	vault := createToken(t, ns, "builder", authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}, ExpirationSeconds: ptr(int64(600))})
	if _, err := whoami(t, vault.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token for vault used on the API: %v, want 401", err)
	}
	if st := tokenReview(t, vault.Status.Token, "vault", "other"); !st.Authenticated || !slices.Equal(st.Audiences, []string{"vault"}) {
		t.Errorf("token review for vault: %+v", st)
	}

	// Deleting the ServiceAccount revokes its tokens; a new one of the
	// same name is another account.
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(context.Background(), "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedAs401(t, tr.Status.Token, "the deleted ServiceAccount's token to be refused")
	createSA(t, ns, "builder")
	if _, err := whoami(t, tr.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Errorf("the token of a ServiceAccount deleted and recreated: %v, want 401", err)
	}
	if st := tokenReview(t, tr.Status.Token); st.Authenticated || !strings.Contains(st.Error, "does not match claim") {
		t.Errorf("token review of the old ServiceAccount's token: %+v", st)
	}
}

// TestServiceAccountTokenBoundToPod: a token bound to a pod carries it
// (user extra) and dies with it.
func TestServiceAccountTokenBoundToPod(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createSA(t, ns, "runner")
	pod := newPod("web", nil)
	pod.Spec.ServiceAccountName = "runner"
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := func(ref authenticationv1.BoundObjectReference) error {
		_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "runner", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &ref}}, metav1.CreateOptions{})
		return err
	}
	checkStatusErr(t, bound(authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "0000"}), 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on Pod "web": the UID in the bound object reference (0000) does not match the UID in record. The object might have been deleted and then recreated`)
	checkStatusErr(t, bound(authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "nope"}), 404, metav1.StatusReasonNotFound, `pods "nope" not found`)
	checkStatusErr(t, bound(authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "s"}), 400, metav1.StatusReasonBadRequest,
		"cannot bind token to object of type /v1, Kind=Secret")
	createSA(t, ns, "other")
	_, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "other", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web"}}}, metav1.CreateOptions{})
	checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, `cannot bind token for serviceaccount "other" to pod running with different serviceaccount name.`)

	tr := createToken(t, ns, "runner", authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: pod.UID}})
	u, err := whoami(t, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.Extra["authentication.kubernetes.io/pod-name"], []string{"web"}) ||
		!slices.Equal(u.Extra["authentication.kubernetes.io/pod-uid"], []string{string(pod.UID)}) {
		t.Errorf("extra %v", u.Extra)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	refusedAs401(t, tr.Status.Token, "the deleted pod's token to be refused")
	if st := tokenReview(t, tr.Status.Token); st.Authenticated || st.Error != "service account token has been invalidated" {
		t.Errorf("token review of the deleted pod's token: %+v", st)
	}
}

// TestTokenRequestErrors: kube's answers to TokenRequests it refuses.
func TestTokenRequestErrors(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createSA(t, ns, "builder")
	create := func(name string, tr *authenticationv1.TokenRequest) error {
		_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		return err
	}
	checkStatusErr(t, create("nope", &authenticationv1.TokenRequest{}), 404, metav1.StatusReasonNotFound, `serviceaccounts "nope" not found`)
	st := checkStatusErr(t, create("builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(60))}}),
		422, metav1.StatusReasonInvalid, `TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes`)
	checkCauses(t, st, map[string]metav1.CauseType{"spec.expirationSeconds": metav1.CauseTypeFieldValueInvalid})
	checkStatusErr(t, create("builder", &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "other"}}), 422, metav1.StatusReasonInvalid,
		`TokenRequest.authentication.k8s.io "builder" is invalid: metadata.name: Invalid value: "other": must match the service account name if specified`)

	// Rejected credentials are kube's 401, whatever was wrong.
	tr := createToken(t, ns, "builder", authenticationv1.TokenRequestSpec{})
	parts := strings.Split(tr.Status.Token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(payload), `"name":"builder"`, `"name":"admin00"`, 1)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
	for name, token := range map[string]string{"tampered": tampered, "not a JWT": "abcdef", "unsigned": parts[0] + "." + parts[1] + "."} {
		resp := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods", nil, "Authorization", "Bearer "+token)
		if resp.Code != 401 || !strings.Contains(string(resp.Body), `"reason":"Unauthorized"`) || strings.Contains(string(resp.Body), "signature") {
			t.Errorf("%s token: %d %s", name, resp.Code, resp.Body)
		}
	}
}

// TestTokenRequestMaxExpiration: --service-account-max-token-expiration
// shortens what is asked for.
func TestTokenRequestMaxExpiration(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.ServiceAccountMaxTokenExpiration = 20 * time.Minute })
	ctx := context.Background()
	if _, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "short"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warnings := &warningRecorder{}
	c := rest.CopyConfig(s.Config)
	c.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "short", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"requested expiration of 3600 seconds shortened to 1200 seconds"}; !slices.Equal(warnings.messages(), want) {
		t.Errorf("warnings %q, want %q", warnings.messages(), want)
	}
	if *tr.Spec.ExpirationSeconds != 1200 || time.Until(tr.Status.ExpirationTimestamp.Time) > 20*time.Minute {
		t.Errorf("expiration %d %v, want capped at 20m", *tr.Spec.ExpirationSeconds, tr.Status.ExpirationTimestamp)
	}
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tr.Status.Token, &claims); err != nil {
		t.Fatal(err)
	}
	if d := claims.ExpiresAt.Sub(claims.IssuedAt.Time); d != 20*time.Minute {
		t.Errorf("token lives %v, want 20m", d)
	}
}

// TestServiceAccountIssuerDiscovery: the discovery documents have kube's
// shapes, and the JWKS verifies the tokens as another system would.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	resp := doRaw(t, "GET", "/.well-known/openid-configuration", nil)
	if resp.Code != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("openid-configuration: %d %v %s", resp.Code, resp.Header, resp.Body)
	}
	want := `{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://` + srv.Addr().String() +
		`/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}`
	if string(resp.Body) != want {
		t.Errorf("openid-configuration\n got  %s\n want %s", resp.Body, want)
	}
	resp = doRaw(t, "GET", "/openid/v1/jwks", nil)
	if resp.Code != 200 || resp.Header.Get("Content-Type") != "application/jwk-set+json" || resp.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("jwks: %d %v %s", resp.Code, resp.Header, resp.Body)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(resp.Body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s: %v", resp.Body, err)
	}
	k := set.Keys[0]
	// The server without a key file signs with an ECDSA P-256 key
	// (ES256), published as go-jose writes an EC JWK.
	if len(k) != 7 || k["use"] != "sig" || k["kty"] != "EC" || k["crv"] != "P-256" || k["alg"] != "ES256" || k["kid"] == "" {
		t.Errorf("jwk %v", k)
	}
	x, errX := base64.RawURLEncoding.DecodeString(k["x"])
	y, errY := base64.RawURLEncoding.DecodeString(k["y"])
	if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
		t.Fatalf("jwk x %q y %q: %v %v", k["x"], k["y"], errX, errY)
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}

	ns := newNamespace(t)
	createSA(t, ns, "relying")
	tr := createToken(t, ns, "relying", authenticationv1.TokenRequestSpec{Audiences: []string{"sts.example.com"}, ExpirationSeconds: ptr(int64(600))})
	var claims jwt.RegisteredClaims
	tok, err := jwt.ParseWithClaims(tr.Status.Token, &claims, func(tok *jwt.Token) (any, error) {
		if tok.Header["kid"] != k["kid"] {
			t.Errorf("token kid %v, JWKS kid %s", tok.Header["kid"], k["kid"])
		}
		return pub, nil
	}, jwt.WithIssuer(defaultIssuer), jwt.WithAudience("sts.example.com"), jwt.WithValidMethods([]string{"ES256"}))
	if err != nil || !tok.Valid || claims.Subject != "system:serviceaccount:"+ns+":relying" {
		t.Errorf("verifying the token with the JWKS: %v %+v", err, claims)
	}
	if resp := doRaw(t, "POST", "/openid/v1/jwks", []byte("{}")); resp.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST jwks: %d", resp.Code)
	}
}

// TestAuthenticationReviews: tokenreviews and selfsubjectreviews are
// create-only resources, discovered as kube lists them.
func TestAuthenticationReviews(t *testing.T) {
	resp := doRaw(t, "GET", "/apis/authentication.k8s.io/v1", nil)
	want := `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"authentication.k8s.io/v1","resources":[` +
		`{"name":"selfsubjectreviews","singularName":"selfsubjectreview","namespaced":false,"kind":"SelfSubjectReview","verbs":["create"]},` +
		`{"name":"tokenreviews","singularName":"tokenreview","namespaced":false,"kind":"TokenReview","verbs":["create"]}]}`
	if resp.Code != 200 || strings.TrimSpace(string(resp.Body)) != want {
		t.Errorf("discovery of authentication.k8s.io/v1: %d\n got  %s\n want %s", resp.Code, resp.Body, want)
	}
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/apis/authentication.k8s.io/v1/tokenreviews", 405},
		{"DELETE", "/apis/authentication.k8s.io/v1/selfsubjectreviews", 405},
		{"GET", "/apis/authentication.k8s.io/v1/tokenreviews/x", 404},
		{"POST", "/apis/authentication.k8s.io/v1/namespaces/default/tokenreviews", 404},
	} {
		if resp := doRaw(t, tc.method, tc.path, nil); resp.Code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, resp.Code, resp.Body, tc.code)
		}
	}
	_, err := cs.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "token is required for TokenReview in authentication")
	if st := tokenReview(t, "garbage"); st.Authenticated || st.Error != "invalid bearer token" {
		t.Errorf("review of an unknown token: %+v", st)
	}

	// The raw answer of a review is kube's: 201, the kind, the status.
	resp = doRaw(t, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	var ssr authenticationv1.SelfSubjectReview
	if err := json.Unmarshal(resp.Body, &ssr); err != nil || resp.Code != 201 || ssr.Kind != "SelfSubjectReview" || ssr.APIVersion != "authentication.k8s.io/v1" || ssr.CreationTimestamp.IsZero() {
		t.Errorf("selfsubjectreview: %d %s", resp.Code, resp.Body)
	}

	// The OpenAPI documents describe them, create only.
	doc := doRaw(t, "GET", "/openapi/v3/apis/authentication.k8s.io/v1", nil)
	var v3 struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc.Body, &v3); err != nil || doc.Code != 200 {
		t.Fatalf("openapi v3: %d %v", doc.Code, err)
	}
	// Two collections to POST to, and the discovery document.
	if len(v3.Paths) != 3 {
		t.Errorf("openapi has %d paths for authentication.k8s.io/v1, want 3", len(v3.Paths))
	}
	for _, p := range []string{"/apis/authentication.k8s.io/v1/tokenreviews", "/apis/authentication.k8s.io/v1/selfsubjectreviews"} {
		ops := v3.Paths[p]
		if ops["post"] == nil || ops["get"] != nil || ops["delete"] != nil {
			t.Errorf("openapi path %s: %d operations, want POST alone", p, len(ops))
		}
	}
}

// TestTokenRequestExtendedExpiration: with
// --service-account-extend-token-expiration, a pod-bound token for the API
// asked for 3607s (the kubelet's default) lives a year, flagged after
// 3607s, while the answer still says 3607s; other tokens are not extended.
func TestTokenRequestExtendedExpiration(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.ServiceAccountExtendTokenExpiration = true })
	ctx := context.Background()
	if _, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-like"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := newPod("p", nil)
	pod.Spec.ServiceAccountName = "kubelet-like"
	if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	type payload struct {
		jwt.RegisteredClaims
		Kubernetes struct {
			WarnAfter *jwt.NumericDate `json:"warnafter"`
		} `json:"kubernetes.io"`
	}
	issue := func(spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, payload) {
		t.Helper()
		tr, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "kubelet-like", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var p payload
		if _, _, err := jwt.NewParser().ParseUnverified(tr.Status.Token, &p); err != nil {
			t.Fatal(err)
		}
		return tr, p
	}
	podRef := &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"}
	tr, p := issue(authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3607)), BoundObjectRef: podRef})
	if *tr.Spec.ExpirationSeconds != 3607 || time.Until(tr.Status.ExpirationTimestamp.Time) > 3607*time.Second {
		t.Errorf("answer %d %v, want 3607s", *tr.Spec.ExpirationSeconds, tr.Status.ExpirationTimestamp)
	}
	if life := p.ExpiresAt.Sub(p.IssuedAt.Time); life != 365*24*time.Hour || p.Kubernetes.WarnAfter == nil || p.Kubernetes.WarnAfter.Sub(p.IssuedAt.Time) != 3607*time.Second {
		t.Errorf("extended token: life %v, warnafter %v", life, p.Kubernetes.WarnAfter)
	}
	for name, spec := range map[string]authenticationv1.TokenRequestSpec{
		"not bound":        {ExpirationSeconds: ptr(int64(3607))},
		"another audience": {ExpirationSeconds: ptr(int64(3607)), BoundObjectRef: podRef, Audiences: []string{"vault"}},
		"another lifetime": {ExpirationSeconds: ptr(int64(3600)), BoundObjectRef: podRef},
	} {
		_, p := issue(spec)
		if life := p.ExpiresAt.Sub(p.IssuedAt.Time); life > 3607*time.Second || p.Kubernetes.WarnAfter != nil {
			t.Errorf("%s: life %v, warnafter %v, want no extension", name, life, p.Kubernetes.WarnAfter)
		}
	}
}

// TestServiceAccountTokenNodeInfo: a token bound to a scheduled pod names
// its node (user extra), and a token bound to a node lives as long as the
// node, as kube 1.32's.
func TestServiceAccountTokenNodeInfo(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createSA(t, ns, "agent")
	nodeName := uniqueName(t, "node")
	node, err := cs.CoreV1().Nodes().Create(ctx, newNode(nodeName, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("scheduled", nil)
	pod.Spec.ServiceAccountName, pod.Spec.NodeName = "agent", nodeName
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podToken := createToken(t, ns, "agent", authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "scheduled"}})
	nodeToken := createToken(t, ns, "agent", authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeName, UID: node.UID}})
	for name, token := range map[string]string{"pod-bound": podToken.Status.Token, "node-bound": nodeToken.Status.Token} {
		u, err := whoami(t, token)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(u.Extra["authentication.kubernetes.io/node-name"], []string{nodeName}) ||
			!slices.Equal(u.Extra["authentication.kubernetes.io/node-uid"], []string{string(node.UID)}) {
			t.Errorf("%s: extra %v", name, u.Extra)
		}
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedAs401(t, nodeToken.Status.Token, "the deleted node's token to be refused")
	// The pod's token names the node for information only.
	if _, err := whoami(t, podToken.Status.Token); err != nil {
		t.Errorf("the pod's token after its node went: %v", err)
	}
}

// TestServiceAccountKeyRotation: --service-account-key-file takes several
// files; a token signed by a key that no longer signs still verifies, and
// the JWKS publishes every key.
func TestServiceAccountKeyRotation(t *testing.T) {
	dir := t.TempDir()
	oldPath, newPath := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	oldKey, err := serviceaccount.LoadOrCreateKey(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serviceaccount.LoadOrCreateKey(newPath); err != nil {
		t.Fatal(err)
	}
	// The old key's public half alone, as a verifier would be given it.
	der, err := x509.MarshalPKIXPublicKey(oldKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	oldPub := filepath.Join(dir, "old.pub")
	if err := os.WriteFile(oldPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.StartWith(t, filepath.Join(dir, "etcd"), func(c *server.Config) {
		c.ServiceAccountSigningKeyFile = newPath
		c.ServiceAccountKeyFiles = []string{oldPub, newPath}
		c.ServiceAccountIssuers = []string{"https://issuer.example", "https://old-issuer.example"}
	})
	ctx := context.Background()
	sa, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "rotated"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldIssuer, err := serviceaccount.NewIssuer("https://old-issuer.example", oldKey)
	if err != nil {
		t.Fatal(err)
	}
	oldToken, err := oldIssuer.Issue(serviceaccount.Token{ServiceAccount: sa, Audiences: []string{"https://issuer.example"}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	newToken, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "rotated", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(newToken.Spec.Audiences, []string{"https://issuer.example", "https://old-issuer.example"}) {
		t.Errorf("default audiences %v, want the issuers", newToken.Spec.Audiences)
	}
	for name, token := range map[string]string{"old key and issuer": oldToken, "new key": newToken.Status.Token} {
		r, err := asToken(t, s.Config, token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil || r.Status.UserInfo.Username != "system:serviceaccount:default:rotated" {
			t.Errorf("%s: %+v %v", name, r, err)
		}
	}
	resp := doRawURL(t, s.URL(), "GET", "/openid/v1/jwks", nil)
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(resp.Body, &set); err != nil || len(set.Keys) != 2 {
		t.Errorf("jwks %d %s: %v", resp.Code, resp.Body, err)
	}
	if resp := doRawURL(t, s.URL(), "GET", "/.well-known/openid-configuration", nil); !strings.Contains(string(resp.Body), `"issuer":"https://issuer.example"`) {
		t.Errorf("openid-configuration %s", resp.Body)
	}
}
