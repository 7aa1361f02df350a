package watch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/test/logbuf"
)

// nextPull is next for a consumer that pulls: it fails the test when Next
// does not return within 5s.
func nextPull(t *testing.T, w *Watcher) (Event, bool) {
	t.Helper()
	type result struct {
		ev Event
		ok bool
	}
	got := make(chan result, 1)
	go func() {
		ev, ok := w.Next()
		got <- result{ev, ok}
	}()
	select {
	case r := <-got:
		return r.ev, r.ok
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return within 5s")
	}
	return Event{}, false
}

// TestPullWatcher: Next delivers in order, Ready says whether an event is
// waiting, and the watcher starts no goroutine and queues nothing while
// idle.
func TestPullWatcher(t *testing.T) {
	c, st, prefix := startCache(t, Config{})
	before := runtime.NumGoroutine()
	w, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("Watch started %d goroutines, want none", n-before)
	}
	if w.Ready() || w.w.queue != nil {
		t.Fatalf("idle watcher: Ready %v, queue cap %d; want false, no queue", w.Ready(), cap(w.w.queue))
	}
	for i := range 3 {
		put(t, st, prefix+"k"+strconv.Itoa(i), "x")
	}
	for i := range 3 {
		ev, ok := nextPull(t, w)
		if !ok || ev.Object.Key != prefix+"k"+strconv.Itoa(i) {
			t.Fatalf("event %d: %v %s", i, ok, describe(ev))
		}
	}
	if w.Ready() {
		t.Fatal("Ready after the queue was drained")
	}
}

// TestWatcherLimitIsExact: a watcher holds exactly WatcherBuffer events;
// one more makes it lag rather than close: Next delivers the queued ones,
// then the rest from the window, and the watcher is current again.
func TestWatcherLimitIsExact(t *testing.T) {
	c, st, prefix := startCache(t, Config{WatcherBuffer: 3})
	w, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last int64
	for i := range 3 {
		last = put(t, st, prefix+"k"+strconv.Itoa(i), "x")
	}
	if err := c.waitFor(context.Background(), last, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.LaggedWatchers != 0 || !w.Ready() {
		t.Fatalf("after 3 events: %d lagged, Ready %v; want 0, true", s.LaggedWatchers, w.Ready())
	}
	for i := 3; i < 6; i++ {
		last = put(t, st, prefix+"k"+strconv.Itoa(i), "x")
	}
	if err := c.waitFor(context.Background(), last, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.LaggedWatchers != 1 || s.SlowWatchersClosed != 0 {
		t.Fatalf("after 6 events: %d lagged, %d closed; want 1, 0", s.LaggedWatchers, s.SlowWatchersClosed)
	}
	if got := len(w.w.queue) - w.w.head; got != 3 {
		t.Fatalf("a lagging watcher queued %d events, want its buffer's 3", got)
	}
	for i := range 6 {
		ev, ok := nextPull(t, w)
		if !ok || ev.Type != Added || ev.Object.Key != prefix+"k"+strconv.Itoa(i) {
			t.Fatalf("event %d: %v %s", i, ok, describe(ev))
		}
	}
	// Current again: a change is queued as it happens.
	put(t, st, prefix+"k0", "y")
	if ev, ok := nextPull(t, w); !ok || ev.Type != Modified || ev.Object.Labels.Get("v") != "y" {
		t.Fatalf("after catching up: %v %s", ok, describe(ev))
	}
	if s := c.Stats(); s.LaggedWatchers != 1 || s.SlowWatchersClosed != 0 {
		t.Fatalf("at the end: %d lagged, %d closed; want 1, 0", s.LaggedWatchers, s.SlowWatchersClosed)
	}
}

// TestLaggingWatcherClosedPastTheWindow: a lagging watcher whose events
// have left the window is closed as fallen behind once its queue is
// drained (its client relists), with the log line naming its client.
func TestLaggingWatcherClosedPastTheWindow(t *testing.T) {
	var log logbuf.Buffer
	c, st, prefix := startCache(t, Config{WatcherBuffer: 3, WindowSize: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	w, err := c.Watch(context.Background(), WatchOptions{Client: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last int64
	for i := range 6 {
		last = put(t, st, prefix+"k"+strconv.Itoa(i), "x")
	}
	if err := c.waitFor(context.Background(), last, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if ev, ok := nextPull(t, w); !ok || ev.Object.Key != prefix+"k"+strconv.Itoa(i) {
			t.Fatalf("queued event %d: %v %s", i, ok, describe(ev))
		}
	}
	if ev, ok := nextPull(t, w); ok {
		t.Fatalf("a watcher past the window got %s, want the end", describe(ev))
	}
	if s := c.Stats(); s.LaggedWatchers != 1 || s.SlowWatchersClosed != 1 || s.Watchers != 0 {
		t.Fatalf("lagged %d, closed %d, watchers %d; want 1, 1, 0", s.LaggedWatchers, s.SlowWatchersClosed, s.Watchers)
	}
	out := log.String()
	for _, msg := range []string{`msg="a watcher fell behind its buffer; it goes on from the window"`, `msg="closing a watcher that fell behind"`} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			found = found || strings.Contains(line, msg) && strings.Contains(line, " buffer=3 client=bench")
		}
		if !found {
			t.Errorf("log lacks %s naming the client:\n%s", msg, out)
		}
	}
}

// TestLaggingWatcherSelects: what a lagging watcher takes from the window
// goes through its prefix and selector as a current watcher's events do
// (other prefixes' events skipped, an object moving into the selection
// ADDED, out of it DELETED): it gets exactly what a watcher that kept up
// got.
func TestLaggingWatcherSelects(t *testing.T) {
	c, st, prefix := startCache(t, Config{WatcherBuffer: 1})
	opts := WatchOptions{Prefix: "ns/", Match: func(o *Object) bool { return strings.HasPrefix(o.Labels.Get("v"), "y") }}
	slow, err := c.Watch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	current, err := c.Watch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer current.Stop()
	var want []string
	// selected: whether the change concerns the watchers (a current one
	// is read at once, so it never lags).
	step := func(key, value string, selected bool) {
		t.Helper()
		put(t, st, prefix+key, value)
		if selected {
			want = append(want, describe(next(t, current)))
		}
	}
	step("ns/a", "y1", true)     // ADDED
	step("ns/b", "n", false)     // not selected
	step("other/a", "y", false)  // another prefix
	step("ns/a", "n", true)      // DELETED: leaves the selection
	step("ns/c", "n", false)     // not selected
	step("ns/c", "y", true)      // ADDED: enters it
	step("ns/a", "y2", true)     // ADDED again
	step("other/b", "y2", false) // another prefix
	if _, err := st.Delete(context.Background(), prefix+"ns/c", nil); err != nil {
		t.Fatal(err)
	}
	want = append(want, describe(next(t, current)))
	var got []string
	for range want {
		ev, ok := nextPull(t, slow)
		if !ok {
			t.Fatalf("lagging watcher ended after %v", got)
		}
		got = append(got, describe(ev))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lagging watcher got\n%v\nwant (a current watcher's)\n%v", got, want)
	}
	if s := c.Stats(); s.LaggedWatchers != 1 || s.SlowWatchersClosed != 0 {
		t.Fatalf("lagged %d, closed %d; want 1, 0", s.LaggedWatchers, s.SlowWatchersClosed)
	}
	if slow.Ready() {
		t.Fatal("Ready with nothing left to deliver")
	}
}

// TestLaggingWatcherSharedRevision: events one transaction wrote share a
// revision (a lease's expiry deletes its keys at once); a watcher whose
// buffer overflows in the middle of them gets each exactly once.
func TestLaggingWatcherSharedRevision(t *testing.T) {
	c := New(Config{Prefix: "/p/", Decode: decodePod, WatcherBuffer: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	w, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, kv := range []storage.KV{{Key: "/p/a", Revision: 5}, {Key: "/p/b", Revision: 6}, {Key: "/p/c", Revision: 6},
		{Key: "/p/d", Revision: 6}, {Key: "/p/e", Revision: 7}} {
		kv.Value = []byte("x")
		if err := c.apply(storage.Event{Type: storage.Added, KV: kv}); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.LaggedWatchers != 1 {
		t.Fatalf("lagged %d, want 1 (the buffer of 2 overflows at /p/c)", s.LaggedWatchers)
	}
	var got []string
	for w.Ready() {
		ev, ok := w.Next()
		if !ok {
			t.Fatalf("watch ended after %v", got)
		}
		got = append(got, fmt.Sprintf("%s@%d", ev.Object.Key, ev.Object.Revision))
	}
	if want := []string{"/p/a@5", "/p/b@6", "/p/c@6", "/p/d@6", "/p/e@7"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestWatcherEnds: Stop and the end of the watch's context both wake a
// blocked Next and unregister the watcher.
func TestWatcherEnds(t *testing.T) {
	c, _, _ := startCache(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	byCtx, err := c.Watch(ctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byStop, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, ok := nextPull(t, byCtx); ok {
		t.Fatal("event after the context ended")
	}
	time.AfterFunc(50*time.Millisecond, byStop.Stop)
	if _, ok := nextPull(t, byStop); ok {
		t.Fatal("event after Stop")
	}
	byStop.Stop() // again: no effect
	if n := c.Stats().Watchers; n != 0 {
		t.Fatalf("%d watchers registered after both ended", n)
	}
}
