package pki

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadOrCreateReusesAndRenews(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca.key"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v, want 0600", name, err, fi.Mode().Perm())
		}
	}
	again, err := LoadOrCreateCA(dir, "test-ca")
	if err != nil || !bytes.Equal(again.PEM, ca.PEM) {
		t.Fatalf("second start made another CA (err %v)", err)
	}

	req := ServingRequest{CommonName: "kube-apiserver", Hosts: []string{"localhost", "127.0.0.1", "10.0.0.1"}}
	first, err := ca.LoadOrCreateServing(dir, "apiserver", req)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "apiserver.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("apiserver.key: %v", err)
	}
	second, err := ca.LoadOrCreateServing(dir, "apiserver", req)
	if err != nil || !bytes.Equal(first.CertPEM, second.CertPEM) {
		t.Fatalf("same names: certificate not reused (err %v)", err)
	}
	req.Hosts = append(req.Hosts, "api.example.com")
	third, err := ca.LoadOrCreateServing(dir, "apiserver", req)
	if err != nil || bytes.Equal(third.CertPEM, second.CertPEM) {
		t.Fatalf("new SAN: certificate not reissued (err %v)", err)
	}
	cert, _ := parseCert(third.CertPEM)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, h := range req.Hosts {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: h, Roots: pool}); err != nil {
			t.Errorf("serving certificate for %s: %v", h, err)
		}
	}

	// A CA of another directory does not sign what is there: reissued.
	other, err := NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	fourth, err := other.LoadOrCreateServing(dir, "apiserver", req)
	if err != nil || bytes.Equal(fourth.CertPEM, third.CertPEM) {
		t.Fatalf("other CA: certificate not reissued (err %v)", err)
	}
}

func TestClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.LoadOrCreateClient(dir, "admin", "kubernetes-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := parseCert(pair.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "kubernetes-admin" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:masters" {
		t.Errorf("subject %v", cert.Subject)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify for client auth: %v", err)
	}
	renamed, err := ca.LoadOrCreateClient(dir, "admin", "someone-else")
	if err != nil || bytes.Equal(renamed.CertPEM, pair.CertPEM) {
		t.Errorf("other user: certificate not reissued (err %v)", err)
	}
	if _, err := pair.TLSCertificate(); err != nil {
		t.Error(err)
	}
}

func TestParseCARoundTrip(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCA(ca.PEM, key)
	if err != nil || !back.Cert.Equal(ca.Cert) {
		t.Fatalf("ParseCA: %v", err)
	}
	if _, err := ParseCA(ca.PEM, []byte("not a key")); err == nil {
		t.Error("ParseCA took a garbage key")
	}
	leaf, _ := ca.Client("u")
	if _, err := ParseCA(leaf.CertPEM, leaf.KeyPEM); err == nil {
		t.Error("ParseCA took a leaf certificate")
	}
}
