// Package oidctest is a real OpenID Connect issuer for tests: an HTTPS
// server (httptest.NewTLSServer) serving a discovery document and a JWKS,
// and the keys to sign tokens with golang-jwt, which tests rotate and
// publish as they please.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is a running test issuer.
type Issuer struct {
	// URL is the issuer URL (https://127.0.0.1:PORT), its tokens' iss.
	URL string
	// CAPEM is the PEM of the certificate its TLS server presents, for an
	// AuthenticationConfiguration's certificateAuthority.
	CAPEM string

	server *httptest.Server

	mu        sync.Mutex
	keys      map[string]*Key // by kid
	published []string        // kids in the JWKS, in order
	signer    *Key

	discoveryFetches atomic.Int64
	jwksFetches      atomic.Int64
}

// Key is a signing key of the issuer.
type Key struct {
	KID    string
	Method jwt.SigningMethod
	priv   crypto.Signer
}

// New starts an issuer signing with an RS256 key "key-1", published; it
// stops when the test ends.
func New(tb testing.TB) *Issuer {
	tb.Helper()
	i := &Issuer{keys: map[string]*Key{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		i.discoveryFetches.Add(1)
		writeJSON(w, map[string]any{
			"issuer":                                i.URL,
			"jwks_uri":                              i.URL + "/keys",
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		i.jwksFetches.Add(1)
		writeJSON(w, i.jwks())
	})
	i.server = httptest.NewUnstartedServer(mux)
	// Clients that do not trust the issuer are expected in tests: their
	// handshake failures are not news.
	i.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	i.server.StartTLS()
	tb.Cleanup(i.server.Close)
	i.URL = i.server.URL
	i.CAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.server.Certificate().Raw}))
	i.signer = i.AddKey(tb, "key-1", "RS256", true)
	return i
}

// AddKey makes a key (alg RS256 or ES256) named kid, published in the
// JWKS or not.
func (i *Issuer) AddKey(tb testing.TB, kid, alg string, publish bool) *Key {
	tb.Helper()
	k := &Key{KID: kid, Method: jwt.GetSigningMethod(alg)}
	var err error
	switch alg {
	case "RS256":
		k.priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k.priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		tb.Fatalf("oidctest: algorithm %s", alg)
	}
	if err != nil {
		tb.Fatal(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys[kid] = k
	if publish {
		i.published = append(i.published, kid)
	}
	return k
}

// Publish puts the keys named in the JWKS, alone.
func (i *Issuer) Publish(kids ...string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.published = append([]string(nil), kids...)
}

// UseKey makes the key named kid sign the next tokens.
func (i *Issuer) UseKey(kid string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.signer = i.keys[kid]
}

// JWKSFetches is how many times the JWKS was served.
func (i *Issuer) JWKSFetches() int64 { return i.jwksFetches.Load() }

// Claims are the claims of a valid token for sub and aud: iss, sub, aud,
// iat and nbf now, exp in an hour.
func (i *Issuer) Claims(sub string, aud ...string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": i.URL,
		"sub": sub,
		"aud": aud,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

// Sign signs claims with the current key, naming it in the kid header.
func (i *Issuer) Sign(tb testing.TB, claims jwt.MapClaims) string {
	tb.Helper()
	i.mu.Lock()
	k := i.signer
	i.mu.Unlock()
	return k.Sign(tb, claims)
}

// Sign signs claims with k, naming it in the kid header.
func (k *Key) Sign(tb testing.TB, claims jwt.MapClaims) string {
	tb.Helper()
	t := jwt.NewWithClaims(k.Method, claims)
	t.Header["kid"] = k.KID
	s, err := t.SignedString(k.priv)
	if err != nil {
		tb.Fatalf("oidctest: sign: %v", err)
	}
	return s
}

// SignWithoutKID signs claims with k, with no kid header (the verifier
// then tries every key of the JWKS).
func (k *Key) SignWithoutKID(tb testing.TB, claims jwt.MapClaims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(k.Method, claims).SignedString(k.priv)
	if err != nil {
		tb.Fatalf("oidctest: sign: %v", err)
	}
	return s
}

func (i *Issuer) jwks() map[string]any {
	i.mu.Lock()
	defer i.mu.Unlock()
	keys := []map[string]string{}
	for _, kid := range i.published {
		k := i.keys[kid]
		j := map[string]string{"kid": kid, "use": "sig", "alg": k.Method.Alg()}
		switch pub := k.priv.Public().(type) {
		case *rsa.PublicKey:
			j["kty"] = "RSA"
			j["n"] = b64(pub.N.Bytes())
			j["e"] = b64(big.NewInt(int64(pub.E)).Bytes())
		case *ecdsa.PublicKey:
			b, err := pub.Bytes() // 0x04 || X || Y
			if err != nil {
				panic(fmt.Sprintf("oidctest: %v", err))
			}
			size := (len(b) - 1) / 2
			j["kty"] = "EC"
			j["crv"] = pub.Curve.Params().Name
			j["x"] = b64(b[1 : 1+size])
			j["y"] = b64(b[1+size:])
		}
		keys = append(keys, j)
	}
	return map[string]any{"keys": keys}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
