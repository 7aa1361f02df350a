package etcd

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrape serves reg as /metrics does and parses it.
func scrape(t *testing.T, reg *prometheus.Registry) metricstest.Families {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	return metricstest.Scrape(t, srv.Client(), srv.URL)
}

func value(t *testing.T, fs metricstest.Families, name string, labels ...string) float64 {
	t.Helper()
	v, ok := fs.Value(name, labels...)
	if !ok {
		t.Fatalf("no %s%v; series: %v", name, labels, fs.Series(name))
	}
	return v
}

// TestMetricsCountRequests: a known sequence of requests moves kube's
// etcd metrics by exactly its counts, labelled by operation and by the
// type named for the key's resource.
func TestMetricsCountRequests(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	// A prefix of our own: other tests share the etcd, not the registry.
	s := New(shared.Client(), WithMetrics(reg), WithPrefix("/metrics-"+strconv.FormatInt(time.Now().UnixNano(), 10)))
	s.SetMetricsName("leases", "leases.coordination.k8s.io")
	ctx := t.Context()

	const n = 5
	for i := range n {
		if _, err := s.Create(ctx, "/pods/ns/p"+strconv.Itoa(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// An existing key is an answer, not an etcd error.
	if _, err := s.Create(ctx, "/pods/ns/p0", []byte("v")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.Get(ctx, "/pods/ns/p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "/pods/ns/missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	// One get (the current value) and one update transaction.
	if _, err := s.GuaranteedUpdate(ctx, "/pods/ns/p1", func(storage.KV) ([]byte, error) { return []byte("w"), nil }); err != nil {
		t.Fatal(err)
	}
	// One get and one delete transaction.
	if _, err := s.Delete(ctx, "/pods/ns/p2", nil); err != nil {
		t.Fatal(err)
	}
	// Two pages, one range request each.
	page, err := s.List(ctx, "/pods/", storage.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "/pods/", storage.ListOptions{StartKey: page.NextKey, Revision: page.Revision}); err != nil {
		t.Fatal(err)
	}
	// A filtered list tests every object and returns the matches.
	onlyP0 := func(kv storage.KV) (bool, error) { return strings.HasSuffix(kv.Key, "/p0"), nil }
	if _, err := s.List(ctx, "/pods/", storage.ListOptions{Predicate: onlyP0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/leases/ns/l", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CurrentRevision(ctx, "/leases/"); err != nil {
		t.Fatal(err)
	}

	fs := scrape(t, reg)
	for _, c := range []struct {
		op, typ string
		want    float64
	}{
		{"create", "pods", n + 1},
		{"get", "pods", 4}, // 2 Gets, the update's and the delete's reads
		{"update", "pods", 1},
		{"delete", "pods", 1},
		{"list", "pods", 3},
		{"create", "leases.coordination.k8s.io", 1},
		{"get", "leases.coordination.k8s.io", 1}, // CurrentRevision
	} {
		labels := []string{"operation", c.op, "type", c.typ}
		if got := value(t, fs, "etcd_requests_total", labels...); got != c.want {
			t.Errorf("etcd_requests_total%v = %v, want %v", labels, got, c.want)
		}
		if got := value(t, fs, "etcd_request_duration_seconds", labels...); got != c.want {
			t.Errorf("etcd_request_duration_seconds%v has %v samples, want %v", labels, got, c.want)
		}
	}
	if series := fs.Series("etcd_request_errors_total"); len(series) != 0 {
		t.Errorf("etcd_request_errors_total has series without errors: %v", series)
	}
	// 4 pods left: the pages fetched 3+1, the filtered list 4 and tested 4.
	for name, want := range map[string]float64{
		"apiserver_storage_list_total":                   3,
		"apiserver_storage_list_fetched_objects_total":   8,
		"apiserver_storage_list_evaluated_objects_total": 8,
		"apiserver_storage_list_returned_objects_total":  5,
	} {
		if got := value(t, fs, name, "resource", "pods"); got != want {
			t.Errorf("%s{resource=pods} = %v, want %v", name, got, want)
		}
	}
	if got := value(t, fs, "apiserver_storage_list_total", "resource", "leases.coordination.k8s.io"); got != 1 {
		t.Errorf("CurrentRevision: apiserver_storage_list_total{leases} = %v, want 1 (as kube's one-item read)", got)
	}
	if got := value(t, fs, "apiserver_storage_size_bytes", "storage_cluster_id", "etcd-0"); got <= 0 {
		t.Errorf("apiserver_storage_size_bytes = %v, want etcd's database size", got)
	}
	// Kube's buckets, HELP with the stability prefix.
	h := fs["etcd_request_duration_seconds"]
	if !strings.HasPrefix(h.GetHelp(), "[ALPHA] ") {
		t.Errorf("HELP %q lacks kube's stability prefix", h.GetHelp())
	}
	// The parsed exposition has the +Inf bucket too.
	if b := h.GetMetric()[0].GetHistogram().GetBucket(); len(b) != len(etcdLatencyBuckets)+1 || b[0].GetUpperBound() != 0.005 || b[len(b)-2].GetUpperBound() != 60 {
		t.Errorf("buckets %v, want kube's 0.005..60", b)
	}
}

// TestMetricsCountErrors: a request etcd fails is an error of its
// operation and type.
func TestMetricsCountErrors(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := New(shared.Client(), WithMetrics(reg))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx, "/nodes/n"); err == nil {
		t.Fatal("a get with a cancelled context succeeded")
	}
	fs := scrape(t, reg)
	if got := value(t, fs, "etcd_request_errors_total", "operation", "get", "type", "nodes"); got != 1 {
		t.Errorf("etcd_request_errors_total{get,nodes} = %v, want 1", got)
	}
	if got := value(t, fs, "etcd_requests_total", "operation", "get", "type", "nodes"); got != 1 {
		t.Errorf("etcd_requests_total{get,nodes} = %v, want 1", got)
	}
}

// TestMetricsCountWatchEvents: a watch counts the etcd events it receives
// and the progress notifications (etcd_bookmark_counts) of its resource.
func TestMetricsCountWatchEvents(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := New(shared.Client(), WithMetrics(reg), WithPrefix("/metrics-watch-"+strconv.FormatInt(time.Now().UnixNano(), 10)))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	events, err := s.Watch(ctx, "/nodes/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Create(ctx, "/nodes/n"+strconv.Itoa(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if ev := <-events; ev.Type != storage.Added {
			t.Fatalf("event %v, want ADDED", ev)
		}
	}
	if err := s.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev.Type == storage.Progress {
			break
		}
	}
	fs := scrape(t, reg)
	if got := value(t, fs, "apiserver_storage_events_received_total", "resource", "nodes"); got != 3 {
		t.Errorf("apiserver_storage_events_received_total{nodes} = %v, want 3", got)
	}
	if got := value(t, fs, "etcd_bookmark_counts", "resource", "nodes"); got < 1 {
		t.Errorf("etcd_bookmark_counts{nodes} = %v, want at least the one requested", got)
	}
}

// BenchmarkRecord measures what the metrics add to one etcd request: the
// type lookup, a histogram observation and a counter increment (plus the
// clock reads), from many goroutines as an API server makes requests.
func BenchmarkRecord(b *testing.B) {
	m := newMetrics(prometheus.NewRegistry())
	m.setName("leases", "leases.coordination.k8s.io")
	key := "/pods/default/pod-1"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.record(opCreate, key, m.now(), nil)
		}
	})
}

// TestMetricsLeaseObjects: each lease granted observes, as kube's lease
// manager does, the objects of the lease before it plus the new one.
func TestMetricsLeaseObjects(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := New(shared.Client(), WithMetrics(reg), WithLeaseConfig(LeaseConfig{MaxObjects: 2}),
		WithPrefix("/metrics-lease-"+strconv.FormatInt(time.Now().UnixNano(), 10)))
	withTTL := storage.WithTTL("/events/", time.Hour)
	// Three writes: a lease for the first two, a second for the third.
	for i := range 3 {
		if _, err := s.Create(t.Context(), "/events/ns/e"+strconv.Itoa(i), []byte("v"), withTTL); err != nil {
			t.Fatal(err)
		}
	}
	h := scrape(t, reg)["etcd_lease_object_counts"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 1+3 {
		t.Errorf("etcd_lease_object_counts: %d samples summing to %v, want 2 (one per grant) summing to 4 (1, then 2+1)",
			h.GetSampleCount(), h.GetSampleSum())
	}
}
