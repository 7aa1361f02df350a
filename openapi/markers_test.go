package openapi

import (
	"testing"

	"github.com/corekube/corekube/registry/certificatesigningrequests"
	"github.com/corekube/corekube/registry/rolebindings"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
)

// TestRBACAndCertificatesMarkers checks the markers of rbac/v1 and
// certificates/v1 that the patch tags do not give, through the field sets
// server-side apply records: a RoleBinding's roleRef is atomic
// (+structType=atomic), a CSR's status.conditions are keyed by type
// (+listType=map, +listMapKey=type).
func TestRBACAndCertificatesMarkers(t *testing.T) {
	rb, csr := rolebindings.NewStrategy(), certificatesigningrequests.NewStrategy()
	tc, err := TypeConverter([]Resource{
		{Info: rb.Info(), Object: rb.New(), List: rb.NewList()},
		{Info: csr.Info(), Object: csr.New(), List: csr.NewList()},
	})
	if err != nil {
		t.Fatal(err)
	}
	fields := func(obj runtime.Object) *fieldpath.Set {
		t.Helper()
		typed, err := tc.ObjectToTyped(obj)
		if err != nil {
			t.Fatal(err)
		}
		set, err := typed.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		return set
	}

	binding := fields(&rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "b"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	})
	if !binding.Has(fieldpath.MakePathOrDie("roleRef")) || binding.Has(fieldpath.MakePathOrDie("roleRef", "name")) {
		t.Errorf("roleRef is not atomic:\n%v", binding)
	}
	subjects := "subjects"
	if !binding.Has(fieldpath.MakePathOrDie(subjects)) || !binding.WithPrefix(fieldpath.PathElement{FieldName: &subjects}).Empty() {
		t.Errorf("subjects are not atomic:\n%v", binding)
	}

	request := fields(&certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "R"},
		}},
	})
	approved := fieldpath.MakePathOrDie("status", "conditions", fieldpath.KeyByFields("type", "Approved"), "reason")
	if !request.Has(approved) {
		t.Errorf("status.conditions are not keyed by type: no %v in\n%v", approved, request)
	}
}
