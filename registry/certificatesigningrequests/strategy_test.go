package certificatesigningrequests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/auth/user"
)

func request(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func validCSR(t *testing.T) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request(t),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

func TestValidate(t *testing.T) {
	s := NewStrategy()
	ctx := context.Background()
	cases := []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		want   string // "" for valid
	}{
		{"valid", func(*certificatesv1.CertificateSigningRequest) {}, ""},
		{"not PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("junk") },
			"spec.request: Invalid value: \"<redacted>\": PEM block type must be CERTIFICATE REQUEST"},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }, "spec.signerName: Required value"},
		{"bad signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubelet" },
			"must be a fully qualified domain and path of the form 'example.com/signer-name'"},
		{"bad signer domain", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "x/y" },
			"the domain portion of the signerName must be a fully qualified domain name"},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, "spec.usages: Required value"},
		{"unknown usage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = []certificatesv1.KeyUsage{"flying"} },
			"spec.usages[0]: Unsupported value: \"flying\""},
		{"duplicate usage", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageClientAuth}
		}, "spec.usages[1]: Duplicate value: \"client auth\""},
		{"short expiration", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](599) },
			"spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"},
		{"expiration 600", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](600) }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr := validCSR(t)
			tc.mutate(csr)
			s.PrepareForCreate(ctx, csr)
			errs := s.Validate(ctx, csr).ToAggregate()
			switch {
			case tc.want == "" && errs != nil:
				t.Fatalf("want valid, got %v", errs)
			case tc.want != "" && (errs == nil || !strings.Contains(errs.Error(), tc.want)):
				t.Fatalf("want %q, got %v", tc.want, errs)
			}
		})
	}
}

func TestPrepareForCreateSetsRequester(t *testing.T) {
	csr := validCSR(t)
	csr.Spec.Username = "system:masters-wannabe"
	csr.Spec.Groups = []string{"system:masters"}
	csr.Status.Certificate = []byte("x")
	ctx := user.WithUser(context.Background(), &user.Info{Name: "bootstrap", UID: "u1", Groups: []string{"system:bootstrappers", "system:authenticated"},
		Extra: map[string][]string{"k": {"v"}}})
	NewStrategy().PrepareForCreate(ctx, csr)
	if csr.Spec.Username != "bootstrap" || csr.Spec.UID != "u1" || strings.Join(csr.Spec.Groups, ",") != "system:bootstrappers,system:authenticated" ||
		csr.Spec.Extra["k"][0] != "v" || csr.Status.Certificate != nil {
		t.Fatalf("spec not the requester's or status kept: %+v %+v", csr.Spec, csr.Status)
	}
}

func approved() certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "R"}
}

func TestSubresources(t *testing.T) {
	ctx := context.Background()
	old := validCSR(t)
	NewStrategy().PrepareForCreate(ctx, old)

	// Update of the main resource: spec and status kept.
	upd := old.DeepCopy()
	upd.Spec.SignerName = "example.com/other"
	upd.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{approved()}
	NewStrategy().PrepareForUpdate(ctx, upd, old)
	if upd.Spec.SignerName != old.Spec.SignerName || len(upd.Status.Conditions) != 0 {
		t.Fatalf("main update changed spec or status: %+v", upd)
	}

	// Approval: conditions change, a certificate does not.
	appr := old.DeepCopy()
	appr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{approved()}
	appr.Status.Certificate = []byte("junk")
	NewApprovalStrategy().PrepareForUpdate(ctx, appr, old)
	if len(appr.Status.Conditions) != 1 || appr.Status.Certificate != nil {
		t.Fatalf("approval: %+v", appr.Status)
	}
	if errs := NewApprovalStrategy().ValidateUpdate(ctx, appr, old); len(errs) != 0 {
		t.Fatal(errs)
	}

	// Approved and Denied together are invalid.
	both := appr.DeepCopy()
	both.Status.Conditions = append(both.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue})
	NewApprovalStrategy().PrepareForUpdate(ctx, both, appr)
	if errs := NewApprovalStrategy().ValidateUpdate(ctx, both, appr).ToAggregate(); errs == nil || !strings.Contains(errs.Error(), "Approved and Denied conditions are mutually exclusive") {
		t.Fatalf("want exclusive conditions refused, got %v", errs)
	}
	// An approval is never removed.
	removed := appr.DeepCopy()
	removed.Status.Conditions = nil
	NewApprovalStrategy().PrepareForUpdate(ctx, removed, appr)
	if errs := NewApprovalStrategy().ValidateUpdate(ctx, removed, appr).ToAggregate(); errs == nil || !strings.Contains(errs.Error(), `updates may not remove a condition of type "Approved"`) {
		t.Fatalf("want removal refused, got %v", errs)
	}

	// Status: the approval is kept whatever the signer sends; a
	// certificate needs an approval and must be PEM certificates.
	st := old.DeepCopy()
	st.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{approved()}
	st.Status.Certificate = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	NewStatusStrategy().PrepareForUpdate(ctx, st, old)
	if len(st.Status.Conditions) != 0 {
		t.Fatalf("status wrote an approval: %+v", st.Status.Conditions)
	}
	errs := NewStatusStrategy().ValidateUpdate(ctx, st, old).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), "certificate may only be set if the Approved condition is present") {
		t.Fatalf("want unapproved certificate refused, got %v", errs)
	}
}

func TestTableRow(t *testing.T) {
	now := time.Now()
	csr := validCSR(t)
	csr.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
	csr.Spec.Username = "system:bootstrap:abc"
	csr.Spec.ExpirationSeconds = ptr.To[int32](3600)
	for _, tc := range []struct {
		conds []certificatesv1.CertificateSigningRequestCondition
		cert  []byte
		want  string
	}{
		{nil, nil, "Pending"},
		{[]certificatesv1.CertificateSigningRequestCondition{approved()}, nil, "Approved"},
		{[]certificatesv1.CertificateSigningRequestCondition{approved()}, []byte("c"), "Approved,Issued"},
		{[]certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue}}, nil, "Denied"},
		{[]certificatesv1.CertificateSigningRequestCondition{approved(), {Type: certificatesv1.CertificateFailed, Status: v1.ConditionTrue}}, nil, "Approved,Failed"},
	} {
		csr.Status.Conditions, csr.Status.Certificate = tc.conds, tc.cert
		row, err := NewStrategy().TableRow(csr, now)
		if err != nil {
			t.Fatal(err)
		}
		want := []any{"csr-1", "90s", "kubernetes.io/kube-apiserver-client-kubelet", "system:bootstrap:abc", "60m", tc.want}
		for i := range want {
			if row.Cells[i] != want[i] {
				t.Fatalf("cell %d: got %v, want %v (row %v)", i, row.Cells[i], want[i], row.Cells)
			}
		}
	}
	if n := len(NewStrategy().TableColumns()); n != 6 {
		t.Fatalf("%d columns", n)
	}
}
