package authenticator

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/corekube/corekube/auth/pki"
)

func TestX509(t *testing.T) {
	ca, err := pki.NewCA("client-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	a := NewX509(func() *x509.CertPool { return pool })

	leaf := func(pair pki.KeyPair, err error) *x509.Certificate {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		c, err := pair.TLSCertificate()
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	alice := leaf(ca.Client("alice", "devs", "ops"))

	r := httptest.NewRequest("GET", "/", nil)
	if _, ok, err := a.AuthenticateRequest(r); ok || err != nil {
		t.Errorf("plain HTTP: ok=%v err=%v, want not mine", ok, err)
	}
	r.TLS = &tls.ConnectionState{}
	if _, ok, err := a.AuthenticateRequest(r); ok || err != nil {
		t.Errorf("no certificate: ok=%v err=%v, want not mine", ok, err)
	}
	for i := range 2 { // the second time from the cache
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{alice}}
		resp, ok, err := a.AuthenticateRequest(r)
		if !ok || err != nil || resp.User.Name != "alice" || !slices.Equal(slices.Sorted(slices.Values(resp.User.Groups)), []string{"devs", "ops"}) {
			t.Errorf("round %d: %+v %v %v", i, resp.User, ok, err)
		}
	}
	for name, cert := range map[string]*x509.Certificate{
		"another CA":         leaf(other.Client("mallory", "system:masters")),
		"serving, no client": leaf(ca.Serving(pki.ServingRequest{CommonName: "bob", Hosts: []string{"localhost"}})),
	} {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		if resp, ok, err := a.AuthenticateRequest(r); ok || err == nil {
			t.Errorf("%s: %+v ok=%v err=%v, want an error", name, resp, ok, err)
		}
	}
}
