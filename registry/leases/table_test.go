package leases

import (
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeaseTableRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	holder := "node-1"
	s := NewStrategy()
	for _, c := range []struct {
		holder *string
		want   []any
	}{
		{&holder, []any{"l", "node-1", "8d"}},
		{nil, []any{"l", "", "8d"}},
	} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", CreationTimestamp: metav1.NewTime(now.Add(-200 * time.Hour))},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: c.holder}}
		row, err := s.TableRow(lease, now)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(row.Cells, c.want) {
			t.Errorf("cells %#v, want %#v", row.Cells, c.want)
		}
	}
}
