package poddisruptionbudgets

import (
	"reflect"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodDisruptionBudgetTableRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-3 * time.Minute))
	two, half := intstr.FromInt32(2), intstr.FromString("50%")
	cases := []struct {
		spec policyv1.PodDisruptionBudgetSpec
		want []any
	}{
		{policyv1.PodDisruptionBudgetSpec{MinAvailable: &two}, []any{"pdb", "2", "N/A", int64(1), "3m"}},
		{policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &half}, []any{"pdb", "N/A", "50%", int64(1), "3m"}},
	}
	s := NewStrategy()
	for _, c := range cases {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb", CreationTimestamp: created}, Spec: c.spec,
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
		row, err := s.TableRow(pdb, now)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(row.Cells, c.want) {
			t.Errorf("cells %#v, want %#v", row.Cells, c.want)
		}
	}
	if cols := s.TableColumns(); len(cols) != 5 || cols[3].Type != "integer" {
		t.Errorf("columns %+v", cols)
	}
}
