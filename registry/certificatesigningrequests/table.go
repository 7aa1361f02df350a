package certificatesigningrequests

import (
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// TableColumns are kube's CSR columns (kubectl get csr).
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	doc := certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.AgeColumn(),
		registry.StringColumn("SignerName", doc["signerName"]),
		registry.StringColumn("Requestor", "Name of the user which submitted the request."),
		registry.StringColumn("RequestedDuration", doc["expirationSeconds"]),
		registry.StringColumn("Condition", certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]),
	}
}

// TableRow prints a CSR as kube's printCertificateSigningRequest does.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a CertificateSigningRequest, got %T", obj)
	}
	signer := "<none>"
	if csr.Spec.SignerName != "" {
		signer = csr.Spec.SignerName
	}
	requested := "<none>"
	if e := csr.Spec.ExpirationSeconds; e != nil {
		requested = duration.HumanDuration(time.Duration(*e) * time.Second)
	}
	return metav1.TableRow{Cells: []any{
		csr.Name, registry.TableAge(csr.CreationTimestamp, now), signer, csr.Spec.Username, requested, conditionString(csr),
	}}, nil
}

// conditionString is kube's: Approved/Denied (or Pending), then Failed,
// then Issued, joined by commas.
func conditionString(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		if c.Status == v1.ConditionFalse {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	var out []string
	switch {
	case denied:
		out = append(out, "Denied")
	case approved:
		out = append(out, "Approved")
	default:
		out = append(out, "Pending")
	}
	if failed {
		out = append(out, "Failed")
	}
	if len(csr.Status.Certificate) > 0 {
		out = append(out, "Issued")
	}
	return strings.Join(out, ",")
}
