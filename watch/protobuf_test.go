package watch

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corekube/corekube/storage"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestObjectProtobuf: the encoding is the decoded object's gogo Marshal,
// computed once however many readers ask at the same time.
func TestObjectProtobuf(t *testing.T) {
	var decodes atomic.Int64
	o := &Object{Key: "/pods/ns/a", Revision: 7, json: []byte(`{"metadata":{"name":"a"}}`),
		decode: func(kv storage.KV) (runtime.Object, error) {
			decodes.Add(1)
			return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7"}, Spec: v1.PodSpec{NodeName: "n1"}}, nil
		}}
	want, err := (&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7"}, Spec: v1.PodSpec{NodeName: "n1"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			data, err := o.Protobuf()
			if err != nil {
				t.Error(err)
			}
			got[i] = data
		})
	}
	wg.Wait()
	for _, data := range got {
		if !bytes.Equal(data, want) || &data[0] != &got[0][0] {
			t.Fatalf("Protobuf() = %x, want %x, one shared slice", data, want)
		}
	}
	if n := decodes.Load(); n != 1 {
		t.Errorf("decoded %d times, want once", n)
	}
}

// TestObjectProtobufErrors: a failed decode and a type without protobuf are
// errors, kept like the encoding.
func TestObjectProtobufErrors(t *testing.T) {
	boom := errors.New("boom")
	bad := &Object{Key: "k", json: []byte(`{}`), decode: func(storage.KV) (runtime.Object, error) { return nil, boom }}
	if _, err := bad.Protobuf(); !errors.Is(err, boom) {
		t.Errorf("decode error: %v", err)
	}
	if _, err := bad.Protobuf(); !errors.Is(err, boom) {
		t.Errorf("second call: %v", err)
	}
	plain := &Object{Key: "k", json: []byte(`{}`), decode: func(storage.KV) (runtime.Object, error) { return noProtobuf{}, nil }}
	if _, err := plain.Protobuf(); err == nil {
		t.Error("an object without protobuf encoding: no error")
	}
	if _, err := (&Object{Revision: 3}).Protobuf(); err == nil {
		t.Error("a bookmark's object: no error")
	}
}

// noProtobuf is an object type with no protobuf encoding.
type noProtobuf struct{ runtime.Object }
