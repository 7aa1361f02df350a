package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestOperatorCertificates: kube's --tls-cert-file, --tls-private-key-file
// and --client-ca-file: the server presents the operator's certificate,
// trusts only the operator's client CA (the test CA's admin certificate is
// refused), and its own loopback clients (the ServiceAccounts controller)
// still reach it.
func TestOperatorCertificates(t *testing.T) {
	dir := t.TempDir()
	servingCA, err := pki.NewCA("operator-serving-ca")
	if err != nil {
		t.Fatal(err)
	}
	clientCA, err := pki.NewCA("operator-client-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := servingCA.Serving(pki.ServingRequest{CommonName: "api", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := clientCA.Client("alice", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s := testserver.StartWith(t, filepath.Join(dir, "data"), func(c *server.Config) {
		c.TLSCertFile = write("serving.crt", serving.CertPEM)
		c.TLSPrivateKeyFile = write("serving.key", serving.KeyPEM)
		c.ClientCAFile = write("client-ca.crt", clientCA.PEM)
	})
	ctx := t.Context()

	asAlice := &rest.Config{Host: s.URL(), QPS: -1, TLSClientConfig: rest.TLSClientConfig{
		CAData: servingCA.PEM, CertData: alice.CertPEM, KeyData: alice.KeyPEM,
	}}
	cs := kubernetes.NewForConfigOrDie(asAlice)
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("alice, by the operator's client CA: %v", err)
	}
	if got := review.Status.UserInfo; got.Username != "alice" || !slices.Contains(got.Groups, "system:masters") {
		t.Errorf("alice is seen as %+v", got)
	}

	// The test CA signs neither the serving certificate nor trusted
	// client certificates any more.
	if _, err := s.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("a client trusting the test CA accepted the operator's serving certificate")
	}
	admin := testserver.ClientConfig(s.URL())
	admin.CAData = servingCA.PEM
	_, err = kubernetes.NewForConfigOrDie(admin).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("the test CA's admin certificate: %v, want 401", err)
	}

	// The loopback clients verify the server under its loopback name: the
	// ServiceAccounts controller gives a new namespace its default account.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "operator-certs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("operator-certs").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}
