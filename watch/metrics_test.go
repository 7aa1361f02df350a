package watch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gather reads reg as a scrape would.
func gather(t *testing.T, reg *prometheus.Registry) metricstest.Families {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fs := metricstest.Families{}
	for _, f := range families {
		fs[f.GetName()] = f
	}
	return fs
}

func mustValue(t *testing.T, fs metricstest.Families, name string, labels ...string) float64 {
	t.Helper()
	v, ok := fs.Value(name, labels...)
	if !ok {
		t.Fatalf("no %s%v; series: %v", name, labels, fs.Series(name))
	}
	return v
}

// TestMetricsCountCacheEvents: a known sequence on one cache (10 changes,
// one slow watcher closed, a watch from the current state, a consistent
// LIST, events sent) moves kube's watch cache metrics by its counts.
func TestMetricsCountCacheEvents(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	c, st, prefix := startCache(t, Config{WatcherBuffer: 2, WindowBytes: 1, Metrics: NewMetrics(reg), Resource: "pods", Kind: pod})
	fs := gather(t, reg)
	if got := mustValue(t, fs, "apiserver_watch_cache_initializations_total", "resource", "pods"); got != 1 {
		t.Errorf("initializations = %v after the first list, want 1", got)
	}
	slow, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast, err := c.Watch(context.Background(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	const changes = 10
	for i := range changes {
		put(t, st, prefix+"k", strconv.Itoa(i))
		next(t, fast)
	}
	// The slow watcher's buffer of 2 overflowed on the third change, and
	// a window of one event no longer holds it when the watcher would go on.
	deadline := time.After(5 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-slow.Events():
		case <-deadline:
			t.Fatal("slow watcher was not closed")
		}
	}
	// A watch from the current state gets the one object as an initial
	// event; a consistent LIST waits for the cache (read wait).
	initial, err := c.Watch(context.Background(), WatchOptions{SendInitial: true})
	if err != nil {
		t.Fatal(err)
	}
	initial.Stop()
	if _, err := c.List(context.Background(), SnapshotOptions{Consistent: true}); err != nil {
		t.Fatal(err)
	}
	c.RecordSent(1500)
	c.RecordList(7, 2)

	fs = gather(t, reg)
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"apiserver_watch_cache_events_received_total", []string{"resource", "pods"}, changes},
		{"apiserver_terminated_watchers_total", []string{"resource", "pods"}, 1},
		{"apiserver_init_events_total", []string{"resource", "pods"}, 1},
		{"apiserver_watch_cache_read_wait_seconds", []string{"resource", "pods"}, 1},
		{"apiserver_watch_events_total", []string{"group", "", "version", "v1", "kind", "Pod"}, 1},
		{"apiserver_watch_events_sizes", []string{"group", "", "version", "v1", "kind", "Pod"}, 1},
		{"apiserver_cache_list_total", []string{"resource_prefix", prefix[:len(prefix)-1], "index", ""}, 1},
		{"apiserver_cache_list_fetched_objects_total", []string{"resource_prefix", prefix[:len(prefix)-1]}, 7},
		{"apiserver_cache_list_returned_objects_total", []string{"resource_prefix", prefix[:len(prefix)-1]}, 2},
		{"apiserver_watch_cache_consistent_read_total", []string{"resource", prefix[:len(prefix)-1], "success", "true", "fallback", "false"}, 1},
	} {
		if got := mustValue(t, fs, m.name, m.labels...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	// Progress notifications may add dispatched bookmarks, never remove.
	if got := mustValue(t, fs, "apiserver_watch_cache_events_dispatched_total", "resource", "pods"); got < changes {
		t.Errorf("events dispatched = %v, want at least %d", got, changes)
	}
	// 1500 bytes is in kube's 2 KiB bucket, not its 1 KiB one.
	for _, b := range fs["apiserver_watch_events_sizes"].GetMetric()[0].GetHistogram().GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 2048 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v has %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if got := c.Stats().Capacity; got != 10000 {
		t.Errorf("Stats().Capacity = %d, want the default window of 10000", got)
	}
}

// TestNoMetrics: a cache without Metrics records nothing and NewMetrics
// of no registerer is nil.
func TestNoMetrics(t *testing.T) {
	if NewMetrics(nil) != nil {
		t.Fatal("NewMetrics(nil) is not nil")
	}
	c := New(Config{Prefix: "/pods/"})
	c.RecordSent(10)
	c.RecordList(1, 1)
	if c.metrics != nil {
		t.Fatal("a cache without Metrics has label children")
	}
}

// TestMetricsSharedEventSizes: every watcher's event is counted, the size
// of a dispatched event's shared encoding once per encoding and type;
// initial events are not dispatched, so counted per watcher.
func TestMetricsSharedEventSizes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	c, st, prefix := startCache(t, Config{Metrics: NewMetrics(reg), Resource: "pods", Kind: pod})
	// The cache holds the object before the watches start, so that it
	// reaches them as an initial event, not a dispatched change.
	if err := c.waitFor(context.Background(), put(t, st, prefix+"a", "1"), 10*time.Second, false); err != nil {
		t.Fatal(err)
	}
	var ws []*Watcher
	for range 3 {
		w, err := c.Watch(context.Background(), WatchOptions{SendInitial: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	send := func(ev Event) {
		if ev.Dispatched {
			c.RecordSentShared(ev.Object, ev.Type, false, 100)
		} else {
			c.RecordSent(100)
		}
	}
	for _, w := range ws {
		ev := next(t, w)
		if ev.Type != Added || ev.Dispatched {
			t.Fatalf("initial event %s, dispatched %v; want ADDED, not dispatched", ev.Type, ev.Dispatched)
		}
		send(ev)
	}
	put(t, st, prefix+"a", "2")
	for _, w := range ws {
		ev := next(t, w)
		if ev.Type != Modified || !ev.Dispatched {
			t.Fatalf("change %s, dispatched %v; want MODIFIED, dispatched", ev.Type, ev.Dispatched)
		}
		send(ev)
		// The same object in protobuf is another encoding.
		if w == ws[0] {
			c.RecordSentShared(ev.Object, ev.Type, true, 90)
		}
	}
	fs := gather(t, reg)
	labels := []string{"group", "", "version", "v1", "kind", "Pod"}
	if got := mustValue(t, fs, "apiserver_watch_events_total", labels...); got != 3+3+1 {
		t.Errorf("apiserver_watch_events_total = %v, want 7 (every event to every watcher)", got)
	}
	if got := mustValue(t, fs, "apiserver_watch_events_sizes", labels...); got != 3+1+1 {
		t.Errorf("apiserver_watch_events_sizes has %v samples, want 5 (3 initial, the change in JSON and in protobuf)", got)
	}
}
