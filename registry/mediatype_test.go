package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	goruntime "runtime"
	"strconv"
	"testing"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestStorageMediaTypes: a Store writes the configured media type and
// reads both, so servers on one etcd may differ and a data directory
// written as JSON (an older corekube's) is served as it was; each object
// is rewritten as protobuf at its next write.
func TestStorageMediaTypes(t *testing.T) {
	st := newTestStorage(t)
	ctx := t.Context()
	jsonStore := newCachedPodStoreWith(t, st, registry.Options{StorageMediaType: registry.MediaTypeJSON})
	protoStore := newCachedPodStoreWith(t, st, registry.Options{})
	stored := func(name string) []byte {
		t.Helper()
		kv, err := st.Get(ctx, "/pods/ns/"+name)
		if err != nil {
			t.Fatal(err)
		}
		return kv.Value
	}

	old, err := jsonStore.Create(ctx, "ns", benchPod("old"), registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := stored("old"); !bytes.HasPrefix(v, []byte(`{"kind":"Pod"`)) {
		t.Fatalf("JSON media type stored %q", v[:min(len(v), 16)])
	}
	if _, err := protoStore.Create(ctx, "ns", benchPod("new"), registry.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := stored("new"); !bytes.HasPrefix(v, []byte("k8s\x00")) {
		t.Fatalf("protobuf media type stored %q", v[:min(len(v), 16)])
	}

	// Each Store reads what the other wrote: GET from storage, LIST from
	// its watch cache at the revision of the last write.
	for _, s := range []*registry.Store{jsonStore, protoStore} {
		got, err := s.Get(ctx, "ns", "old", &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.(*v1.Pod).UID != old.(*v1.Pod).UID || got.(*v1.Pod).Spec.Containers[0].Image != "nginx:1.27" {
			t.Errorf("GET old: %+v", got)
		}
		list, err := s.List(ctx, "ns", &metainternalversion.ListOptions{ResourceVersion: currentRV(t, st, ctx)})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.(*v1.PodList).Items); n != 2 {
			t.Errorf("LIST: %d pods, want 2", n)
		}
	}

	// An update through the protobuf Store (from its cache's copy of the
	// JSON value) rewrites the object as protobuf; the JSON Store reads it.
	label := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*v1.Pod).DeepCopy()
		pod.Labels["upgraded"] = "yes"
		return pod, nil
	}
	if _, _, err := protoStore.Update(ctx, "ns", "old", label, registry.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := stored("old"); !bytes.HasPrefix(v, []byte("k8s\x00")) {
		t.Errorf("updated through the protobuf Store, stored %q", v[:min(len(v), 16)])
	}
	got, err := jsonStore.Get(ctx, "ns", "old", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.(*v1.Pod).Labels["upgraded"] != "yes" {
		t.Errorf("the JSON Store reads %v", got.(*v1.Pod).Labels)
	}
}

// currentRV is storage's current revision, as a resourceVersion a LIST
// waits for.
func currentRV(t *testing.T, st interface {
	CurrentRevision(context.Context, string) (int64, error)
}, ctx context.Context) string {
	t.Helper()
	rev, err := st.CurrentRevision(ctx, "/pods/")
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(rev, 10)
}

// TestCacheKeepsStoredEncoding: the watch cache keeps a pod stored as
// protobuf as its message (protobuf readers get the same bytes every
// time, even once its event has left the window and the collector has
// run) and makes its JSON on demand; one stored as JSON the other way
// round. Either way its encodings, and the stored value an update starts
// from, are those of the pod read back from storage.
func TestCacheKeepsStoredEncoding(t *testing.T) {
	for _, mediaType := range []string{registry.MediaTypeProtobuf, registry.MediaTypeJSON} {
		t.Run(mediaType, func(t *testing.T) {
			st := newTestStorage(t)
			ctx := t.Context()
			store := newCachedPodStoreWith(t, st, registry.Options{StorageMediaType: mediaType, WatchCacheSize: 1})
			var created []*v1.Pod
			for _, name := range []string{"a", "b", "c"} {
				out, err := store.Create(ctx, "ns", benchPod(name), registry.CreateOptions{FieldManager: "test"})
				if err != nil {
					t.Fatal(err)
				}
				created = append(created, out.(*v1.Pod))
			}
			last := created[len(created)-1]
			if _, err := store.Get(ctx, "ns", last.Name, &metav1.GetOptions{ResourceVersion: last.ResourceVersion}); err != nil {
				t.Fatal(err)
			}
			o, ok := registry.CachedObject(store, "ns", created[0].Name) // its event has left the window
			if !ok {
				t.Fatal("not cached")
			}
			kv, err := st.Get(ctx, "/pods/ns/"+created[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := o.Stored(); !ok || !bytes.Equal(got, storedJSON(t, kv.Value)) {
				t.Errorf("Stored() = %.80s, %v; want the stored value as JSON", got, ok)
			}
			pod := created[0].DeepCopy()
			pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
			wantJSON, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			wantPB, err := pod.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			encodings := func() (jsonData, pb []byte) {
				t.Helper()
				jsonData, err := o.JSON()
				if err != nil || !bytes.Equal(jsonData, wantJSON) {
					t.Fatalf("JSON() = %s, %v\nwant %s", jsonData, err, wantJSON)
				}
				if pb, err = o.Protobuf(); err != nil || !bytes.Equal(pb, wantPB) {
					t.Fatalf("Protobuf() = %x, %v\nwant %x", pb, err, wantPB)
				}
				// The message as kept (Protobuf puts one kept in pieces
				// together anew): its first piece.
				m, err := o.ProtobufMessage()
				if err != nil {
					t.Fatal(err)
				}
				return jsonData, m.AppendPieces(nil)[0]
			}
			j1, p1 := encodings()
			goruntime.GC()
			j2, p2 := encodings()
			keptJSON, keptPB := &j1[0] == &j2[0], &p1[0] == &p2[0]
			if wantKept := mediaType == registry.MediaTypeProtobuf; keptPB != wantKept || keptJSON == wantKept {
				t.Errorf("stored as %s, after a GC: the same JSON %v, the same protobuf %v; want the stored encoding kept, the other made again",
					mediaType, keptJSON, keptPB)
			}
		})
	}
}
