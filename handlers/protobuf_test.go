package handlers

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/corekube/corekube/watch/rawproto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "12", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// kubeEncode is what kube-apiserver's protobuf serializer writes for obj
// as kind.
func kubeEncode(t *testing.T, obj runtime.Object, kind schema.GroupVersionKind) []byte {
	t.Helper()
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(kind)
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestProtobufMatchesKube(t *testing.T) {
	pod := testPod()
	podKind := v1.SchemeGroupVersion.WithKind("Pod")
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: `pods "p" not found`}
	list := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "20", Continue: "x"}, Items: []v1.Pod{*pod, *pod}}
	for _, c := range []struct {
		name string
		obj  runtime.Object
		kind schema.GroupVersionKind
	}{
		{"pod", pod, podKind},
		{"status", status, schema.GroupVersionKind{Version: "v1", Kind: "Status"}},
		{"list", list, v1.SchemeGroupVersion.WithKind("PodList")},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := kubeEncode(t, c.obj, c.kind)
			got, err := appendProtobuf([]byte("prefix"), c.obj, c.kind)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			if !c.obj.GetObjectKind().GroupVersionKind().Empty() {
				t.Errorf("the object was modified: %v", c.obj.GetObjectKind().GroupVersionKind())
			}
		})
	}

	// Without a kind on the object, the scheme's is used.
	got, err := encodeProtobuf(status, schema.GroupVersion{Group: "policy", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := kubeEncode(t, status, schema.GroupVersionKind{Version: "v1", Kind: "Status"}); !bytes.Equal(got, want) {
		t.Errorf("status by the scheme's kind:\n got %q\nwant %q", got, want)
	}
	if _, err := appendProtobuf(nil, &metav1.Table{}, metav1.SchemeGroupVersion.WithKind("Table")); err == nil {
		t.Error("a Table has no protobuf encoding, want an error")
	}
}

// TestWatchFrameMatchesKube: kube's watch stream over protobuf is its raw
// serializer's WatchEvent in length-delimited frames, the object inside
// encoded by the ordinary serializer.
func TestWatchFrameMatchesKube(t *testing.T) {
	pod := testPod()
	kind := v1.SchemeGroupVersion.WithKind("Pod")
	var want bytes.Buffer
	enc := streaming.NewEncoder(protobuf.LengthDelimitedFramer.NewFrameWriter(&want), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
		if err := enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: kubeEncode(t, pod, kind)}}); err != nil {
			t.Fatal(err)
		}
	}
	var got, object []byte
	for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
		var frame []byte
		var err error
		object, frame, err = appendProtobufEvent(object[:0], nil, typ, pod, kind.GroupVersion())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, frame...)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("got  %q\nwant %q", got, want.Bytes())
	}

	// The frames written around the watch cache's encoding of the pod
	// (watch.go's path for cached objects) are the same bytes.
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	envelope := rawproto.Envelope{APIVersion: kind.GroupVersion().String(), Kind: kind.Kind}
	var cached []byte
	for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
		cached = envelope.AppendWatchFrame(cached, string(typ), raw)
	}
	if !bytes.Equal(cached, want.Bytes()) {
		t.Errorf("frames of the cached encoding:\n got %q\nwant %q", cached, want.Bytes())
	}

	// And client-go's decoder reads it back.
	dec := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(ioNopCloser{bytes.NewReader(got)}), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	var ev metav1.WatchEvent
	if _, _, err := dec.Decode(nil, &ev); err != nil {
		t.Fatal(err)
	}
	obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(ev.Object.Raw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := obj.(*v1.Pod); !ok || ev.Type != "ADDED" || p.Name != "p" || p.Labels["a"] != "1" {
		t.Errorf("decoded %s %#v", ev.Type, obj)
	}
}

type ioNopCloser struct{ *bytes.Reader }

func (ioNopCloser) Close() error { return nil }

// BenchmarkProtobufWatchEvent: what one watcher pays per event of a
// scheduled, running pod. "decode" is the path of objects without a cached
// encoding (before the cache kept one: every event for every watcher), the
// JSON decoded and encoded again; "cached" frames the watch cache's
// protobuf encoding, computed once per revision for all watchers.
func BenchmarkProtobufWatchEvent(b *testing.B) {
	pod := testPod()
	pod.Spec.NodeName = "node-1"
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.7",
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, Image: "busybox", ImageID: "sha256:0", ContainerID: "sim://1"}}}
	data, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	kind := v1.SchemeGroupVersion.WithKind("Pod")
	b.Run("decode", func(b *testing.B) {
		var object, frame []byte
		for range b.N {
			obj := &v1.Pod{}
			if err := json.Unmarshal(data, obj); err != nil {
				b.Fatal(err)
			}
			if object, frame, err = appendProtobufEvent(object[:0], frame[:0], watch.Modified, obj, kind.GroupVersion()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		raw, err := pod.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		envelope := rawproto.Envelope{APIVersion: "v1", Kind: "Pod"}
		var frame []byte
		for range b.N {
			frame = envelope.AppendWatchFrame(frame[:0], string(watch.Modified), raw)
		}
	})
}
