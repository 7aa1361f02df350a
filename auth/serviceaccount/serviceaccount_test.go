package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

const testIssuer = "https://kubernetes.default.svc.cluster.local"

// Keys are slow to generate: two for every test.
var (
	keysOnce          sync.Once
	mainKey, otherKey *rsa.PrivateKey
)

func keys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if mainKey, err = GenerateKey(); err == nil {
			otherKey, err = GenerateKey()
		}
		if err != nil {
			panic(err)
		}
	})
	return mainKey, otherKey
}

// objects is a Lookup over objects the test puts and removes, standing
// for the server's watch caches.
type objects struct {
	mu    sync.Mutex
	sas   map[string]*v1.ServiceAccount
	pods  map[string]*v1.Pod
	nodes map[string]*v1.Node
}

func (o *objects) Node(_ context.Context, name string) (*v1.Node, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := o.nodes[name]; n != nil {
		return n, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
}

func (o *objects) ServiceAccount(_ context.Context, ns, name string) (*v1.ServiceAccount, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sa := o.sas[ns+"/"+name]; sa != nil {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, name)
}

func (o *objects) Pod(_ context.Context, ns, name string) (*v1.Pod, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.pods[ns+"/"+name]; p != nil {
		return p, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (o *objects) putSA(sa *v1.ServiceAccount) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sas[sa.Namespace+"/"+sa.Name] = sa
}

func (o *objects) putPod(p *v1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pods[p.Namespace+"/"+p.Name] = p
}

func (o *objects) remove(sa, pod string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.sas, sa)
	delete(o.pods, pod)
}

type fixture struct {
	t       testing.TB
	now     time.Time
	objs    *objects
	issuer  *Issuer
	v       *Validator
	sa      *v1.ServiceAccount
	pod     *v1.Pod
	clockMu sync.Mutex
}

func (f *fixture) clock() time.Time {
	f.clockMu.Lock()
	defer f.clockMu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.clockMu.Lock()
	defer f.clockMu.Unlock()
	f.now = f.now.Add(d)
}

func newFixture(t testing.TB, cacheTTL time.Duration) *fixture {
	t.Helper()
	key, _ := keys(t)
	f := &fixture{t: t, now: time.Unix(1_700_000_000, 0), objs: &objects{sas: map[string]*v1.ServiceAccount{}, pods: map[string]*v1.Pod{}, nodes: map[string]*v1.Node{}}}
	f.sa = &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "builder", UID: "sa-uid-1"}}
	f.pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "pod-uid-1"}}
	f.objs.putSA(f.sa)
	f.objs.putPod(f.pod)
	var err error
	if f.issuer, err = NewIssuer(testIssuer, key); err != nil {
		t.Fatal(err)
	}
	f.issuer.now = f.clock
	f.v, err = NewValidator(ValidatorConfig{
		Keys: []crypto.PublicKey{&key.PublicKey}, Issuers: []string{"https://old.example", testIssuer},
		APIAudiences: []string{testIssuer}, Lookup: f.objs, CacheTTL: cacheTTL, Now: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) issue(mod func(*Token)) string {
	f.t.Helper()
	tok := Token{ServiceAccount: f.sa, Pod: f.pod, Audiences: []string{testIssuer}, Expiration: time.Hour}
	if mod != nil {
		mod(&tok)
	}
	s, err := f.issuer.Issue(tok)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// accepted authenticates token and fails the test unless it is accepted.
func (f *fixture) accepted(ctx context.Context, token string) *authenticator.Response {
	f.t.Helper()
	resp, ok, err := f.v.AuthenticateToken(ctx, token)
	if err != nil || !ok {
		f.t.Fatalf("token refused: ok=%v err=%v", ok, err)
	}
	return resp
}

// refused checks that token is refused with an error containing want.
func (f *fixture) refused(ctx context.Context, token, want string) {
	f.t.Helper()
	resp, ok, err := f.v.AuthenticateToken(ctx, token)
	if ok || resp != nil || err == nil || !strings.Contains(err.Error(), want) {
		f.t.Fatalf("want refusal %q, got ok=%v resp=%v err=%v", want, ok, resp, err)
	}
}

func decodeSegment(t *testing.T, seg string) map[string]any {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIssuedTokenHasKubesClaims(t *testing.T) {
	f := newFixture(t, 0)
	f.pod.Spec.NodeName = "node-1"
	token := f.issue(func(tok *Token) {
		tok.Node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}}
		tok.Audiences = []string{testIssuer, "vault"}
	})
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q", token)
	}
	kid, _ := KeyID(f.issuer.PublicKey())
	header := decodeSegment(t, parts[0])
	if len(header) != 2 || header["alg"] != "RS256" || header["kid"] != kid {
		t.Errorf("header %v, want alg RS256 and kid %s only", header, kid)
	}
	payloadJSON, _ := base64.RawURLEncoding.DecodeString(parts[1])
	// Alphabetical order, as kube's.
	last := -1
	for _, k := range []string{`"aud"`, `"exp"`, `"iat"`, `"iss"`, `"jti"`, `"kubernetes.io"`, `"nbf"`, `"sub"`} {
		i := strings.Index(string(payloadJSON), k)
		if i <= last {
			t.Errorf("payload %s: %s missing or out of order", payloadJSON, k)
		}
		last = i
	}
	p := decodeSegment(t, parts[1])
	now := float64(f.now.Unix())
	if p["iss"] != testIssuer || p["sub"] != "system:serviceaccount:ns1:builder" || p["iat"] != now || p["nbf"] != now || p["exp"] != now+3600 {
		t.Errorf("payload %v", p)
	}
	if aud, _ := json.Marshal(p["aud"]); string(aud) != `["https://kubernetes.default.svc.cluster.local","vault"]` {
		t.Errorf("aud %s", aud)
	}
	if jti, _ := p["jti"].(string); len(jti) != 36 {
		t.Errorf("jti %v is not a uuid", p["jti"])
	}
	k, _ := json.Marshal(p["kubernetes.io"])
	want := `{"namespace":"ns1","node":{"name":"node-1","uid":"node-uid"},"pod":{"name":"web","uid":"pod-uid-1"},"serviceaccount":{"name":"builder","uid":"sa-uid-1"}}`
	if string(k) != want {
		t.Errorf("kubernetes.io claim\n got %s\nwant %s", k, want)
	}

	resp := f.accepted(context.Background(), token)
	u := resp.User
	if u.Name != "system:serviceaccount:ns1:builder" || u.UID != "sa-uid-1" ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:ns1"}) {
		t.Errorf("user %+v", u)
	}
	wantExtra := map[string][]string{
		ExtraPodName: {"web"}, ExtraPodUID: {"pod-uid-1"}, ExtraNodeName: {"node-1"}, ExtraNodeUID: {"node-uid"},
		ExtraCredentialID: {"JTI=" + p["jti"].(string)},
	}
	if len(u.Extra) != len(wantExtra) {
		t.Errorf("extra %v, want %v", u.Extra, wantExtra)
	}
	for key, vs := range wantExtra {
		if !slices.Equal(u.Extra[key], vs) {
			t.Errorf("extra %s = %v, want %v", key, u.Extra[key], vs)
		}
	}
	if !slices.Equal(resp.Audiences, []string{testIssuer}) {
		t.Errorf("audiences %v", resp.Audiences)
	}
}

func TestRefusedTokens(t *testing.T) {
	ctx := context.Background()
	t.Run("tampered", func(t *testing.T) {
		f := newFixture(t, -1)
		parts := strings.Split(f.issue(nil), ".")
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		forged := strings.Replace(string(payload), "system:serviceaccount:ns1:builder", "system:serviceaccount:ns1:admin00", 1)
		parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))
		f.refused(ctx, strings.Join(parts, "."), "verification error")
	})
	t.Run("signature of another key", func(t *testing.T) {
		f := newFixture(t, -1)
		_, other := keys(t)
		foreign, err := NewIssuer(testIssuer, other)
		if err != nil {
			t.Fatal(err)
		}
		token, err := foreign.Issue(Token{ServiceAccount: f.sa, Audiences: []string{testIssuer}, Expiration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		f.refused(ctx, token, "verification error")
	})
	t.Run("not RS256", func(t *testing.T) {
		f := newFixture(t, -1)
		parts := strings.Split(f.issue(nil), ".")
		parts[0] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`))
		f.refused(ctx, parts[0]+"."+parts[1]+".", "signing method none is invalid")
	})
	t.Run("expired", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(func(tok *Token) { tok.Expiration = 10 * time.Minute })
		f.accepted(ctx, token)
		f.advance(10*time.Minute + 30*time.Second) // inside kube's leeway
		f.accepted(ctx, token)
		f.advance(31 * time.Second)
		f.refused(ctx, token, "service account token has expired")
	})
	t.Run("not valid yet", func(t *testing.T) {
		f := newFixture(t, -1)
		token := f.issue(nil)
		f.advance(-2 * time.Minute)
		f.refused(ctx, token, "service account token is not valid yet")
	})
	t.Run("wrong audience", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(func(tok *Token) { tok.Audiences = []string{"vault"} })
		f.refused(ctx, token, `token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]`)
		// A TokenReview for the vault audience accepts it.
		resp := f.accepted(authenticator.WithAudiences(ctx, []string{"vault", "other"}), token)
		if !slices.Equal(resp.Audiences, []string{"vault"}) {
			t.Errorf("audiences %v", resp.Audiences)
		}
	})
	t.Run("another issuer is not ours", func(t *testing.T) {
		f := newFixture(t, -1)
		key, _ := keys(t)
		stranger, err := NewIssuer("https://accounts.example.com", key)
		if err != nil {
			t.Fatal(err)
		}
		token, err := stranger.Issue(Token{ServiceAccount: f.sa, Audiences: []string{testIssuer}, Expiration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if resp, ok, err := f.v.AuthenticateToken(ctx, token); resp != nil || ok || err != nil {
			t.Errorf("another issuer's token: %v %v %v, want it left to other authenticators", resp, ok, err)
		}
		if resp, ok, err := f.v.AuthenticateToken(ctx, "static-token-abc"); resp != nil || ok || err != nil {
			t.Errorf("a non-JWT: %v %v %v", resp, ok, err)
		}
	})
	t.Run("a second issuer is accepted", func(t *testing.T) {
		f := newFixture(t, -1)
		key, _ := keys(t)
		old, err := NewIssuer("https://old.example", key)
		if err != nil {
			t.Fatal(err)
		}
		old.now = f.clock
		token, err := old.Issue(Token{ServiceAccount: f.sa, Audiences: []string{testIssuer}, Expiration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		f.accepted(ctx, token)
	})
	t.Run("deleted ServiceAccount", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(nil)
		f.accepted(ctx, token) // and cached
		f.objs.remove("ns1/builder", "")
		f.refused(ctx, token, `serviceaccounts "builder" not found`)
	})
	t.Run("ServiceAccount recreated", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(nil)
		f.accepted(ctx, token)
		f.objs.putSA(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "builder", UID: "sa-uid-2"}})
		f.refused(ctx, token, "service account UID (sa-uid-2) does not match claim (sa-uid-1)")
	})
	t.Run("deleted pod", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(nil)
		f.accepted(ctx, token)
		f.objs.remove("", "ns1/web")
		f.refused(ctx, token, "service account token has been invalidated")
	})
	t.Run("pod recreated", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(nil)
		f.objs.putPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: types.UID("pod-uid-2")}})
		f.refused(ctx, token, "pod UID (pod-uid-2) does not match claim (pod-uid-1)")
	})
	t.Run("node-bound", func(t *testing.T) {
		f := newFixture(t, 0)
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid-1"}}
		f.objs.mu.Lock()
		f.objs.nodes["node-1"] = node
		f.objs.mu.Unlock()
		token := f.issue(func(tok *Token) { tok.Pod, tok.Node = nil, node })
		u := f.accepted(ctx, token).User
		if u.Extra[ExtraNodeName][0] != "node-1" || u.Extra[ExtraNodeUID][0] != "node-uid-1" || u.Extra[ExtraPodName] != nil {
			t.Errorf("extra %v", u.Extra)
		}
		f.objs.mu.Lock()
		f.objs.nodes["node-1"] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid-2"}}
		f.objs.mu.Unlock()
		f.refused(ctx, token, "node UID (node-uid-2) does not match claim (node-uid-1)")
		f.objs.mu.Lock()
		delete(f.objs.nodes, "node-1")
		f.objs.mu.Unlock()
		f.refused(ctx, token, "service account token has been invalidated")
	})
	t.Run("terminating pod", func(t *testing.T) {
		f := newFixture(t, 0)
		token := f.issue(nil)
		terminating := f.pod.DeepCopy()
		terminating.DeletionTimestamp = &metav1.Time{Time: f.now.Add(30 * time.Second)}
		f.objs.putPod(terminating)
		// In its grace period (and kube's leeway after it), the pod's
		// token still works, as kube's.
		f.accepted(ctx, token)
		f.advance(30*time.Second + Leeway)
		f.accepted(ctx, token)
		f.advance(time.Second)
		f.refused(ctx, token, "service account token has been invalidated")
	})
}

func TestCacheIsBounded(t *testing.T) {
	f := newFixture(t, time.Minute)
	v, err := NewValidator(ValidatorConfig{Keys: []crypto.PublicKey{f.issuer.PublicKey()}, Issuers: []string{testIssuer},
		APIAudiences: []string{testIssuer}, Lookup: f.objs, CacheSize: 8, Now: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := 0; i < 50; i++ {
		token := f.issue(nil)
		if i == 49 {
			first = token
		}
		if _, ok, err := v.AuthenticateToken(context.Background(), token); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if n := v.cache.len(); n > 8 || n == 0 {
			t.Fatalf("cache holds %d tokens, bound 8", n)
		}
	}
	if v.cache.get(sha256.Sum256([]byte(first)), f.clock()) == nil {
		t.Error("the last token verified is not cached")
	}
	f.advance(2 * time.Minute)
	if v.cache.get(sha256.Sum256([]byte(first)), f.clock()) != nil {
		t.Error("a token is still cached after the TTL")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki", "sa.key")
	key, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	again, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := key.(*ecdsa.PrivateKey); !ok {
		t.Errorf("a new key is a %T, want an ECDSA P-256 key", key)
	}
	if !again.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
		t.Error("a second LoadOrCreateKey made a new key instead of reading the first")
	}
	pubs, err := ReadPublicKeys(path)
	if err != nil || len(pubs) != 1 || !pubs[0].(*ecdsa.PublicKey).Equal(key.Public()) {
		t.Errorf("public keys of the private key file: %v %v", pubs, err)
	}
	if err := os.WriteFile(path+".bad", []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path + ".bad"); err == nil {
		t.Error("a file without a key was taken")
	}
}

func TestDiscoveryDocuments(t *testing.T) {
	key, _ := keys(t)
	if _, err := NewDiscovery("http://insecure.example", "https://h/openid/v1/jwks", []crypto.PublicKey{&key.PublicKey}); err == nil {
		t.Error("an http issuer was accepted")
	}
	d, err := NewDiscovery(testIssuer, "https://127.0.0.1:6443/openid/v1/jwks", []crypto.PublicKey{&key.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.ServeConfiguration(rec, httptest.NewRequest("GET", OpenIDConfigPath, nil))
	want := `{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://127.0.0.1:6443/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}`
	if rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("configuration %v %s", rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	d.ServeKeys(rec, httptest.NewRequest("GET", JWKSPath, nil))
	kid, _ := KeyID(&key.PublicKey)
	body := rec.Body.String()
	if rec.Header().Get("Content-Type") != "application/jwk-set+json" || !strings.HasPrefix(body, `{"keys":[{"use":"sig","kty":"RSA","kid":"`+kid+`","alg":"RS256","n":"`) || !strings.HasSuffix(body, `","e":"AQAB"}]}`) {
		t.Errorf("keys %v %s", rec.Header(), body)
	}
}

// BenchmarkVerify measures a token's verification, the first time (RSA
// signature and JSON) and when seen again (kube caches too): both check
// times, audiences and the ServiceAccount and pod.
func BenchmarkVerify(b *testing.B) {
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"uncached", -1}, {"cached", time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, bc.ttl)
			token := f.issue(nil)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ok, err := f.v.AuthenticateToken(ctx, token); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
