package rawproto

import (
	"bytes"
	"encoding/binary"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestManagedFields: the entries of a message gogo wrote are found as the
// run that ends its metadata, one record each, in order; a message with
// none, one whose entries are followed by another metadata field (not
// gogo's order) and one that does not parse are refused.
func TestManagedFields(t *testing.T) {
	at := metav1.Unix(1764000000, 0)
	entry := func(manager, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"app": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{entry("kubectl", `{"f:spec":{}}`), entry("kubelet", `{"f:status":{}}`)}},
		Spec: v1.PodSpec{NodeName: "n1"},
	}
	msg, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	start, entries, ok := ManagedFields(msg)
	if !ok || len(entries) != 2 {
		t.Fatalf("ManagedFields = %d entries, ok %v; want 2", len(entries), ok)
	}
	for i, e := range entries {
		want, err := pod.ManagedFields[i].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		// Field 17's key takes two bytes.
		field := append(binary.AppendUvarint(binary.AppendUvarint(nil, metaManagedFields<<3|wireBytes), uint64(len(want))), want...)
		if !bytes.Equal(e, field) {
			t.Errorf("entry %d = %x, want the field of %x", i, e, want)
		}
	}
	run := bytes.Join(entries, nil)
	if !bytes.Equal(msg[start:start+len(run)], run) {
		t.Error("the entries are not the run at start")
	}
	if end := start + len(run); end >= len(msg) || msg[end] != 2<<3|wireBytes {
		t.Errorf("the run does not end where metadata ends (spec, field 2, next)")
	}
	bare := pod.DeepCopy()
	bare.ManagedFields = nil
	rest, err := bare.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := ManagedFields(rest); ok {
		t.Error("a message without entries has entries")
	}
	// An entry, then metadata's name again: gogo never writes that.
	meta, err := pod.ObjectMeta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	meta = appendStringField(meta, 1, "b")
	if _, _, ok := ManagedFields(AppendField(nil, objectMetaField, meta)); ok {
		t.Error("entries followed by another metadata field are taken for a run")
	}
	if _, _, ok := ManagedFields(msg[:len(msg)-1]); ok {
		t.Error("a truncated message has entries")
	}
}
