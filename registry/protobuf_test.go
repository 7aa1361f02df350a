package registry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/leases"
	"github.com/corekube/corekube/registry/nodes"
	"github.com/corekube/corekube/registry/pods"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// protobufStores returns running pod, node and lease Stores over one
// storage, filled with objects that use most protobuf field kinds, stored
// in mediaType ("": protobuf).
func protobufStores(t *testing.T, mediaType string) []*registry.Store {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := newTestStorage(t)
	opts := registry.Options{Logger: quiet, StorageMediaType: mediaType}
	podStore := registry.NewStore(st, pods.NewStrategy(), opts)
	nodeStore := registry.NewStore(st, nodes.NewStrategy(), opts)
	leaseStore := registry.NewStore(st, leases.NewStrategy(), opts)
	stores := []*registry.Store{podStore, nodeStore, leaseStore}
	for _, s := range stores {
		go func() { _ = s.Run(t.Context()) }()
	}
	ctx := t.Context()
	for i := range 300 { // beyond one parallel batch
		name := "pod-" + strconv.Itoa(i)
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web", "i": strconv.Itoa(i % 7)},
				Annotations: map[string]string{"note": "ünïcode ✓"}},
			Spec: v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{
				Name: "c", Image: "busybox", Command: []string{"sh", "-c", "sleep 1"},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}},
				Ports:     []v1.ContainerPort{{ContainerPort: 8080}},
			}}, TerminationGracePeriodSeconds: ptr.To[int64](5)},
		}
		if _, err := podStore.Create(ctx, "default", pod, registry.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}}}
	if _, err := nodeStore.Create(ctx, "", node, registry.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), RenewTime: &metav1.MicroTime{Time: time.Unix(1700000000, 123456000)}}}
	if _, err := leaseStore.Create(ctx, "default", lease, registry.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return stores
}

// serialize is apimachinery's protobuf serializer, as kube-apiserver
// answers.
func serialize(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAppendProtobufMatchesSerializer: a page in protobuf from the cached
// item encodings is byte for byte the serializer's encoding of the typed
// list (and its JSON pieces encoding/json's), from the cache and from
// etcd, whole and paged, read twice (the second time from the kept
// encodings), with the objects stored as protobuf (the cache keeps their
// messages) and as JSON (it keeps their JSON).
func TestAppendProtobufMatchesSerializer(t *testing.T) {
	for _, mediaType := range []string{registry.MediaTypeProtobuf, registry.MediaTypeJSON} {
		t.Run(mediaType, func(t *testing.T) { testAppendProtobufMatchesSerializer(t, mediaType) })
	}
}

func testAppendProtobufMatchesSerializer(t *testing.T, mediaType string) {
	stores := protobufStores(t, mediaType)
	for _, s := range stores {
		info := s.Info()
		ns := ""
		if info.Namespaced {
			ns = "default"
		}
		first, err := s.List(t.Context(), ns, &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lm, _ := meta.ListAccessor(first)
		rv := lm.GetResourceVersion()
		lo := func(o metainternalversion.ListOptions) *metainternalversion.ListOptions { return &o }
		for name, opts := range map[string]*metainternalversion.ListOptions{
			"cache":       {},
			"cache-again": {},
			"cache-limit": {Limit: 7},
			"etcd-exact":  lo(metainternalversion.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}),
			"etcd-limit":  lo(metainternalversion.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 3}),
		} {
			page, err := s.ListPage(t.Context(), ns, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := page.AppendProtobuf([]byte("prefix"))
			if err != nil {
				t.Fatalf("%s %s: %v", info.Resource, name, err)
			}
			list, err := page.Object()
			if err != nil {
				t.Fatal(err)
			}
			want := append([]byte("prefix"), serialize(t, list)...)
			if !bytes.Equal(got, want) {
				t.Errorf("%s %s: AppendProtobuf (%d bytes) differs from the serializer's encoding (%d bytes)", info.Resource, name, len(got), len(want))
			}
			// The JSON list too, from its pieces: encoding/json's bytes.
			chunks, err := page.JSONChunks()
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := json.Marshal(list)
			if err != nil {
				t.Fatal(err)
			}
			if gotJSON := bytes.Join(chunks, nil); !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("%s %s: JSONChunks\n%.300s\nwant json.Marshal's\n%.300s", info.Resource, name, gotJSON, wantJSON)
			}
			// And written in batches (one item, two, all at once): the
			// same bytes, start called once, before the first.
			for _, batch := range []int{1, 2, 1024} {
				restore := registry.SetJSONWriteBatch(batch)
				var buf bytes.Buffer
				starts := 0
				started, err := page.WriteJSON(&buf, func() {
					if buf.Len() != 0 {
						t.Errorf("%s %s: start called after %d bytes", info.Resource, name, buf.Len())
					}
					starts++
				})
				restore()
				if err != nil || !started || starts != 1 {
					t.Fatalf("%s %s, batch %d: WriteJSON started %v (%d times), %v", info.Resource, name, batch, started, starts, err)
				}
				if !bytes.Equal(buf.Bytes(), wantJSON) {
					t.Errorf("%s %s, batch %d: WriteJSON\n%.300s\nwant json.Marshal's\n%.300s", info.Resource, name, batch, buf.Bytes(), wantJSON)
				}
			}
		}
	}
}

// firstEvent is the first event of a watch of namespace from any version
// (the cache's first object).
func firstEvent(t *testing.T, s *registry.Store, namespace string) registry.WatchEvent {
	t.Helper()
	w, err := s.Watch(t.Context(), namespace, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev, ok := w.Next()
	if !ok {
		t.Fatal("watch ended")
	}
	return ev
}

// TestWatchEventProtobuf: a cached event's protobuf is the gogo encoding of
// its decoded object, the same bytes for every watcher, appended after
// what the watcher's buffer holds.
func TestWatchEventProtobuf(t *testing.T) {
	pods := protobufStores(t, "")[0]
	var seen [][]byte
	for range 2 {
		ev := firstEvent(t, pods, "default")
		data, ok := ev.AppendProtobuf([]byte("frame"))
		if !ok || !bytes.HasPrefix(data, []byte("frame")) {
			t.Fatalf("%s event has no protobuf encoding, or it replaced the buffer's bytes", ev.Type)
		}
		data = data[len("frame"):]
		obj, err := ev.Decoded()
		if err != nil {
			t.Fatal(err)
		}
		want, err := obj.(*v1.Pod).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("event protobuf differs from the decoded pod's")
		}
		seen = append(seen, data)
	}
	if !bytes.Equal(seen[0], seen[1]) {
		t.Error("two watchers got two encodings of one revision")
	}
}

// TestWatchEventDecodedFromMessage: objects stored as protobuf are decoded
// from their kept message (no JSON made for it) into what their JSON
// decodes to, without managedFields, and selected on attributes computed
// the same way; objects stored as JSON are not.
func TestWatchEventDecodedFromMessage(t *testing.T) {
	for _, mediaType := range []string{"", "application/json"} {
		stores := protobufStores(t, mediaType)
		for _, s := range stores {
			ev := firstEvent(t, s, "")
			obj, err := ev.Decoded()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ev.DecodesFromMessage(), mediaType == ""; got != want {
				t.Errorf("%q, %T: decodes from the message %v, want %v", mediaType, obj, got, want)
			}
			data, _ := ev.JSON()
			want := obj.DeepCopyObject()
			if err := json.Unmarshal(data, want); err != nil {
				t.Fatal(err)
			}
			m, err := meta.Accessor(want)
			if err != nil {
				t.Fatal(err)
			}
			m.SetManagedFields(nil)
			gotJSON, _ := json.Marshal(obj)
			wantJSON, _ := json.Marshal(want)
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("%q: Decoded()\n%s\nwant its JSON decoded, without managedFields\n%s", mediaType, gotJSON, wantJSON)
			}
		}
		selector, err := labels.Parse("i=3")
		if err != nil {
			t.Fatal(err)
		}
		// A consistent LIST (no resourceVersion): the cache waits until it
		// has every pod written.
		list, err := stores[0].List(t.Context(), "default", &metainternalversion.ListOptions{
			LabelSelector: selector, FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "node-1")})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.(*v1.PodList).Items); n != 43 {
			t.Errorf("%q: %d pods with i=3 on node-1 from the cache, want 43", mediaType, n)
		}
	}
}

// TestListViewsFromMessage: a Table's and a PartialObjectMetadataList's
// items decoded from the cache's protobuf messages (pods stored as
// protobuf) are what the same items decoded from their JSON give: the
// same ObjectMeta, and the same Table row.
func TestListViewsFromMessage(t *testing.T) {
	podStore := protobufStores(t, "")[0]
	page, err := podStore.ListPage(t.Context(), "default", &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	strategy := pods.NewStrategy()
	for _, view := range []registry.ItemView{registry.TableItems, registry.MetadataItems} {
		list, err := page.ObjectFor(view)
		if err != nil {
			t.Fatal(err)
		}
		items := list.(*v1.PodList).Items
		if len(items) != 300 {
			t.Fatalf("view %d: %d items, want 300", view, len(items))
		}
		for i := range items {
			got := &items[i]
			o, ok := registry.CachedObject(podStore, "default", got.Name)
			if !ok || !o.DecodesFromMessage() {
				t.Fatalf("%s is not cached as a message it decodes", got.Name)
			}
			data, err := o.JSON()
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := strategy.DecodeForTable(data)
			if err != nil {
				t.Fatal(err)
			}
			want := decoded.(*v1.Pod)
			gotMeta, _ := json.Marshal(got.ObjectMeta)
			wantMeta, _ := json.Marshal(want.ObjectMeta)
			if !bytes.Equal(gotMeta, wantMeta) || got.ResourceVersion == "" {
				t.Fatalf("view %d, %s: metadata\n%s\nwant (from the JSON)\n%s", view, got.Name, gotMeta, wantMeta)
			}
			if view != registry.TableItems {
				continue
			}
			now := time.Now()
			gotRow, err := strategy.TableRow(got, now)
			if err != nil {
				t.Fatal(err)
			}
			wantRow, _ := strategy.TableRow(want, now)
			if g, w := fmt.Sprint(gotRow.Cells), fmt.Sprint(wantRow.Cells); g != w {
				t.Fatalf("%s: row %s, want (from the JSON) %s", got.Name, g, w)
			}
		}
	}
}
