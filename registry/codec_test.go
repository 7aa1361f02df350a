package registry

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecodeObjectMeta: DecodeObjectMeta gives what json.Unmarshal gives.
func TestDecodeObjectMeta(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC))
	grace := int64(30)
	metas := map[string]metav1.ObjectMeta{
		"empty": {},
		"full": {Name: "p", GenerateName: "p-", Namespace: "ns", SelfLink: "/x", UID: "u-1", ResourceVersion: "42",
			Generation: 3, CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			Labels: map[string]string{"a": "b", `k"\`: "\u2028<>&\"", "e": ""}, Annotations: map[string]string{"x": "{\"y\":1}"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "u"}},
			Finalizers:      []string{"a/b", "c"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}},
		},
	}
	for name, m := range metas {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var want, got metav1.ObjectMeta
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if err := DecodeObjectMeta(data, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", name, got, want)
		}
	}
	// Forms json.Marshal does not write but encoding/json reads.
	for _, data := range []string{`{"labels":{},"finalizers":[],"annotations":null,"generation":null,"deletionTimestamp":null,"unknown":[1,{"a":"}"}]}`, `null`} {
		var want, got metav1.ObjectMeta
		if err := json.Unmarshal([]byte(data), &want); err != nil {
			t.Fatal(err)
		}
		if err := DecodeObjectMeta([]byte(data), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, %v; want %#v", data, got, err, want)
		}
	}
	for _, bad := range []string{`[]`, `{"name":1}`, `{"creationTimestamp":"yesterday"}`, `{"labels":{"a":1}}`, `{"generation":"1"}`, `{"name":"x"`} {
		var m metav1.ObjectMeta
		if err := DecodeObjectMeta([]byte(bad), &m); err == nil {
			t.Errorf("DecodeObjectMeta(%s) did not fail", bad)
		}
	}
}
