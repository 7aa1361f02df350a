package authenticator

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/corekube/corekube/auth/user"
)

// X509 authenticates requests by the client certificate of their TLS
// connection, as kube's x509 authenticator: a certificate that chains to
// one of the client CAs and may be used for client authentication names
// the user in its common name and the groups in its organizations. A
// request without a certificate is not X509's kind; a certificate that does
// not verify is an error (401), even when another authenticator would take
// the request.
//
// Verifications are remembered per certificate until it expires, so that
// requests after the first on a connection (client-go keeps one per
// transport) cost a hash, not a signature check.
type X509 struct {
	roots func() *x509.CertPool

	mu    sync.Mutex
	cache map[[sha256.Size]byte]x509Verified
}

type x509Verified struct {
	user     *user.Info
	notAfter time.Time
}

// x509CacheSize bounds the verification cache: when full it starts over,
// which costs one verification per client, not correctness.
const x509CacheSize = 4096

// NewX509 returns an authenticator trusting the CAs roots returns (a
// function, so that a reloaded CA bundle applies to the next request).
func NewX509(roots func() *x509.CertPool) *X509 {
	return &X509{roots: roots, cache: map[[sha256.Size]byte]x509Verified{}}
}

// AuthenticateRequest verifies the request's client certificate.
func (a *X509) AuthenticateRequest(r *http.Request) (*Response, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	key := sha256.Sum256(leaf.Raw)
	now := time.Now()
	a.mu.Lock()
	hit, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(hit.notAfter) {
		return &Response{User: hit.user}, true, nil
	}

	opts := x509.VerifyOptions{
		Roots:         a.roots(),
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		CurrentTime:   now,
	}
	for _, c := range r.TLS.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := leaf.Verify(opts)
	if err != nil {
		return nil, false, fmt.Errorf("verifying certificate %s failed: %w", describeCert(leaf), err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, false, errors.New("client certificate has no common name")
	}
	u := &user.Info{Name: leaf.Subject.CommonName, Groups: slices.Clone(leaf.Subject.Organization)}
	// The verification holds until the first certificate of the chain
	// expires.
	notAfter := leaf.NotAfter
	for _, c := range chains[0] {
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	a.mu.Lock()
	if len(a.cache) >= x509CacheSize {
		clear(a.cache)
	}
	a.cache[key] = x509Verified{user: u, notAfter: notAfter}
	a.mu.Unlock()
	return &Response{User: u}, true, nil
}

// describeCert names a certificate in a log line (never its key).
func describeCert(c *x509.Certificate) string {
	return fmt.Sprintf("SN=%s, SKID=%x, AKID=%x (subject %q, issuer %q, valid %s to %s)",
		c.SerialNumber, c.SubjectKeyId, c.AuthorityKeyId, c.Subject.String(), c.Issuer.String(),
		c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
}
