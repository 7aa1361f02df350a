package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/agent/bootstrap"
	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/controllers/certificates"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// csrServer is a server with a bootstrap token (group system:bootstrappers,
// from the token file) and the certificates controller signing with its CA.
func csrServer(t *testing.T) (s *testserver.Server, boot *rest.Config) {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("bootstrap-token,system:bootstrap:abcdef,uid-boot,system:bootstrappers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = testserver.StartWith(t, dir, func(c *server.Config) { c.TokenAuthFile = tokenFile })
	certPEM, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(s.Client, 0)
	ctrl, err := certificates.New(s.Client, factory, certificates.Config{CA: ca, Logger: testserver.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctrl.Start(ctx) }()
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	boot = rest.AnonymousClientConfig(s.Config)
	boot.BearerToken = "bootstrap-token"
	return s, boot
}

func csrRequest(t *testing.T, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func mustClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitCSR polls the CSR until done says so, with a deadline.
func waitCSR(t *testing.T, c kubernetes.Interface, name string, done func(*certificatesv1.CertificateSigningRequest) bool) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		csr, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if done(csr) {
			return csr
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSR %s not done: %+v", name, csr.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCSRBootstrapNode: a node bootstraps with the bootstrap token; the
// controllers approve (the bootstrappers may create nodeclient) and sign;
// the certificate is stored 0600 and authenticates as system:node:NAME in
// system:nodes; a restarted manager reuses it.
func TestCSRBootstrapNode(t *testing.T) {
	s, boot := csrServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	certDir := t.TempDir()
	m := bootstrap.New(boot, certDir, "node-7", testserver.Logger())
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("certificate file mode %v", fi.Mode().Perm())
	}
	list, err := s.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d CSRs", len(list.Items))
	}
	csr := list.Items[0]
	if csr.Spec.Username != "system:bootstrap:abcdef" || csr.Spec.UID != "uid-boot" || !strings.Contains(strings.Join(csr.Spec.Groups, ","), "system:bootstrappers") {
		t.Fatalf("requester not recorded: %+v", csr.Spec)
	}
	if c := csr.Status.Conditions; len(c) != 1 || c[0].Type != certificatesv1.CertificateApproved || c[0].Reason != "AutoApproved" {
		t.Fatalf("conditions %+v", c)
	}

	rc, err := m.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	review, err := mustClient(t, rc).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != "system:node:node-7" || !strings.Contains(strings.Join(u.Groups, ","), "system:nodes") {
		t.Fatalf("the node's certificate authenticates as %+v", u)
	}

	again := bootstrap.New(boot, certDir, "node-7", testserver.Logger())
	if err := again.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if list, err = s.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("a stored valid certificate was requested again: %v, %d CSRs", err, len(list.Items))
	}
}

// TestCSRApproval: a CSR of another signer waits for a human; the
// bootstrapper cannot approve it (RBAC), a user allowed to update approval
// but not to approve for the signer gets kube's 403, the admin approves
// (UpdateApproval) and the signer issues; a denied request is never
// signed; the spec is immutable and names the requester.
func TestCSRApproval(t *testing.T) {
	s, boot := csrServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bc := mustClient(t, boot)
	csrs := bc.CertificatesV1().CertificateSigningRequests()
	newCSR := func(name string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    csrRequest(t, "jane", "devs"),
				SignerName: certificatesv1.KubeAPIServerClientSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
				Username:   "system:admin",
				Groups:     []string{"system:masters"},
			},
		}
	}
	created, err := csrs.Create(ctx, newCSR("jane"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Username != "system:bootstrap:abcdef" || strings.Contains(strings.Join(created.Spec.Groups, ","), "system:masters") {
		t.Fatalf("the client chose the requester: %+v", created.Spec)
	}

	// Invalid requests.
	bad := newCSR("bad")
	bad.Spec.Request = []byte("nope")
	bad.Spec.SignerName = "signer"
	_, err = csrs.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "PEM block type must be CERTIFICATE REQUEST") ||
		!strings.Contains(err.Error(), "spec.signerName") {
		t.Fatalf("want invalid request and signer, got %v", err)
	}

	approve := func(c kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) error {
		csr = csr.DeepCopy()
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: typ, Status: v1.ConditionTrue, Reason: "Test", Message: "by the test"})
		_, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		return err
	}
	if err := approve(bc, created, certificatesv1.CertificateApproved); !apierrors.IsForbidden(err) {
		t.Fatalf("the bootstrapper approved: %v", err)
	}

	// A user who may update approvals but not approve for this signer.
	if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-approval-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"certificatesigningrequests", "certificatesigningrequests/approval"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-approval-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "csr-approval-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "clerk"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clerkCfg := rest.CopyConfig(s.Config)
	clerkCfg.Impersonate.UserName = "clerk"
	clerk := mustClient(t, clerkCfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = approve(clerk, created, certificatesv1.CertificateApproved)
		// RBAC's cache follows the binding; until then, RBAC's 403.
		if err != nil && strings.Contains(err.Error(), "user not permitted to approve requests with signerName") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want kube's signer 403, got %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := `certificatesigningrequests.certificates.k8s.io "jane" is forbidden: user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}

	if err := approve(s.Client, created, certificatesv1.CertificateApproved); err != nil {
		t.Fatal(err)
	}
	issued := waitCSR(t, s.Client, "jane", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
	block, _ := pem.Decode(issued.Status.Certificate)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "jane" || cert.Subject.Organization[0] != "devs" {
		t.Fatalf("issued for %v", cert.Subject)
	}

	// Denied: never signed; Approved cannot be added to it.
	denied, err := csrs.Create(ctx, newCSR("joe"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := approve(s.Client, denied, certificatesv1.CertificateDenied); err != nil {
		t.Fatal(err)
	}
	denied = waitCSR(t, s.Client, "joe", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Conditions) == 1 })
	err = approve(s.Client, denied, certificatesv1.CertificateApproved)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Approved and Denied conditions are mutually exclusive") {
		t.Fatalf("want approval of a denied CSR refused, got %v", err)
	}

	// The spec cannot change through the main resource.
	upd := issued.DeepCopy()
	upd.Spec.SignerName = "example.com/other"
	upd.Labels = map[string]string{"a": "b"}
	after, err := s.Client.CertificatesV1().CertificateSigningRequests().Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName || after.Labels["a"] != "b" || len(after.Status.Certificate) == 0 {
		t.Fatalf("update changed spec or status: %+v", after)
	}
}

// TestCSRRenewal: a node renews its certificate as itself (the
// selfnodeclient approval); the new certificate is stored and used, and a
// node may not have another node's certificate approved.
func TestCSRRenewal(t *testing.T) {
	s, boot := csrServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Nodes create CSRs by kube's system:node role, which the Node
	// authorizer grants; here RBAC does.
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nodes-csr"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := bootstrap.New(boot, t.TempDir(), "node-3", testserver.Logger())
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.Current().Leaf.SerialNumber
	rc, err := m.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := mustClient(t, rc)
	// RBAC's cache follows the binding: retry until the node may create.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = m.Renew(ctx)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m.Current().Leaf.SerialNumber.Cmp(first) == 0 {
		t.Fatal("renewal kept the certificate")
	}
	list, err := s.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var renewed *certificatesv1.CertificateSigningRequest
	for i := range list.Items {
		if list.Items[i].Spec.Username == "system:node:node-3" {
			renewed = &list.Items[i]
		}
	}
	if renewed == nil || !strings.Contains(renewed.Status.Conditions[0].Message, "self kubelet client certificate") {
		t.Fatalf("no self-renewal CSR approved: %+v", list.Items)
	}
	// The client config uses the new certificate.
	review, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username != "system:node:node-3" {
		t.Fatalf("after renewal: %v %+v", err, review)
	}

	// node-3 asking for node-4's certificate is left pending: not its
	// own (selfnodeclient) and not a bootstrapper (nodeclient).
	other, err := nodeClient.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "steal"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: csrRequest(t, "system:node:node-4", "system:nodes"), SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A later CSR approved: the controller has (most likely: its workers
	// run in parallel) handled "steal", which came first in its queue.
	if err := bootstrap.New(boot, t.TempDir(), "node-5", testserver.Logger()).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || len(got.Status.Certificate) != 0 {
		t.Fatalf("another node's certificate was approved: %+v", got.Status)
	}
}

// TestCSRAdmission: no system:masters through kube-apiserver-client
// (CertificateSubjectRestriction); writing a certificate needs the sign
// verb for the signer (CertificateSigning); CSRs select by
// spec.signerName.
func TestCSRAdmission(t *testing.T) {
	s, boot := csrServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	csrs := mustClient(t, boot).CertificatesV1().CertificateSigningRequests()
	newCSR := func(name, signer string, orgs ...string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrRequest(t, name, orgs...), SignerName: signer,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
		}
	}
	_, err := csrs.Create(ctx, newCSR("root", certificatesv1.KubeAPIServerClientSignerName, "system:masters"), metav1.CreateOptions{})
	want := `certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	// Another signer may issue system:masters: kube restricts only its own.
	custom, err := csrs.Create(ctx, newCSR("custom", "example.com/custom", "system:masters"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := csrs.Create(ctx, newCSR("other", certificatesv1.KubeAPIServerClientSignerName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := s.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/custom"})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "CSRs of example.com/custom", names(t, list), "custom")

	// The admin approves; a signer without the sign verb cannot write the
	// certificate.
	custom.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "Test"}}
	custom, err = s.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "custom", custom, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-status-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"certificatesigningrequests", "certificatesigningrequests/status"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-status-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "csr-status-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "forger"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	forgerCfg := rest.CopyConfig(s.Config)
	forgerCfg.Impersonate.UserName = "forger"
	forger := mustClient(t, forgerCfg)
	pair, err := testserver.IssueClient("x")
	if err != nil {
		t.Fatal(err)
	}
	custom.Status.Certificate = pair.CertPEM
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = forger.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, custom, metav1.UpdateOptions{})
		if err != nil && strings.Contains(err.Error(), "user not permitted to sign") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the sign check's 403, got %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want = `certificatesigningrequests.certificates.k8s.io "custom" is forbidden: user not permitted to sign requests with signerName "example.com/custom"`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	// With sign on example.com/* it may.
	if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "custom-signer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"sign"}, APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"signers"}, ResourceNames: []string{"example.com/*"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "custom-signer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "custom-signer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "forger"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err = forger.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, custom, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("signer with sign on example.com/*: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCSRApproverAsksAuthorizer: the approver decides by a
// SubjectAccessReview, not by group: any user RBAC lets create
// certificatesigningrequests/nodeclient has a node certificate approved.
func TestCSRApproverAsksAuthorizer(t *testing.T) {
	s, _ := csrServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, role := range []string{"system:node-bootstrapper", "system:certificates.k8s.io:certificatesigningrequests:nodeclient"} {
		if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "provisioner-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "provisioner"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate.UserName = "provisioner"
	m := bootstrap.New(cfg, t.TempDir(), "node-9", testserver.Logger())
	deadline := time.Now().Add(30 * time.Second)
	for {
		// RBAC's cache follows the bindings: until then, create is refused.
		err := m.Ensure(ctx)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cn := m.Current().Leaf.Subject.CommonName; cn != "system:node:node-9" {
		t.Fatalf("issued for %s", cn)
	}
}
