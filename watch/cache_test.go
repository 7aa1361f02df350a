package watch

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/test/logbuf"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/memory"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// store returns an in-memory store for one test, closed when it ends: the
// cache's contract with storage is storagetest's, which storage/memory
// passes as storage/etcd does, so the tests need no etcd process.
func store(t *testing.T) storage.Interface {
	t.Helper()
	st := memory.New()
	t.Cleanup(st.Close)
	return st
}

// decodePod decodes a value into a pod named by its key, labelled v=<value>.
func decodePod(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error) {
	pod := &v1.Pod{}
	pod.Name, pod.Labels = kv.Key, map[string]string{"v": string(kv.Value)}
	pod.ResourceVersion = strconv.FormatInt(kv.Revision, 10)
	return pod, labels.Set(pod.Labels), fields.Set{"metadata.name": pod.Name}, nil
}

// prefixes numbers the test prefixes, so that a test's keys are its own
// even when it shares a store.
var prefixes atomic.Int64

func freshPrefix(t *testing.T) string {
	return fmt.Sprintf("/test/%s-%d/", t.Name(), prefixes.Add(1))
}

// startCache runs a cache over a fresh prefix until the test ends.
func startCache(t *testing.T, cfg Config) (*Cache, storage.Interface, string) {
	t.Helper()
	st := store(t)
	prefix := freshPrefix(t)
	cfg.Storage, cfg.Prefix, cfg.Decode = st, prefix, decodePod
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Writes made before the cache's first list would not be events of
	// its window: start once it is ready.
	if err := c.waitFor(ctx, 0, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	return c, st, prefix
}

func put(t *testing.T, st storage.Interface, key, value string) int64 {
	t.Helper()
	kv, err := st.Create(context.Background(), key, []byte(value))
	if errors.Is(err, storage.ErrAlreadyExists) {
		kv, err = st.GuaranteedUpdate(context.Background(), key, func(storage.KV) ([]byte, error) { return []byte(value), nil })
	}
	if err != nil {
		t.Fatal(err)
	}
	return kv.Revision
}

func next(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return Event{}
}

func describe(ev Event) string {
	return fmt.Sprintf("%s %s=%s", ev.Type, ev.Object.Key, ev.Object.Labels.Get("v"))
}

func TestListIsConsistentAndSorted(t *testing.T) {
	c, st, prefix := startCache(t, Config{})
	for i := 3; i > 0; i-- {
		put(t, st, fmt.Sprintf("%sns/p%d", prefix, i), "a")
	}
	rev := put(t, st, prefix+"other/p9", "b")
	snap, err := c.List(context.Background(), SnapshotOptions{Consistent: true, Prefix: "ns/"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision < rev || len(snap.Items) != 3 || snap.Items[0].Key != prefix+"ns/p1" || snap.Items[2].Key != prefix+"ns/p3" {
		t.Fatalf("snapshot at %d (want >= %d): %d items %v", snap.Revision, rev, len(snap.Items), snap.Items)
	}
	match := func(o *Object) bool { return o.Labels.Get("v") == "b" }
	if snap, _ := c.List(context.Background(), SnapshotOptions{Consistent: true, Match: match}); len(snap.Items) != 1 {
		t.Fatalf("selector: %d items, want 1", len(snap.Items))
	}
	if _, err := c.List(context.Background(), SnapshotOptions{MinRevision: rev + 1000}); !errors.Is(err, storage.ErrFutureRevision) {
		t.Fatalf("future revision: %v", err)
	}
	// A write under another prefix moves etcd's revision but not this
	// cache's watch: a consistent read must still catch up (through a
	// progress request) rather than time out.
	other := put(t, st, "/elsewhere/"+t.Name(), "z")
	snap, err = c.List(context.Background(), SnapshotOptions{Consistent: true})
	if err != nil || snap.Revision < other {
		t.Fatalf("consistent read after a foreign write: rev %d (want >= %d), err %v", snap.Revision, other, err)
	}
}

func TestWatchFromRevisionSelectorTransitions(t *testing.T) {
	c, st, prefix := startCache(t, Config{})
	start := put(t, st, prefix+"a", "x")
	w, err := c.Watch(context.Background(), WatchOptions{FromRevision: start, Match: func(o *Object) bool { return o.Labels.Get("v") == "y" }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	put(t, st, prefix+"a", "y") // starts matching: ADDED
	put(t, st, prefix+"a", "y2")
	put(t, st, prefix+"b", "y")
	if _, err := st.Delete(context.Background(), prefix+"b", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED " + prefix + "a=y", "DELETED " + prefix + "a=y2", "ADDED " + prefix + "b=y", "DELETED " + prefix + "b=y"}
	for _, w0 := range want {
		if got := describe(next(t, w)); got != w0 {
			t.Fatalf("got %q, want %q", got, w0)
		}
	}
}

func TestWatchReplaysWindowAndExpires(t *testing.T) {
	c, st, prefix := startCache(t, Config{WindowSize: 3})
	var revs []int64
	for i := 0; i < 5; i++ {
		revs = append(revs, put(t, st, prefix+"k", strconv.Itoa(i)))
	}
	if err := c.waitFor(context.Background(), revs[4], time.Second, false); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), WatchOptions{FromRevision: revs[2]})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, v := range []string{"3", "4"} {
		if ev := next(t, w); ev.Object.Labels.Get("v") != v || ev.Type != Modified {
			t.Fatalf("replay: got %s, want MODIFIED v=%s", describe(ev), v)
		}
	}
	var compacted *storage.CompactedError
	if _, err := c.Watch(context.Background(), WatchOptions{FromRevision: revs[0]}); !errors.As(err, &compacted) || compacted.Requested != revs[0] {
		t.Fatalf("watch before the window: %v, want CompactedError", err)
	}
}

// TestWatchReplayKeepsToPrefix: a watch of one namespace from a past
// revision replays that namespace's events only, not the window's others.
func TestWatchReplayKeepsToPrefix(t *testing.T) {
	c, st, prefix := startCache(t, Config{})
	start := put(t, st, prefix+"ns-a/p0", "0")
	put(t, st, prefix+"ns-b/p1", "1")
	put(t, st, prefix+"ns-ab/p2", "2")
	last := put(t, st, prefix+"ns-a/p3", "3")
	if err := c.waitFor(context.Background(), last, time.Second, false); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), WatchOptions{FromRevision: start, Prefix: "ns-a/"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got, want := describe(next(t, w)), "ADDED "+prefix+"ns-a/p3=3"; got != want {
		t.Fatalf("first replayed event %q, want %q", got, want)
	}
	if w.Ready() {
		t.Fatalf("another event replayed: %s", describe(next(t, w)))
	}
}

func TestWatchInitialEventsThenChanges(t *testing.T) {
	c, st, prefix := startCache(t, Config{})
	put(t, st, prefix+"a", "1")
	put(t, st, prefix+"b", "1")
	if _, err := c.List(context.Background(), SnapshotOptions{Consistent: true}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), WatchOptions{SendInitial: true, InitialEventsEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	put(t, st, prefix+"c", "1")
	if got := describe(next(t, w)); got != "ADDED "+prefix+"a=1" {
		t.Fatalf("got %s", got)
	}
	if got := describe(next(t, w)); got != "ADDED "+prefix+"b=1" {
		t.Fatalf("got %s", got)
	}
	if ev := next(t, w); ev.Type != Bookmark || !ev.InitialEventsEnd {
		t.Fatalf("want the initial-events-end bookmark, got %+v", ev)
	}
	if got := describe(next(t, w)); got != "ADDED "+prefix+"c=1" {
		t.Fatalf("got %s", got)
	}
}

// TestSlowWatcherIsClosed: a watcher that does not read is closed once its
// buffer is full and the window has moved past the events it did not
// queue, with a log line naming its client, and the others keep receiving.
func TestSlowWatcherIsClosed(t *testing.T) {
	var log logbuf.Buffer
	c, st, prefix := startCache(t, Config{WatcherBuffer: 2, WindowSize: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	slow, err := c.Watch(context.Background(), WatchOptions{Client: "system:kube-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	for i := 0; i < 10; i++ {
		put(t, st, prefix+"k", strconv.Itoa(i))
		if ev := next(t, fast); ev.Object.Labels.Get("v") != strconv.Itoa(i) {
			t.Fatalf("fast watcher: %s", describe(ev))
		}
	}
	deadline := time.After(5 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-slow.Events():
		case <-deadline:
			t.Fatal("slow watcher was not closed")
		}
	}
	if c.SlowWatchersClosed() != 1 {
		t.Fatalf("SlowWatchersClosed = %d, want 1", c.SlowWatchersClosed())
	}
	if out := log.String(); !strings.Contains(out, `msg="closing a watcher that fell behind"`) || !strings.Contains(out, "buffer=2 client=system:kube-scheduler\n") {
		t.Errorf("log does not name the slow watcher's client:\n%s", out)
	}
}

// TestWatcherSendingInitialEventsIsNotSlow: while a watcher still has its
// initial events to send, changes may queue beyond its buffer, up to as
// many as it has left to send; once they are sent, the buffer alone bounds
// it again.
func TestWatcherSendingInitialEventsIsNotSlow(t *testing.T) {
	c, st, prefix := startCache(t, Config{WatcherBuffer: 2})
	var last int64
	for i := range 10 {
		last = put(t, st, prefix+"k"+strconv.Itoa(i), "0")
	}
	// The ten are the initial state, not changes queued for the watchers.
	if err := c.waitFor(context.Background(), last, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), WatchOptions{SendInitial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Probes: a second watcher, read at once, tells when the cache has
	// dispatched each change to both.
	probe, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Stop()
	for i := range 5 { // 5 > the buffer of 2, < 2 + 10 initial
		put(t, st, prefix+"k"+strconv.Itoa(i), "1")
		next(t, probe)
	}
	if s := c.Stats(); s.SlowWatchersClosed != 0 || s.LaggedWatchers != 0 {
		t.Fatalf("a watcher with its initial events still to send was closed (%d) or lagged (%d)", s.SlowWatchersClosed, s.LaggedWatchers)
	}
	for i := range 15 {
		ev := next(t, w)
		want := "0"
		if i >= 10 {
			want = "1"
		}
		if got := ev.Object.Labels.Get("v"); got != want {
			t.Fatalf("event %d: %s, want v=%s", i, describe(ev), want)
		}
	}
	// Initial events sent: the buffer alone bounds it. Of four unread
	// changes, Events' relay holds one and the buffer two: the fourth
	// overflows, and the watcher goes on from the window.
	for i := range 4 {
		put(t, st, prefix+"k"+strconv.Itoa(i), "2")
		next(t, probe)
	}
	if s := c.Stats(); s.LaggedWatchers != 1 || s.SlowWatchersClosed != 0 {
		t.Fatalf("lagged %d, closed %d; want 1, 0 once the initial events were sent", s.LaggedWatchers, s.SlowWatchersClosed)
	}
}

// TestIndexedWatchers: with IndexField, a watcher of one value sees only
// its objects, including one that moves in (ADDED) or out (DELETED).
func TestIndexedWatchers(t *testing.T) {
	decodeNode := func(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error) {
		obj, l, _, err := decodePod(kv)
		return obj, l, fields.Set{"spec.nodeName": string(kv.Value)}, err
	}
	st := store(t)
	prefix := freshPrefix(t)
	c := New(Config{Storage: st, Prefix: prefix, Decode: decodeNode, IndexField: "spec.nodeName",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := c.waitFor(ctx, 0, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}

	watchNode := func(node string) *Watcher {
		w, err := c.Watch(ctx, WatchOptions{IndexValue: &node, Match: func(o *Object) bool { return o.Fields.Get("spec.nodeName") == node }})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	n1, n2 := watchNode("n1"), watchNode("n2")
	all, err := c.Watch(ctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, prefix+"p", "n1")
	put(t, st, prefix+"q", "n2")
	put(t, st, prefix+"p", "n2") // moves from n1 to n2
	for _, want := range []string{"ADDED " + prefix + "p=n1", "DELETED " + prefix + "p=n2"} {
		if got := describe(next(t, n1)); got != want {
			t.Fatalf("n1 watcher: got %s, want %s", got, want)
		}
	}
	for _, want := range []string{"ADDED " + prefix + "q=n2", "ADDED " + prefix + "p=n2"} {
		if got := describe(next(t, n2)); got != want {
			t.Fatalf("n2 watcher: got %s, want %s", got, want)
		}
	}
	for i := 0; i < 3; i++ {
		next(t, all)
	}
	c.mu.RLock()
	indexed, unindexed := len(c.byIndex), len(c.unindexed)
	c.mu.RUnlock()
	if indexed != 2 || unindexed != 1 {
		t.Fatalf("index holds %d values and %d unindexed watchers, want 2 and 1", indexed, unindexed)
	}
}

// TestWaitForNotReady: a cache that never became ready (its list failing,
// or never run) answers ErrNotReady, kube's "storage is (re)initializing",
// not a too-large resourceVersion; a ready one that lags answers the latter.
func TestWaitForNotReady(t *testing.T) {
	c := New(Config{Storage: store(t), Prefix: freshPrefix(t), Decode: decodePod,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := c.waitFor(context.Background(), 0, 10*time.Millisecond, false); !errors.Is(err, ErrNotReady) {
		t.Fatalf("waitFor on a cache never run = %v, want ErrNotReady", err)
	}
	ready, _, _ := startCache(t, Config{})
	err := ready.waitFor(context.Background(), 1<<40, 10*time.Millisecond, false)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("waitFor a future revision on a ready cache = %v, want TooLargeError", err)
	}
}

// TestWindowBoundedByBytesAndAge: besides its count, the window keeps no
// more than WindowBytes of objects and no event older than WindowMaxAge;
// a watch from an evicted event's revision gets CompactedError (kube's
// 410), one from the newest replays.
func TestWindowBoundedByBytesAndAge(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, st, prefix := startCache(t, Config{WindowBytes: 2500, WindowMaxAge: time.Minute, Now: clock})
	big := strings.Repeat("x", 1000)
	var revs []int64
	for i := 0; i < 5; i++ {
		revs = append(revs, put(t, st, prefix+"k", big+strconv.Itoa(i)))
	}
	if err := c.waitFor(context.Background(), revs[4], 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	c.mu.RLock()
	n, bytes := c.n, c.windowBytes
	c.mu.RUnlock()
	if n > 2 || bytes > 2500 {
		t.Fatalf("window holds %d events of %d bytes, want at most 2500 bytes", n, bytes)
	}
	var compacted *storage.CompactedError
	if _, err := c.Watch(context.Background(), WatchOptions{FromRevision: revs[1]}); !errors.As(err, &compacted) {
		t.Fatalf("watch from an event evicted by size: %v, want CompactedError", err)
	}
	w, err := c.Watch(context.Background(), WatchOptions{FromRevision: revs[3]})
	if err != nil {
		t.Fatalf("watch from the window: %v", err)
	}
	if ev := next(t, w); ev.Type != Modified || ev.Object.Revision != revs[4] {
		t.Fatalf("replay: got %s at %d, want MODIFIED at %d", describe(ev), ev.Object.Revision, revs[4])
	}
	w.Stop()

	// Two minutes on, the next event pushes out the old ones.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	last := put(t, st, prefix+"small", "y")
	if err := c.waitFor(context.Background(), last, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	c.mu.RLock()
	n = c.n
	c.mu.RUnlock()
	if n != 1 {
		t.Fatalf("window holds %d events after WindowMaxAge, want only the newest", n)
	}
	if _, err := c.Watch(context.Background(), WatchOptions{FromRevision: revs[3]}); !errors.As(err, &compacted) {
		t.Fatalf("watch from an event evicted by age: %v, want CompactedError", err)
	}
	w, err = c.Watch(context.Background(), WatchOptions{FromRevision: last})
	if err != nil {
		t.Fatalf("watch from the newest revision: %v", err)
	}
	w.Stop()
}
