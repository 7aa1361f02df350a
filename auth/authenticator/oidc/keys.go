package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxDocumentSize bounds what is read of a discovery document or a JWKS.
const maxDocumentSize = 1 << 20

// keys is one fetched JWKS: the verification keys by kid, and all of them
// for tokens without a kid.
type keys struct {
	byKID map[string][]crypto.PublicKey
	all   []crypto.PublicKey
}

// remoteKeys is an issuer's signing keys, found through its discovery
// document and fetched from its jwks_uri, kept in memory. Fetches are
// serialised, and those asked for by requests (a token signed by a key not
// yet seen) are rate-limited so that tokens cannot make the server hammer
// the issuer.
type remoteKeys struct {
	issuer       string
	discoveryURL string
	client       *http.Client
	// minRefetch is the least time between two fetches asked for by
	// requests.
	minRefetch time.Duration
	now        func() time.Time

	current atomic.Pointer[keys]

	mu          sync.Mutex // serialises fetches; guards the fields below
	lastAttempt time.Time
	lastSuccess time.Time
	lastErr     error
}

func newRemoteKeys(issuer, discoveryURL string, client *http.Client, minRefetch time.Duration, now func() time.Time) *remoteKeys {
	if discoveryURL == "" {
		// As go-oidc: the issuer without its trailing slash, then the
		// well-known path.
		discoveryURL = strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	}
	return &remoteKeys{issuer: issuer, discoveryURL: discoveryURL, client: client, minRefetch: minRefetch, now: now}
}

// errNoKeys: the issuer's keys have never been fetched.
var errNoKeys = errors.New("the issuer's keys are not available")

// get returns the cached keys, fetching them first when there are none
// (rate-limited: a failed fetch is not retried by every request).
func (r *remoteKeys) get(ctx context.Context) (*keys, error) {
	if k := r.current.Load(); k != nil {
		return k, nil
	}
	k, _, err := r.refetch(ctx, nil)
	if k == nil {
		if err == nil {
			err = r.lastError()
		}
		return nil, fmt.Errorf("%w: %w", errNoKeys, err)
	}
	return k, nil
}

func (r *remoteKeys) lastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr == nil {
		return errors.New("not fetched yet")
	}
	return r.lastErr
}

// refetch fetches the keys again because those in seen did not verify a
// token, unless another fetch replaced seen meanwhile (its result is
// returned) or the last fetch is too recent. It reports whether the keys
// returned are newer than seen.
func (r *remoteKeys) refetch(ctx context.Context, seen *keys) (*keys, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.current.Load(); k != seen {
		return k, true, nil
	}
	if !r.lastAttempt.IsZero() && r.now().Sub(r.lastAttempt) < r.minRefetch {
		return seen, false, nil
	}
	if err := r.fetchLocked(ctx); err != nil {
		return seen, false, err
	}
	return r.current.Load(), true, nil
}

// refreshIfOlder fetches the keys when the last successful fetch (by
// anyone) is maxAge old or more, and says when they will next be due (the
// background refresh: it fetches nothing that a request just fetched).
func (r *remoteKeys) refreshIfOlder(ctx context.Context, maxAge time.Duration) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastSuccess.IsZero() {
		if age := r.now().Sub(r.lastSuccess); age < maxAge {
			return maxAge - age, nil
		}
	}
	if err := r.fetchLocked(ctx); err != nil {
		return 0, err
	}
	return maxAge, nil
}

// fetchLocked reads the discovery document, then the JWKS it names, and
// replaces the cached keys. A failure keeps the keys there were.
func (r *remoteKeys) fetchLocked(ctx context.Context) error {
	r.lastAttempt = r.now()
	k, err := r.fetch(ctx)
	r.lastErr = err
	if err != nil {
		return err
	}
	r.current.Store(k)
	r.lastSuccess = r.lastAttempt
	return nil
}

func (r *remoteKeys) fetch(ctx context.Context) (*keys, error) {
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := r.getJSON(ctx, r.discoveryURL, &discovery); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if discovery.Issuer != r.issuer {
		return nil, fmt.Errorf("discovery: issuer did not match the issuer returned by provider, expected %q got %q", r.issuer, discovery.Issuer)
	}
	u, err := url.Parse(discovery.JWKSURI)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("discovery: jwks_uri %q is not an https URL", discovery.JWKSURI)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := r.getJSON(ctx, discovery.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	k := &keys{byKID: map[string][]crypto.PublicKey{}}
	var bad []error
	for i, raw := range set.Keys {
		kid, key, err := parseJWK(raw)
		if err != nil {
			// One bad key does not take the issuer's others down with it.
			bad = append(bad, fmt.Errorf("key %d: %w", i, err))
			continue
		}
		if key == nil {
			continue // not a signing key, or of a type no algorithm here uses
		}
		k.all = append(k.all, key)
		if kid != "" {
			k.byKID[kid] = append(k.byKID[kid], key)
		}
	}
	if len(k.all) == 0 {
		return nil, fmt.Errorf("jwks: no usable RSA or EC signing key among %d: %w", len(set.Keys), errors.Join(bad...))
	}
	return k, nil
}

func (r *remoteKeys) getJSON(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentSize+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if len(body) > maxDocumentSize {
		return fmt.Errorf("GET %s: more than %d bytes", u, maxDocumentSize)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// jwk is the part of a JSON Web Key (RFC 7517, 7518) read here.
type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Kid string `json:"kid"`
	// RSA
	N string `json:"n"`
	E string `json:"e"`
	// EC
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWK returns a key's kid and public key; a nil key for keys that are
// not for signatures or of another type (oct, OKP), which are skipped.
func parseJWK(raw json.RawMessage) (string, crypto.PublicKey, error) {
	var k jwk
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", nil, err
	}
	if k.Use != "" && k.Use != "sig" {
		return k.Kid, nil, nil
	}
	switch k.Kty {
	case "RSA":
		n, err := base64.RawURLEncoding.DecodeString(k.N)
		if err != nil || len(n) == 0 {
			return "", nil, fmt.Errorf("kid %q: bad RSA modulus", k.Kid)
		}
		e, err := base64.RawURLEncoding.DecodeString(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return "", nil, fmt.Errorf("kid %q: bad RSA exponent", k.Kid)
		}
		exp := new(big.Int).SetBytes(e)
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}
		if pub.N.BitLen() < 2048 {
			return "", nil, fmt.Errorf("kid %q: RSA key of %d bits, fewer than 2048", k.Kid, pub.N.BitLen())
		}
		return k.Kid, pub, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return "", nil, fmt.Errorf("kid %q: unsupported EC curve %q", k.Kid, k.Crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := base64.RawURLEncoding.DecodeString(k.X)
		y, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return "", nil, fmt.Errorf("kid %q: bad EC coordinates", k.Kid)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return "", nil, fmt.Errorf("kid %q: %w", k.Kid, err)
		}
		return k.Kid, pub, nil
	}
	return k.Kid, nil, nil
}
