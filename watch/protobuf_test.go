package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch/rawproto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestObjectProtobuf: the encoding is the decoded object's gogo Marshal,
// computed once however many readers of a recent event's object ask at the
// same time.
func TestObjectProtobuf(t *testing.T) {
	var decodes atomic.Int64
	o := &Object{Key: "/pods/ns/a", Revision: 7, data: []byte(`{"metadata":{"name":"a"}}`),
		codec: &codec{decode: func(kv storage.KV) (runtime.Object, error) {
			decodes.Add(1)
			return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7"}, Spec: v1.PodSpec{NodeName: "n1"}}, nil
		}}}
	o.setRecent(true)
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
	bad := &Object{Key: "k", data: []byte(`{}`), codec: &codec{decode: func(storage.KV) (runtime.Object, error) { return nil, boom }}}
	if _, err := bad.Protobuf(); !errors.Is(err, boom) {
		t.Errorf("decode error: %v", err)
	}
	if _, err := bad.Protobuf(); !errors.Is(err, boom) {
		t.Errorf("second call: %v", err)
	}
	plain := &Object{Key: "k", data: []byte(`{}`), codec: &codec{decode: func(storage.KV) (runtime.Object, error) { return noProtobuf{}, nil }}}
	if _, err := plain.Protobuf(); err == nil {
		t.Error("an object without protobuf encoding: no error")
	}
	if _, err := (&Object{Revision: 3}).Protobuf(); err == nil {
		t.Error("a bookmark's object: no error")
	}
}

// noProtobuf is an object type with no protobuf encoding.
type noProtobuf struct{ runtime.Object }

// TestObjectProtobufMemo: a recent event's object keeps its protobuf
// encoding through garbage collections; once it leaves the window (and for
// an object never in it) the collector may drop the encoding, and the next
// reader computes the same bytes again.
func TestObjectProtobufMemo(t *testing.T) {
	var decodes atomic.Int64
	o := &Object{Key: "/pods/ns/a", Revision: 7, data: []byte(`{}`),
		codec: &codec{decode: func(kv storage.KV) (runtime.Object, error) {
			decodes.Add(1)
			return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7"}}, nil
		}}}
	want, err := o.Protobuf()
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.Clone(want)
	goruntime.GC()
	if _, err := o.Protobuf(); err != nil {
		t.Fatal(err)
	}
	if n := decodes.Load(); n != 2 {
		t.Fatalf("an object outside the window after a GC: decoded %d times, want 2 (its encoding dropped)", n)
	}
	o.setRecent(true)
	goruntime.GC()
	got, err := o.Protobuf()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Protobuf() = %x, %v; want %x", got, err, want)
	}
	n := decodes.Load()
	goruntime.GC()
	if _, err := o.Protobuf(); err != nil || decodes.Load() != n {
		t.Fatalf("a recent object after a GC: decoded %d times, want %d (its encoding kept)", decodes.Load(), n)
	}
	o.setRecent(false)
	goruntime.GC()
	got, err = o.Protobuf()
	if err != nil || !bytes.Equal(got, want) || decodes.Load() != n+1 {
		t.Fatalf("after leaving the window: %x, %v, decoded %d times; want %x, decoded %d", got, err, decodes.Load(), want, n+1)
	}
}

// TestWindowPinsProtobuf: the window's events hold their objects'
// encodings; an event evicted from it (or a window cleared for a relist)
// lets go.
func TestWindowPinsProtobuf(t *testing.T) {
	c := New(Config{Prefix: "/pods/", Decode: decodePod, WindowSize: 2})
	var objs []*Object
	for i := range 3 {
		obj, err := c.decode(storage.KV{Key: "/pods/ns/p", Value: []byte("v"), Revision: int64(i + 1)}, true)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
		c.push(&event{typ: Modified, obj: obj})
		if _, err := obj.Protobuf(); err != nil {
			t.Fatal(err)
		}
	}
	pinned := func(o *Object) bool {
		o.memoMu.Lock()
		defer o.memoMu.Unlock()
		return o.recent && o.memoStrong != nil
	}
	if pinned(objs[0]) || !pinned(objs[1]) || !pinned(objs[2]) {
		t.Fatalf("pinned after 3 events in a window of 2: %v %v %v, want false true true", pinned(objs[0]), pinned(objs[1]), pinned(objs[2]))
	}
	c.clearWindowLocked()
	if pinned(objs[1]) || pinned(objs[2]) || c.n != 0 {
		t.Fatalf("after clearing the window: pinned %v %v, %d events", pinned(objs[1]), pinned(objs[2]), c.n)
	}
}

// TestObjectProtobufTranscoded: with a transcoder the encoding comes from
// the JSON without a decode, the same bytes; JSON the transcoder does not
// expect goes the decoding way and still gets its encoding.
func TestObjectProtobufTranscoded(t *testing.T) {
	tc, err := rawproto.NewTranscoder(reflect.TypeFor[v1.Pod]())
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7", Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}}}
	want, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		json        string
		wantDecodes int64
	}{
		{"transcoded", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"i"}],"nodeName":"n1"}}`, 0},
		{"unexpected member: decoded", `{"metadata":{"name":"a","resourceVersion":"7","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"i"}],"nodeName":"n1"},"extra":1}`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var decodes atomic.Int64
			o := &Object{Key: "/pods/ns/a", Revision: 7, data: []byte(c.json), codec: &codec{transcoder: tc,
				decode: func(kv storage.KV) (runtime.Object, error) {
					decodes.Add(1)
					p := &v1.Pod{}
					err := json.Unmarshal(kv.Value, p)
					return p, err
				}}}
			got, err := o.Protobuf()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Protobuf() = %x, want %x", got, want)
			}
			if n := decodes.Load(); n != c.wantDecodes {
				t.Errorf("decoded %d times, want %d", n, c.wantDecodes)
			}
		})
	}
}
