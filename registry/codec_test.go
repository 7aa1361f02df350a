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
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:status":{}}}}}`)}, Subresource: "status"},
				{},
			},
		},
		"empty managedFields": {Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{}},
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
	for _, bad := range []string{`[]`, `{"name":1}`, `{"managedFields":{}}`, `{"managedFields":[{"manager":1}]}`, `{"creationTimestamp":"yesterday"}`, `{"labels":{"a":1}}`, `{"generation":"1"}`, `{"name":"x"`} {
		var m metav1.ObjectMeta
		if err := DecodeObjectMeta([]byte(bad), &m); err == nil {
			t.Errorf("DecodeObjectMeta(%s) did not fail", bad)
		}
	}
}

// TestWithoutManagedFields: the JSON without managedFields decodes to what
// the whole JSON decodes to, managedFields aside, wherever they stand.
func TestWithoutManagedFields(t *testing.T) {
	mf := `[{"manager":"m","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:a":{}}}}}]`
	for name, doc := range map[string]string{
		"last (encoding/json's order)": `{"kind":"Pod","metadata":{"name":"p","labels":{"a":"b"},"managedFields":` + mf + `},"spec":{}}`,
		"first":                        `{"metadata":{"managedFields":` + mf + `,"name":"p","labels":{"a":"b"}},"spec":{}}`,
		"middle":                       `{"metadata":{"name":"p","managedFields":` + mf + `,"labels":{"a":"b"}}}`,
		"alone":                        `{"metadata":{"managedFields":` + mf + `},"spec":{}}`,
		"spaces":                       `{ "metadata" : { "name" : "p" , "managedFields" : ` + mf + ` } }`,
		"none":                         `{"metadata":{"name":"p"},"spec":{}}`,
		"no metadata":                  `{"spec":{}}`,
		"a label called managedFields": `{"metadata":{"labels":{"managedFields":"x"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var whole, stripped map[string]any
			if err := json.Unmarshal([]byte(doc), &whole); err != nil {
				t.Fatal(err)
			}
			out := withoutManagedFields([]byte(doc))
			if err := json.Unmarshal(out, &stripped); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if m, ok := whole["metadata"].(map[string]any); ok {
				delete(m, "managedFields")
			}
			if !reflect.DeepEqual(whole, stripped) {
				t.Errorf("got %s", out)
			}
		})
	}
}
