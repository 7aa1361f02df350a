package namespaces

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNamespaceTableRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}}
	row, err := NewStrategy().TableRow(ns, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{"dev", "Terminating", "90s"}; !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("cells %#v, want %#v", row.Cells, want)
	}
}
