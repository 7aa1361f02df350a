package watch

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
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
// one more closes it, and Next then reports the end.
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
	if c.SlowWatchersClosed() != 0 || !w.Ready() {
		t.Fatalf("after 3 events: %d closed, Ready %v; want 0, true", c.SlowWatchersClosed(), w.Ready())
	}
	last = put(t, st, prefix+"k3", "x")
	if err := c.waitFor(context.Background(), last, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if c.SlowWatchersClosed() != 1 {
		t.Fatalf("after 4 events: %d closed, want 1", c.SlowWatchersClosed())
	}
	if _, ok := nextPull(t, w); ok {
		t.Fatal("Next delivered an event of a closed watcher")
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
