package registry_test

import (
	"bytes"
	"context"
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
