package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/test/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clientWithCert is a client-go config for srv trusting its CA and
// presenting pair.
func clientWithCert(pair pki.KeyPair) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.CertData, c.KeyData = pair.CertPEM, pair.KeyPEM
	return c
}

// TestTLSClientCertificates: the server speaks HTTP/2 over TLS; a client
// certificate of the client CA authenticates its CN (seen in who the
// impersonation refusal names), one of another CA is kube's 401, and no
// certificate at all is anonymous.
func TestTLSClientCertificates(t *testing.T) {
	resp, err := testserver.HTTPClient().Get(srv.URL() + "/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Errorf("/version over %s (TLS %v), want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}

	alice, err := testserver.IssueClient("alice", "devs")
	if err != nil {
		t.Fatal(err)
	}
	c := clientWithCert(alice)
	c.Impersonate.UserName = "bob"
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), `User "alice" cannot impersonate resource "users"`) {
		t.Errorf("alice impersonating bob: %v, want kube's 403 naming alice", err)
	}

	otherCA, err := pki.NewCA("not-trusted")
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := otherCA.Client("mallory", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(clientWithCert(mallory))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = hc.Get(srv.URL() + "/api/v1/namespaces/default")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st metav1.Status
	if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &st) != nil ||
		st.Reason != metav1.StatusReasonUnauthorized || st.Message != "Unauthorized" || st.Code != 401 {
		t.Errorf("certificate of another CA: %d %s, want kube's 401", resp.StatusCode, body)
	}

	resp, err = testserver.AnonymousHTTPClient().Get(srv.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("anonymous /readyz: %d %s", resp.StatusCode, body)
	}
}
