// Package pki makes and keeps the certificates a cluster needs to speak
// TLS without an operator's help: a CA, the API server's serving
// certificate and client certificates (the admin's), as files under one
// directory that later starts reuse. Keys are ECDSA P-256: as safe as
// kubeadm's RSA-2048 for this purpose and an order of magnitude cheaper in
// every TLS handshake.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Validity of what this package issues, as kubeadm's: ten years for the CA,
// a year for leaf certificates (renewed at start-up within renewBefore of
// their end).
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
	// backdate covers clocks a little behind ours.
	backdate = 5 * time.Minute
)

// CA is a certificate authority whose key is at hand.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is Cert in PEM, as clients' CA bundles want it.
	PEM []byte
}

// KeyPair is a certificate with its key, in PEM.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// TLSCertificate parses the pair for a tls.Config.
func (p KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(p.CertPEM, p.KeyPEM)
}

// NewCA makes a self-signed CA in memory named cn.
func NewCA(cn string) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, PEM: encodeCert(der)}, nil
}

// LoadOrCreateCA reads ca.crt and ca.key from dir, or makes a CA named cn
// and writes them there when neither exists.
func LoadOrCreateCA(dir, cn string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, keyPEM, err := readPair(certPath, keyPath)
	switch {
	case err == nil:
		cert, err := parseCert(certPEM)
		if err != nil {
			return nil, fmt.Errorf("CA %s: %w", certPath, err)
		}
		key, err := parseKey(keyPEM)
		if err != nil {
			return nil, fmt.Errorf("CA key %s: %w", keyPath, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("CA %s is not a CA certificate", certPath)
		}
		return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	ca, err := NewCA(cn)
	if err != nil {
		return nil, err
	}
	keyPEM, err = encodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := writePair(dir, "ca", ca.PEM, keyPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// ServingRequest says what a serving certificate is for.
type ServingRequest struct {
	CommonName string
	// Hosts are DNS names and IP addresses the certificate must cover.
	Hosts []string
}

// Serving issues a serving certificate for req.
func (ca *CA) Serving(req ServingRequest) (KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: req.CommonName},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range req.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// Client issues a client certificate for user cn in groups (the
// certificate's organizations, as kube reads them).
func (ca *CA) Client(cn string, groups ...string) (KeyPair, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = newSerial()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(leafValidity)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadOrCreateServing returns the serving pair in dir/name.{crt,key},
// issuing (and writing) a new one when there is none, or when the one there
// is not from ca, does not cover req.Hosts or ends within a month.
//
// A reissued certificate keeps the names of the one it replaces, so that
// servers sharing dir (each adding its own address) end up with one
// certificate for all their names.
func (ca *CA) LoadOrCreateServing(dir, name string, req ServingRequest) (KeyPair, error) {
	if certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt")); err == nil {
		if cert, err := parseCert(certPEM); err == nil && ca.signed(cert) {
			req.Hosts = withNames(req.Hosts, cert)
		}
	}
	return ca.loadOrCreate(dir, name, func(c *x509.Certificate) bool {
		for _, h := range req.Hosts {
			if h != "" && c.VerifyHostname(h) != nil {
				return false
			}
		}
		return slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}, func() (KeyPair, error) { return ca.Serving(req) })
}

// LoadOrCreateClient returns the client pair in dir/name.{crt,key} for user
// cn in groups, issuing a new one when there is none, or when the one there
// is not from ca, names another user or groups, or ends within a month.
func (ca *CA) LoadOrCreateClient(dir, name, cn string, groups ...string) (KeyPair, error) {
	return ca.loadOrCreate(dir, name, func(c *x509.Certificate) bool {
		// DER sorts a SET OF: compare the groups as sets.
		return c.Subject.CommonName == cn &&
			slices.Equal(slices.Sorted(slices.Values(c.Subject.Organization)), slices.Sorted(slices.Values(groups)))
	}, func() (KeyPair, error) { return ca.Client(cn, groups...) })
}

func (ca *CA) loadOrCreate(dir, name string, fits func(*x509.Certificate) bool, issue func() (KeyPair, error)) (KeyPair, error) {
	certPEM, keyPEM, err := readPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	if err == nil {
		if cert, err := parseCert(certPEM); err == nil && ca.signed(cert) && fits(cert) &&
			time.Until(cert.NotAfter) > renewBefore {
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err == nil {
				return KeyPair{CertPEM: certPEM, KeyPEM: keyPEM}, nil
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return KeyPair{}, err
	}
	pair, err := issue()
	if err != nil {
		return KeyPair{}, err
	}
	if err := writePair(dir, name, pair.CertPEM, pair.KeyPEM); err != nil {
		return KeyPair{}, err
	}
	return pair, nil
}

// withNames adds cert's DNS names and IP addresses to hosts.
func withNames(hosts []string, cert *x509.Certificate) []string {
	out := slices.Clone(hosts)
	add := func(h string) {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	for _, n := range cert.DNSNames {
		add(n)
	}
	for _, ip := range cert.IPAddresses {
		add(ip.String())
	}
	return out
}

// signed reports whether ca issued cert.
func (ca *CA) signed(cert *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, ca.Cert.RawSubject) && cert.CheckSignatureFrom(ca.Cert) == nil
}

// CertPool parses a PEM bundle of CA certificates.
func CertPool(pemBundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBundle) {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}

// Fingerprint is the SHA-256 of a certificate's DER, as a cache key.
func Fingerprint(cert *x509.Certificate) [sha256.Size]byte { return sha256.Sum256(cert.Raw) }

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return key, nil
}

func newSerial() *big.Int {
	// 128 random bits, positive, as RFC 5280 wants serials unique.
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// parseKey reads a PKCS#8, PKCS#1 (RSA) or SEC 1 (EC) private key.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("unsupported private key in PEM block %q", block.Type)
}

func readPair(certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return nil, nil, os.ErrNotExist
	case certErr != nil:
		return nil, nil, fmt.Errorf("read %s: %w", certPath, certErr)
	case keyErr != nil:
		return nil, nil, fmt.Errorf("read %s: %w", keyPath, keyErr)
	}
	return certPEM, keyPEM, nil
}

// writePair writes name.crt (0644) and name.key (0600) into dir (0700),
// each through a temporary file and a rename, so that a crash leaves either
// the old file or the new one.
func writePair(dir, name string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := writeFile(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, name+".crt"), certPEM, 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Write writes the CA's ca.crt and ca.key into dir, as LoadOrCreateCA
// reads them (to share one CA between servers).
func (ca *CA) Write(dir string) error {
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	return writePair(dir, "ca", ca.PEM, keyPEM)
}

// ParseCA reads a CA from its certificate and key in PEM.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("not a CA certificate")
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

// KeyPEM is the CA's key in PEM.
func (ca *CA) KeyPEM() ([]byte, error) { return encodeKey(ca.Key) }
