package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch/rawproto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var podEnvelope = rawproto.Envelope{APIVersion: "v1", Kind: "Pod"}

// podMessageJSON is Config.MessageJSON for pods, as the registry's storage
// codec does it (without its decoding fallback), counting its calls.
func podMessageJSON(t testing.TB, calls *atomic.Int64) func([]byte, rawproto.Envelope, []byte) ([]byte, error) {
	tc, err := rawproto.NewJSONTranscoder(reflect.TypeFor[v1.Pod]())
	if err != nil {
		t.Fatal(err)
	}
	return func(dst []byte, env rawproto.Envelope, msg []byte) ([]byte, error) {
		calls.Add(1)
		if env.Kind != "Pod" {
			return dst, fmt.Errorf("stored object is a %s (%s), not a Pod", env.Kind, env.APIVersion)
		}
		return tc.AppendJSON(dst, msg, env.APIVersion, env.Kind)
	}
}

// protoPodConfig configures a pods cache over storage holding values as
// the registry stores them (MessageJSON set).
func protoPodConfig(t testing.TB, calls *atomic.Int64) Config {
	tc, err := rawproto.NewTranscoder(reflect.TypeFor[v1.Pod]())
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Decode:      decodeFullPod,
		Transcoder:  tc,
		MessageJSON: podMessageJSON(t, calls),
		Kind:        schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// storedProtobuf is a pod as the registry stores it as protobuf: no
// resourceVersion, enveloped.
func storedProtobuf(t testing.TB, pod *v1.Pod) []byte {
	t.Helper()
	msg, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return podEnvelope.Append(nil, msg)
}

// storedJSONPod is a pod as the registry stores it as JSON (kind and
// apiVersion first, no resourceVersion).
func storedJSONPod(t testing.TB, pod *v1.Pod) []byte {
	t.Helper()
	pod = pod.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wantEncodings are what the cache must give for pod at rev: its JSON
// (encoding/json of the object read back: TypeMeta from the envelope, the
// resourceVersion), its protobuf message (gogo's, resourceVersion set),
// and the stored value as the Store reads it (the JSON without the
// resourceVersion).
func wantEncodings(t testing.TB, pod *v1.Pod, rev int64) (jsonData, proto, stored []byte) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	stored, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	pod.ResourceVersion = strconv.FormatInt(rev, 10)
	if jsonData, err = json.Marshal(pod); err != nil {
		t.Fatal(err)
	}
	if proto, err = pod.Marshal(); err != nil {
		t.Fatal(err)
	}
	return jsonData, proto, stored
}

// checkObject checks o's encodings, stored value, decoded copy and
// attributes against pod at o's revision.
func checkObject(t *testing.T, o *Object, pod *v1.Pod, wantProto bool) {
	t.Helper()
	wantJSON, wantPB, wantStored := wantEncodings(t, pod, o.Revision)
	if o.proto != wantProto {
		t.Errorf("%s: kept as protobuf %v, want %v", o.Key, o.proto, wantProto)
	}
	if got, err := o.JSON(); err != nil || !bytes.Equal(got, wantJSON) {
		t.Errorf("%s: JSON() = %s, %v\nwant %s", o.Key, got, err, wantJSON)
	}
	if got, err := o.Protobuf(); err != nil || !bytes.Equal(got, wantPB) {
		t.Errorf("%s: Protobuf() = %x, %v\nwant %x", o.Key, got, err, wantPB)
	}
	checkMessage(t, o, wantPB, wantProto && len(pod.ManagedFields) > 0)
	if got, ok := o.Stored(); !ok || !bytes.Equal(got, wantStored) {
		t.Errorf("%s: Stored() = %s, %v\nwant %s", o.Key, got, ok, wantStored)
	}
	decoded, err := o.Decode()
	if err != nil {
		t.Fatalf("%s: Decode: %v", o.Key, err)
	}
	if got := decoded.(*v1.Pod); got.ResourceVersion != strconv.FormatInt(o.Revision, 10) || got.Spec.NodeName != pod.Spec.NodeName || got.Name != pod.Name {
		t.Errorf("%s: Decode() = %s rv %s node %s", o.Key, got.Name, got.ResourceVersion, got.Spec.NodeName)
	}
	if o.Fields.Get("spec.nodeName") != pod.Spec.NodeName || o.Labels.Get("app") != pod.Labels["app"] {
		t.Errorf("%s: attributes %v %v", o.Key, o.Labels, o.Fields)
	}
}

// TestCacheOverProtobuf: a cache over storage holding pods as protobuf
// and as JSON under one prefix (a data directory written partly by an
// older corekube, or another server with --storage-media-type JSON) keeps
// the protobuf ones as their message: its encodings, stored value and
// decoded copy are what they would be had the value been read as JSON,
// whether the object came from the first list or from a watch event.
func TestCacheOverProtobuf(t *testing.T) {
	var calls atomic.Int64
	cfg := protoPodConfig(t, &calls)
	st := store(t)
	prefix := freshPrefix(t)
	cfg.Storage, cfg.Prefix = st, prefix
	ctx := t.Context()
	pods := map[string]*v1.Pod{}
	write := func(i int, asJSON bool) {
		t.Helper()
		pod := benchPod(i)
		pod.Labels["app"] = fmt.Sprintf("app-%d", i)
		key := prefix + pod.Namespace + "/" + pod.Name
		value := storedProtobuf(t, pod)
		if asJSON {
			value = storedJSONPod(t, pod)
		}
		if _, err := st.Create(ctx, key, value); err != nil {
			t.Fatal(err)
		}
		pods[key] = pod
	}
	for i := range 6 {
		write(i, i%3 == 2) // listed
	}
	c := New(cfg)
	done := make(chan struct{})
	runCtx, cancel := context.WithCancel(context.Background())
	go func() { defer close(done); _ = c.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := c.waitFor(ctx, 0, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 6; i < 12; i++ {
		write(i, i%3 == 2) // events
	}
	// An update moves a listed pod to another node: an event too.
	var moved string
	for key, pod := range pods {
		if strings.HasSuffix(key, benchPod(0).Name) {
			pod.Spec.NodeName = "node-moved"
			moved = key
			kv, err := st.GuaranteedUpdate(ctx, key, func(storage.KV) ([]byte, error) { return storedProtobuf(t, pod), nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := c.waitFor(ctx, kv.Revision, 5*time.Second, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Pods 2, 5, 8 and 11 are stored as JSON.
	storedAsProto := func(key string) bool {
		i, err := strconv.Atoi(key[len(key)-6:])
		if err != nil {
			t.Fatal(err)
		}
		return i%3 != 2
	}
	for range 7 {
		ev := next(t, w)
		checkObject(t, ev.Object, pods[ev.Object.Key], storedAsProto(ev.Object.Key))
	}
	snap, err := c.List(ctx, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Items) != len(pods) {
		t.Fatalf("listed %d objects, want %d", len(snap.Items), len(pods))
	}
	protos := 0
	for _, o := range snap.Items {
		checkObject(t, o, pods[o.Key], storedAsProto(o.Key))
		if o.proto {
			protos++
		}
	}
	if protos != 8 {
		t.Errorf("%d objects kept as protobuf, want 8", protos)
	}
	if o, _ := c.Get(moved); o == nil || o.Fields.Get("spec.nodeName") != "node-moved" {
		t.Errorf("the moved pod: %v", o)
	}
}

func mustJSON(t *testing.T, o *Object) []byte {
	t.Helper()
	data, err := o.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestProtobufObjectMemo: the JSON made for the attributes of a watch
// event's protobuf object is its memo until the event leaves the window,
// surviving garbage collections; a listed object's is dropped by the
// next one and made again on demand, the same bytes. The window counts
// both encodings of an event's object.
func TestProtobufObjectMemo(t *testing.T) {
	var calls atomic.Int64
	cfg := protoPodConfig(t, &calls)
	cfg.Prefix, cfg.WindowSize = "/pods/", 2
	c := New(cfg)
	value := storedProtobuf(t, benchPod(1))

	listed, err := c.decode(storage.KV{Key: "/pods/ns/a", Value: value, Revision: 5}, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("decode made the JSON %d times, want once (for the attributes)", n)
	}
	want := bytes.Clone(mustJSON(t, listed))
	goruntime.GC()
	if got := mustJSON(t, listed); !bytes.Equal(got, want) || calls.Load() != 2 {
		t.Fatalf("a listed object after a GC: JSON made %d times in all, want 2 (its memo dropped)", calls.Load())
	}

	var events []*Object
	for i := range 3 {
		o, err := c.decode(storage.KV{Key: "/pods/ns/a", Value: value, Revision: int64(10 + i)}, true)
		if err != nil {
			t.Fatal(err)
		}
		c.push(&event{typ: Modified, obj: o})
		events = append(events, o)
	}
	pb, err := events[2].Protobuf()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(pb) + len(mustJSON(t, events[1])) + len(pb) + len(mustJSON(t, events[2]))); c.windowBytes != want {
		t.Errorf("window bytes %d, want %d (both encodings of its two events)", c.windowBytes, want)
	}
	n := calls.Load()
	goruntime.GC()
	for _, o := range events[1:] {
		mustJSON(t, o)
	}
	if calls.Load() != n {
		t.Errorf("the window's events after a GC: JSON made %d more times, want none (memo kept)", calls.Load()-n)
	}
	// Evicted by the third event, before that GC: its memo was weak.
	mustJSON(t, events[0])
	if calls.Load() != n+1 {
		t.Errorf("an evicted event after a GC: JSON made %d more times, want once", calls.Load()-n)
	}
	c.clearWindowLocked()
	goruntime.GC()
	if got := mustJSON(t, events[2]); calls.Load() != n+2 {
		t.Errorf("after the window is cleared and a GC: JSON made %d more times, want 2", calls.Load()-n)
	} else if !bytes.Contains(got, []byte(`"resourceVersion":"12"`)) {
		t.Errorf("JSON of revision 12: %s", got)
	}
}

// TestProtobufObjectEdges: a stored object of another kind is an error
// naming its key; a message SetResourceVersion cannot read is kept as
// JSON; a transient object without attributes makes no JSON until asked.
func TestProtobufObjectEdges(t *testing.T) {
	var calls atomic.Int64
	cfg := protoPodConfig(t, &calls)
	cfg.Prefix = "/pods/"
	c := New(cfg)
	node, err := (&v1.Node{}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.decode(storage.KV{Key: "/pods/ns/node", Value: rawproto.Envelope{APIVersion: "v1", Kind: "Node"}.Append(nil, node), Revision: 3}, true)
	if err == nil || !strings.Contains(err.Error(), "/pods/ns/node") || !strings.Contains(err.Error(), "Node") {
		t.Errorf("a Node among pods: %v", err)
	}
	if _, err := c.decode(storage.KV{Key: "/pods/ns/bad", Value: []byte("k8s\x00\xff"), Revision: 3}, true); err == nil || !strings.Contains(err.Error(), "/pods/ns/bad") {
		t.Errorf("a damaged envelope: %v", err)
	}

	// No metadata field at all: gogo always writes one, but the message
	// is still a pod.
	spec, err := (&v1.PodSpec{NodeName: "n1"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	noMeta := podEnvelope.Append(nil, rawproto.AppendField(nil, 2, spec))
	o, err := c.decode(storage.KV{Key: "/pods/ns/nometa", Value: noMeta, Revision: 9}, true)
	if err != nil {
		t.Fatal(err)
	}
	checkObject(t, o, &v1.Pod{Spec: v1.PodSpec{NodeName: "n1"}}, false)

	pod := benchPod(3)
	n := calls.Load()
	o, err = c.Object(storage.KV{Key: "/pods/ns/t", Value: storedProtobuf(t, pod), Revision: 77}, false)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != n || !o.proto {
		t.Errorf("a transient object without attributes: JSON made %d times, kept as protobuf %v", calls.Load()-n, o.proto)
	}
	_, wantPB, _ := wantEncodings(t, pod, 77)
	if got, err := o.Protobuf(); err != nil || !bytes.Equal(got, wantPB) {
		t.Errorf("transient Protobuf() = %x, %v", got, err)
	}
	wantJSON, _, _ := wantEncodings(t, pod, 77)
	if got := mustJSON(t, o); !bytes.Equal(got, wantJSON) {
		t.Errorf("transient JSON() = %s", got)
	}
	if o, err := c.Object(storage.KV{Key: "/pods/ns/t", Value: storedProtobuf(t, pod), Revision: 77}, true); err != nil {
		t.Fatal(err)
	} else {
		checkObject(t, o, pod, true)
	}

	// An envelope naming another apiVersion than the resource's: its
	// JSON names it.
	msg, _ := pod.Marshal()
	o, err = c.decode(storage.KV{Key: "/pods/ns/old", Value: rawproto.Envelope{APIVersion: "v0", Kind: "Pod"}.Append(nil, msg), Revision: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, o); !bytes.HasPrefix(got, []byte(`{"kind":"Pod","apiVersion":"v0"`)) || c.codec.env.APIVersion != "v1" {
		t.Errorf("JSON of a v0 envelope: %.40s", got)
	}
}

// TestDirectWatchOverProtobuf: a cache that keeps nothing relays etcd's
// protobuf values, its selector reading the previous value's attributes
// (an object moving off a node is DELETED for that node's watcher).
func TestDirectWatchOverProtobuf(t *testing.T) {
	var calls atomic.Int64
	cfg := protoPodConfig(t, &calls)
	st := store(t)
	cfg.Storage, cfg.Prefix, cfg.Disabled = st, freshPrefix(t), true
	c := New(cfg)
	ctx := t.Context()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	pod := benchPod(5)
	key := cfg.Prefix + pod.Namespace + "/" + pod.Name
	w, err := c.Watch(ctx, WatchOptions{Match: func(o *Object) bool { return o.Fields.Get("spec.nodeName") == pod.Spec.NodeName }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	kv, err := st.Create(ctx, key, storedProtobuf(t, pod))
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	if ev.Type != Added || ev.Object.Revision != kv.Revision {
		t.Fatalf("first event %s at %d, want ADDED at %d", ev.Type, ev.Object.Revision, kv.Revision)
	}
	checkObject(t, ev.Object, pod, true)
	moved := pod.DeepCopy()
	moved.Spec.NodeName = "elsewhere"
	if _, err := st.GuaranteedUpdate(ctx, key, func(storage.KV) ([]byte, error) { return storedProtobuf(t, moved), nil }); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != Deleted {
		t.Fatalf("moved off the node: %s, want DELETED", ev.Type)
	}
}

// decodePodMessage is Config.DecodeMessage for pods, as the registry's
// (the message decoded whole, the attributes decodeFullPod's).
func decodePodMessage(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error) {
	pod := &v1.Pod{}
	if err := pod.Unmarshal(kv.Value); err != nil {
		return nil, nil, nil, err
	}
	pod.ResourceVersion = strconv.FormatInt(kv.Revision, 10)
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	data, err := json.Marshal(pod)
	if err != nil {
		return nil, nil, nil, err
	}
	_, l, f, err := decodeFullPod(storage.KV{Key: kv.Key, Value: data, Revision: kv.Revision})
	return pod, l, f, err
}

// TestCacheDecodesMessages: with a decoder for its messages, a cache over
// pods stored as protobuf computes their attributes and decodes them from
// the message, making no JSON until a JSON reader asks for it (then once
// for the window's events, which keep it), with the same encodings,
// stored value and attributes as without the decoder. An envelope of
// another apiVersion still goes through the JSON.
func TestCacheDecodesMessages(t *testing.T) {
	var calls atomic.Int64
	cfg := protoPodConfig(t, &calls)
	cfg.Prefix, cfg.WindowSize = "/pods/", 4
	cfg.DecodeMessage = decodePodMessage
	cfg.DecodeMessageObject = func(kv storage.KV) (runtime.Object, error) {
		obj, _, _, err := decodePodMessage(kv)
		return obj, err
	}
	c := New(cfg)
	pod := benchPod(7)
	pod.Status.Phase, pod.Status.PodIP = v1.PodRunning, "10.1.2.3"
	o, err := c.decode(storage.KV{Key: "/pods/ns/a", Value: storedProtobuf(t, pod), Revision: 21}, true)
	if err != nil {
		t.Fatal(err)
	}
	c.push(&event{typ: Added, obj: o})
	if n := calls.Load(); n != 0 || !o.DecodesFromMessage() {
		t.Fatalf("decoding for the cache made the JSON %d times (want none), decodes from the message %v", n, o.DecodesFromMessage())
	}
	if o.Fields.Get("status.phase") != "Running" || o.Fields.Get("status.podIP") != "10.1.2.3" || o.Labels.Get("group") != "g7" {
		t.Errorf("attributes from the message: %v %v", o.Labels, o.Fields)
	}
	pb, err := o.Protobuf()
	if err != nil {
		t.Fatal(err)
	}
	if c.windowBytes != int64(len(pb)) {
		t.Errorf("window bytes %d, want %d (the message alone)", c.windowBytes, len(pb))
	}
	decoded, err := o.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 0 {
		t.Errorf("Decode made the JSON")
	}
	wantJSON, _, _ := wantEncodings(t, pod, 21)
	if got, err := json.Marshal(decoded); err != nil || !bytes.Equal(got, wantJSON) {
		t.Errorf("Decode() from the message, as JSON:\n%s\nwant (the object decoded from its JSON)\n%s", got, wantJSON)
	}
	checkObject(t, o, pod, true)
	if n := calls.Load(); n != 1 {
		t.Errorf("JSON made %d times by a JSON reader of a window's event, want once", n)
	}
	goruntime.GC()
	mustJSON(t, o)
	if n := calls.Load(); n != 1 {
		t.Errorf("JSON of a window's event made again after a GC (%d in all): its memo must be kept", n)
	}

	msg, _ := pod.Marshal()
	other, err := c.decode(storage.KV{Key: "/pods/ns/old", Value: rawproto.Envelope{APIVersion: "v0", Kind: "Pod"}.Append(nil, msg), Revision: 22}, true)
	if err != nil {
		t.Fatal(err)
	}
	if other.DecodesFromMessage() || calls.Load() != 2 {
		t.Errorf("another apiVersion's envelope: decodes from the message %v, JSON made %d times in all (want 2)", other.DecodesFromMessage(), calls.Load())
	}
}

// checkMessage checks that o's kept protobuf message, in whatever pieces,
// is want: appended, in pieces and by length; split, that the cache keeps
// it without its managedFields entries.
func checkMessage(t *testing.T, o *Object, want []byte, split bool) {
	t.Helper()
	m, err := o.ProtobufMessage()
	if err != nil {
		t.Fatalf("%s: ProtobufMessage: %v", o.Key, err)
	}
	if got := m.AppendTo([]byte("head")); !bytes.Equal(got, append([]byte("head"), want...)) {
		t.Errorf("%s: AppendTo = %x\nwant %x", o.Key, got, want)
	}
	pieces := m.AppendPieces(nil)
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) || len(pieces) != m.Pieces() || m.Len() != len(want) {
		t.Errorf("%s: %d pieces (Pieces %d) of %d bytes (Len %d) = %x\nwant %x", o.Key, len(pieces), m.Pieces(), len(got), m.Len(), got, want)
	}
	if kept := o.entries != nil; kept != split {
		t.Errorf("%s: managedFields kept apart %v, want %v", o.Key, kept, split)
	}
	if split && len(o.data) >= len(want) {
		t.Errorf("%s: keeps %d bytes of its own for a %d-byte message", o.Key, len(o.data), len(want))
	}
}

// TestMessageEntriesShared: pods whose managedFields entries are the same
// keep one copy of each; an entry that differs (another time) is its own;
// a pod without entries is kept whole; an entry the cache has forgotten
// (more distinct entries since than it remembers) is kept anew. Each
// reads back as stored.
func TestMessageEntriesShared(t *testing.T) {
	var calls atomic.Int64
	cfg := protoPodConfig(t, &calls)
	cfg.Prefix = "/pods/"
	c := New(cfg)
	objectOf := func(pod *v1.Pod, rev int64) *Object {
		t.Helper()
		o, err := c.decode(storage.KV{Key: "/pods/" + pod.Namespace + "/" + pod.Name, Value: storedProtobuf(t, pod), Revision: rev}, false)
		if err != nil {
			t.Fatal(err)
		}
		checkObject(t, o, pod, true)
		return o
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	a, b := objectOf(benchPod(1), 10), objectOf(benchPod(2), 11)
	later := benchPod(3)
	moved := metav1.Unix(1764000001, 0)
	later.ManagedFields[0].Time = &moved
	c3 := objectOf(later, 12)
	if len(a.entries) != 2 || len(b.entries) != 2 || len(c3.entries) != 2 {
		t.Fatalf("entries kept: %d, %d, %d; want 2 each", len(a.entries), len(b.entries), len(c3.entries))
	}
	if !same(a.entries[0], b.entries[0]) {
		t.Error("the same managedFields entry is kept more than once")
	}
	if same(a.entries[1], b.entries[1]) || same(a.entries[0], c3.entries[0]) {
		t.Error("different entries (another pod IP, another time) share one copy")
	}
	bare := benchPod(4)
	bare.ManagedFields = nil
	objectOf(bare, 13)

	for i := range recentEntries / 2 {
		pod := benchPod(5)
		at := metav1.Unix(1764000100+int64(i), 0)
		pod.ManagedFields[0].Time, pod.ManagedFields[1].Time = &at, &at
		if _, err := c.decode(storage.KV{Key: "/pods/ns/p", Value: storedProtobuf(t, pod), Revision: int64(100 + i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	again := objectOf(benchPod(6), 20000)
	if same(again.entries[0], a.entries[0]) {
		t.Error("an entry forgotten since is still shared")
	}
	checkObject(t, a, benchPod(1), true)
}
