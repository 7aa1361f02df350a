package registry

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestMarshalJSON: MarshalJSON writes what json.Marshal writes, and does
// not change the object it encodes.
func TestMarshalJSON(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}`)}},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}, Subresource: "status"},
		{Manager: "odd", FieldsV1: &metav1.FieldsV1{Raw: []byte("{ \"f:metadata\" : {\"f:annotations\":{\"f:a<b\":{}}} }")}},
		{},
		{FieldsV1: &metav1.FieldsV1{}},
		{Subresource: "status"},
	}
	pod := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "<x>"}, ManagedFields: managed},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
	}
	objects := map[string]any{
		"pod":                      pod,
		"no metadata fields":       &v1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed[:1]}},
		"no managedFields":         &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}},
		"empty managedFields list": &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{}}},
		"partial object metadata":  &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: pod.ObjectMeta},
		"table": &metav1.Table{
			TypeMeta:          metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
			ListMeta:          metav1.ListMeta{ResourceVersion: "7"},
			ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}},
			Rows: []metav1.TableRow{
				{Cells: []any{"p", int64(1)}, Object: runtime.RawExtension{Object: &metav1.PartialObjectMetadata{ObjectMeta: pod.ObjectMeta}}},
				{Cells: []any{"q"}, Conditions: []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue}}, Object: runtime.RawExtension{Object: pod}},
				{Cells: []any{"r"}},
				{Cells: []any{"s"}, Object: runtime.RawExtension{Raw: []byte(`{"a":1}`)}},
			},
		},
		"table without rows": &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}},
		"table with no rows": &metav1.Table{Rows: []metav1.TableRow{}},
	}
	for name, obj := range objects {
		want, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalJSON(obj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	if len(pod.ManagedFields) != len(managed) {
		t.Errorf("MarshalJSON changed the object's managedFields: %v", pod.ManagedFields)
	}
}
