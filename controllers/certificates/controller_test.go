package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/auth/pki"
)

func req(t *testing.T, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNodeClientProblem(t *testing.T) {
	node := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	cases := []struct {
		name   string
		tmpl   x509.CertificateRequest
		usages []certificatesv1.KeyUsage
		want   string
	}{
		{"node", x509.CertificateRequest{Subject: node}, client, ""},
		{"key encipherment too", x509.CertificateRequest{Subject: node}, append(client, certificatesv1.UsageKeyEncipherment), ""},
		{"other org", x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:masters"}}}, client, "organization"},
		{"two orgs", x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes", "system:masters"}}}, client, "organization"},
		{"not a node", x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:nodes"}}}, client, "common name"},
		{"empty node name", x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:", Organization: []string{"system:nodes"}}}, client, "common name"},
		{"DNS SAN", x509.CertificateRequest{Subject: node, DNSNames: []string{"n1"}}, client, "subjectAltNames"},
		{"URI SAN", x509.CertificateRequest{Subject: node, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}}, client, "subjectAltNames"},
		{"server auth", x509.CertificateRequest{Subject: node}, append(client, certificatesv1.UsageServerAuth), "not allowed"},
		{"no client auth", x509.CertificateRequest{Subject: node}, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}, "client auth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := nodeClientProblem(req(t, &tc.tmpl), tc.usages)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want none, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
}

// TestIssue: the subject and key of the request, client auth, backdated,
// the shorter of the configured and requested durations.
func TestIssue(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{cfg: Config{CA: ca, Duration: 48 * time.Hour}}
	r := req(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}})
	for _, tc := range []struct {
		expiration *int32
		want       time.Duration
	}{
		{nil, 48 * time.Hour},
		{ptr.To[int32](3600), time.Hour},
		{ptr.To[int32](7 * 24 * 3600), 48 * time.Hour},
	} {
		csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			ExpirationSeconds: tc.expiration,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		}}
		before := time.Now()
		out, err := c.issue(r, csr)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(out)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: mustPool(t, ca.PEM), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("issued certificate does not verify for client auth: %v", err)
		}
		if cert.Subject.CommonName != "system:node:n1" || cert.Subject.Organization[0] != "system:nodes" {
			t.Fatalf("subject %v", cert.Subject)
		}
		if life := cert.NotAfter.Sub(before); life < tc.want-time.Minute || life > tc.want+time.Minute {
			t.Fatalf("expiration %v: valid for %v, want %v", tc.expiration, life, tc.want)
		}
		if cert.NotBefore.After(before.Add(-4 * time.Minute)) {
			t.Fatalf("not backdated: %v", cert.NotBefore)
		}
		if cert.KeyUsage != x509.KeyUsageDigitalSignature {
			t.Fatalf("key usage %v", cert.KeyUsage)
		}
	}
}

func mustPool(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	p, err := pki.CertPool(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
