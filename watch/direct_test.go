package watch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corekube/corekube/storage"
)

// modes are the two ways a Cache serves watches: from what it keeps, and
// (Disabled) from an etcd watch per watcher. The tests below hold both to
// the same events.
var modes = []struct {
	name string
	cfg  Config
}{{"cached", Config{}}, {"disabled", Config{Disabled: true}}}

// caughtUp waits until a cache that keeps objects has seen rev (one that
// keeps nothing reads etcd, which has).
func caughtUp(t *testing.T, c *Cache, rev int64) {
	t.Helper()
	if c.Disabled() {
		return
	}
	if err := c.waitFor(context.Background(), rev, waitTimeout, true); err != nil {
		t.Fatal(err)
	}
}

func TestWatchModesSelectorTransitions(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, st, prefix := startCache(t, m.cfg)
			start := put(t, st, prefix+"a", "x")
			w, err := c.Watch(context.Background(), WatchOptions{FromRevision: start, Match: func(o *Object) bool { return strings.HasPrefix(o.Labels.Get("v"), "y") }})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			put(t, st, prefix+"a", "y")  // starts matching: ADDED
			put(t, st, prefix+"a", "x2") // stops: DELETED
			put(t, st, prefix+"a", "y")  // again: ADDED
			put(t, st, prefix+"a", "y1") // still matches: MODIFIED
			put(t, st, prefix+"b", "z")  // never matches: nothing
			put(t, st, prefix+"b", "y")
			if _, err := st.Delete(context.Background(), prefix+"b", nil); err != nil {
				t.Fatal(err)
			}
			want := []string{"ADDED " + prefix + "a=y", "DELETED " + prefix + "a=x2", "ADDED " + prefix + "a=y",
				"MODIFIED " + prefix + "a=y1", "ADDED " + prefix + "b=y", "DELETED " + prefix + "b=y"}
			for _, w0 := range want {
				if got := describe(next(t, w)); got != w0 {
					t.Fatalf("got %q, want %q", got, w0)
				}
			}
		})
	}
}

func TestWatchModesInitialEvents(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, st, prefix := startCache(t, m.cfg)
			put(t, st, prefix+"ns/a", "1")
			put(t, st, prefix+"ns/b", "2")
			put(t, st, prefix+"other/c", "1")
			rev := put(t, st, prefix+"ns/d", "1")
			caughtUp(t, c, rev)
			w, err := c.Watch(context.Background(), WatchOptions{Prefix: "ns/", SendInitial: true, InitialEventsEnd: true,
				Match: func(o *Object) bool { return o.Labels.Get("v") == "1" }})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			for _, want := range []string{"ADDED " + prefix + "ns/a=1", "ADDED " + prefix + "ns/d=1"} {
				if got := describe(next(t, w)); got != want {
					t.Fatalf("got %s, want %s", got, want)
				}
			}
			ev := next(t, w)
			if ev.Type != Bookmark || !ev.InitialEventsEnd || ev.Object.Revision < rev {
				t.Fatalf("want the initial-events-end bookmark at >= %d, got %+v", rev, ev)
			}
			put(t, st, prefix+"other/e", "1") // another namespace
			put(t, st, prefix+"ns/e", "1")
			if got := describe(next(t, w)); got != "ADDED "+prefix+"ns/e=1" {
				t.Fatalf("got %s", got)
			}
		})
	}
}

// TestWatchModesFromNow: a watch from revision 0 without initial events
// sees every write acknowledged after Watch returned, and none before.
func TestWatchModesFromNow(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, st, prefix := startCache(t, m.cfg)
			caughtUp(t, c, put(t, st, prefix+"a", "1"))
			w, err := c.Watch(context.Background(), WatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			put(t, st, prefix+"b", "1")
			if got := describe(next(t, w)); got != "ADDED "+prefix+"b=1" {
				t.Fatalf("got %s", got)
			}
		})
	}
}

// TestDisabledCacheKeepsNothing: a cache that keeps nothing holds no
// object, refuses List, counts what etcd holds, and ends a watch from a
// compacted revision with an Error event.
func TestDisabledCacheKeepsNothing(t *testing.T) {
	c, st, prefix := startCache(t, Config{Disabled: true})
	first := put(t, st, prefix+"a", "1")
	put(t, st, prefix+"a", "2")
	rev := put(t, st, prefix+"b", "1")
	if _, ok := c.Get(prefix + "a"); ok {
		t.Fatal("Get found an object in a cache that keeps nothing")
	}
	if _, err := c.List(context.Background(), SnapshotOptions{}); err == nil {
		t.Fatal("List of a cache that keeps nothing: no error")
	}
	if n, _, err := c.count(context.Background()); err != nil || n != 2 {
		t.Fatalf("count = %d, %v; want 2", n, err)
	}
	if err := st.Compact(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), WatchOptions{FromRevision: first})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := next(t, w)
	var compacted *storage.CompactedError
	if ev.Type != Error || !errors.As(ev.Err, &compacted) {
		t.Fatalf("watch from a compacted revision: got %s %v, want ERROR with a CompactedError", ev.Type, ev.Err)
	}
	if _, ok := <-w.Events(); ok {
		t.Fatal("the watch went on after its Error event")
	}
	// Initial events from a revision etcd has not reached: refused.
	w2, err := c.Watch(context.Background(), WatchOptions{SendInitial: true, FromRevision: rev + 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	var tooLarge *TooLargeError
	if ev := next(t, w2); ev.Type != Error || !errors.As(ev.Err, &tooLarge) {
		t.Fatalf("initial events from a future revision: got %s %v, want ERROR with a TooLargeError", ev.Type, ev.Err)
	}
}

// TestDisabledCacheWaitsForSlowWatcher: a direct watcher whose client
// reads slowly is not closed (the cached one would be, at WatcherBuffer):
// its relay waits, and every event arrives in order.
func TestDisabledCacheWaitsForSlowWatcher(t *testing.T) {
	c, st, prefix := startCache(t, Config{Disabled: true, WatcherBuffer: 2})
	w, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 20
	for i := range n {
		put(t, st, prefix+"k", string(rune('a'+i)))
	}
	for i := range n {
		ev := next(t, w)
		if want := string(rune('a' + i)); ev.Object.Labels.Get("v") != want {
			t.Fatalf("event %d: %s, want v=%s", i, describe(ev), want)
		}
	}
	if s := c.Stats(); s.Watchers != 1 || s.SlowWatchersClosed != 0 {
		t.Fatalf("stats %+v, want one watcher, none closed", s)
	}
	w.Stop()
	if s := c.Stats(); s.Watchers != 0 {
		t.Fatalf("after Stop: %d watchers", s.Watchers)
	}
}
