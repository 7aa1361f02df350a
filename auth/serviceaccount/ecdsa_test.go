package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ecdsaFixture is newFixture with an ES256 issuer and a validator that
// knows both the RSA key and the ECDSA key, as a server whose
// --service-account-key-file lists an old RSA key and a new ECDSA one.
func ecdsaFixture(t testing.TB) (*fixture, *ecdsa.PrivateKey, *Issuer) {
	t.Helper()
	f := newFixture(t, -1)
	rsaKey, _ := keys(t)
	ecKey, err := GenerateECDSAKey()
	if err != nil {
		t.Fatal(err)
	}
	rsaIssuer := f.issuer
	if f.issuer, err = NewIssuer(testIssuer, ecKey); err != nil {
		t.Fatal(err)
	}
	f.issuer.now = f.clock
	f.v, err = NewValidator(ValidatorConfig{
		Keys: []crypto.PublicKey{&rsaKey.PublicKey, ecKey.Public()}, Issuers: []string{testIssuer},
		APIAudiences: []string{testIssuer}, Lookup: f.objs, CacheTTL: -1, Now: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, ecKey, rsaIssuer
}

// TestECDSATokens: an ECDSA P-256 key signs ES256 tokens with kube's
// header; a validator with RSA and ECDSA keys takes the tokens of both and
// refuses a token whose alg does not match the key its kid names.
func TestECDSATokens(t *testing.T) {
	ctx := context.Background()
	f, ecKey, rsaIssuer := ecdsaFixture(t)
	token := f.issue(nil)
	parts := strings.Split(token, ".")
	header := decodeSegment(t, parts[0])
	kid, _ := KeyID(ecKey.Public())
	if len(header) != 2 || header["alg"] != "ES256" || header["kid"] != kid {
		t.Errorf("header %v, want alg ES256 and kid %s only", header, kid)
	}
	if sig, _ := base64.RawURLEncoding.DecodeString(parts[2]); len(sig) != 64 {
		t.Errorf("ES256 signature of %d bytes, want 64 (r||s)", len(sig))
	}
	resp := f.accepted(ctx, token)
	if resp.User.Name != "system:serviceaccount:ns1:builder" {
		t.Errorf("user %v", resp.User)
	}

	rsaToken, err := rsaIssuer.Issue(Token{ServiceAccount: f.sa, Pod: f.pod, Audiences: []string{testIssuer}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f.accepted(ctx, rsaToken)

	// The ECDSA token's header claiming RS256: the key its kid names is
	// not an RSA key.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"` + kid + `"}`))
	f.refused(ctx, forged+"."+parts[1]+"."+parts[2], "key is of invalid type")

	// A validator with the RSA key only knows no ES256.
	rsaKey, _ := keys(t)
	v, err := NewValidator(ValidatorConfig{Keys: []crypto.PublicKey{&rsaKey.PublicKey}, Issuers: []string{testIssuer},
		APIAudiences: []string{testIssuer}, Lookup: f.objs, CacheTTL: -1, Now: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := v.AuthenticateToken(ctx, token); ok || err == nil || !strings.Contains(err.Error(), "signing method ES256 is invalid") {
		t.Errorf("an RSA-only validator on an ES256 token: ok=%v err=%v", ok, err)
	}

	if _, err := NewIssuer(testIssuer, mustECKey(t, elliptic.P224())); err == nil {
		t.Error("a P-224 key was taken to sign (kube signs with P-256, P-384, P-521 only)")
	}
}

func mustECKey(t testing.TB, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestLoadOrCreateKeyKeepsRSA: a data dir whose sa.key an earlier version
// wrote (RSA, PKCS#1) keeps signing with it, RS256.
func TestLoadOrCreateKeyKeepsRSA(t *testing.T) {
	rsaKey, _ := keys(t)
	path := filepath.Join(t.TempDir(), "sa.key")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := key.(*rsa.PrivateKey); !ok || !k.Equal(rsaKey) {
		t.Fatalf("LoadOrCreateKey on an RSA key file gave a %T", key)
	}
	iss, err := NewIssuer(testIssuer, key)
	if err != nil || iss.method.Alg() != "RS256" {
		t.Errorf("issuer of the RSA key: %v %v", iss, err)
	}
	// PKCS#8 ECDSA keys (`openssl genpkey`) read as well.
	ecKey := mustECKey(t, elliptic.P384())
	der, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err = ReadPrivateKey(path)
	if err != nil || !key.(*ecdsa.PrivateKey).Equal(ecKey) {
		t.Fatalf("PKCS#8 ECDSA key: %T %v", key, err)
	}
	if iss, err := NewIssuer(testIssuer, key); err != nil || iss.method.Alg() != "ES384" {
		t.Errorf("issuer of a P-384 key: %v %v", iss, err)
	}
}

// TestDiscoveryECDSA: an ECDSA key's JWK has go-jose's fields and order
// (crv, x and y padded to the curve's size), the metadata lists both
// algorithms sorted, and the JWK verifies an ES256 token.
func TestDiscoveryECDSA(t *testing.T) {
	f, ecKey, _ := ecdsaFixture(t)
	rsaKey, _ := keys(t)
	d, err := NewDiscovery(testIssuer, "https://127.0.0.1:6443/openid/v1/jwks", []crypto.PublicKey{&rsaKey.PublicKey, ecKey.Public()})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.ServeConfiguration(rec, httptest.NewRequest("GET", OpenIDConfigPath, nil))
	if !strings.HasSuffix(rec.Body.String(), `"id_token_signing_alg_values_supported":["ES256","RS256"]}`) {
		t.Errorf("configuration %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	d.ServeKeys(rec, httptest.NewRequest("GET", JWKSPath, nil))
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("jwks %s: %v", rec.Body, err)
	}
	kid, _ := KeyID(ecKey.Public())
	ec := string(set.Keys[1])
	if !strings.HasPrefix(ec, `{"use":"sig","kty":"EC","kid":"`+kid+`","crv":"P-256","alg":"ES256","x":"`) || strings.Contains(ec, `"n"`) {
		t.Errorf("EC jwk %s", ec)
	}
	var k map[string]string
	if err := json.Unmarshal(set.Keys[1], &k); err != nil || len(k) != 7 {
		t.Fatalf("EC jwk %s: %v", ec, err)
	}
	x, _ := base64.RawURLEncoding.DecodeString(k["x"])
	y, _ := base64.RawURLEncoding.DecodeString(k["y"])
	if len(x) != 32 || len(y) != 32 {
		t.Errorf("x %d bytes, y %d bytes, want 32 each", len(x), len(y))
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
	tok, err := jwt.Parse(f.issue(nil), func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithTimeFunc(f.clock))
	if err != nil || !tok.Valid {
		t.Errorf("verifying an ES256 token with the JWK: %v", err)
	}
}

// BenchmarkIssue measures signing one bound token, the apiserver's cost
// per pod (the agent asks for one per pod, as the kubelet).
func BenchmarkIssue(b *testing.B) {
	rsaKey, _ := keys(b)
	ecKey, err := GenerateECDSAKey()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		key  crypto.Signer
	}{{"RS256", rsaKey}, {"ES256", ecKey}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, -1)
			iss, err := NewIssuer(testIssuer, bc.key)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := iss.Issue(Token{ServiceAccount: f.sa, Pod: f.pod, Audiences: []string{testIssuer}, Expiration: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
