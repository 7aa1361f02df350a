package serviceaccounts

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSecretReferencesKeepOnlyNames(t *testing.T) {
	sa := &v1.ServiceAccount{Secrets: []v1.ObjectReference{{Name: "a", Namespace: "other", Kind: "Secret", UID: "u"}}}
	NewStrategy().PrepareForCreate(context.Background(), sa)
	if want := []v1.ObjectReference{{Name: "a"}}; !reflect.DeepEqual(sa.Secrets, want) {
		t.Errorf("secrets %+v, want %+v", sa.Secrets, want)
	}
	sa.Secrets = append(sa.Secrets, v1.ObjectReference{Name: "b", FieldPath: "x"})
	NewStrategy().PrepareForUpdate(context.Background(), sa, &v1.ServiceAccount{})
	if want := []v1.ObjectReference{{Name: "a"}, {Name: "b"}}; !reflect.DeepEqual(sa.Secrets, want) {
		t.Errorf("after update secrets %+v, want %+v", sa.Secrets, want)
	}
}

func TestTableRow(t *testing.T) {
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		Secrets: []v1.ObjectReference{{Name: "s"}}}
	row, err := NewStrategy().TableRow(sa, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{"bot", int64(1), "90s"}; !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("cells %#v, want %#v", row.Cells, want)
	}
	if cols := NewStrategy().TableColumns(); len(cols) != 3 || cols[1].Name != "Secrets" {
		t.Errorf("columns %+v", cols)
	}
}

func TestFieldSelectors(t *testing.T) {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "ns", Labels: map[string]string{"a": "b"}}}
	l, f, err := NewStrategy().GetAttrs(sa)
	if err != nil || l["a"] != "b" || len(f) != 2 || f["metadata.name"] != "bot" || f["metadata.namespace"] != "ns" {
		t.Errorf("GetAttrs = %v %v %v", l, f, err)
	}
}
