package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// scrapeMetrics parses the shared server's /metrics with Prometheus'
// text parser, which refuses malformed and repeated series.
func scrapeMetrics(t *testing.T) metricstest.Families {
	t.Helper()
	return metricstest.Scrape(t, testserver.HTTPClient(), srv.URL()+"/metrics")
}

// metricValue is the value of a series that must exist.
func metricValue(t *testing.T, fs metricstest.Families, name string, labels ...string) float64 {
	t.Helper()
	v, ok := fs.Value(name, labels...)
	if !ok {
		t.Fatalf("/metrics has no %s%v; its series: %v", name, labels, fs.Series(name))
	}
	return v
}

// metricOrZero is a series' value, 0 when it does not exist yet (kube
// makes a series on its first count).
func metricOrZero(fs metricstest.Families, name string, labels ...string) float64 {
	v, _ := fs.Value(name, labels...)
	return v
}

var podKind = []string{"group", "", "version", "v1", "kind", "Pod"}

// TestMetricsStorageAndWatch: after a known sequence (a watch opened, N
// pods created and seen by it, one deleted, the watch closed) the storage,
// etcd and watch metrics move by exactly its counts, under kube's names
// and labels.
func TestMetricsStorageAndWatch(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pods := cs.CoreV1().Pods(ns)
	// Created before the first scrape: the namespace's ServiceAccount is
	// written by a controller meanwhile, not by the sequence.
	if _, err := pods.Create(ctx, newPod("p0", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A consistent LIST waits for the cache to hold p0.
	if _, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t)
	watchers := metricValue(t, before, "apiserver_registered_watchers", podKind...)
	// Two watches of the namespace: the second only reads at the end.
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	w2, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	seen := 0 // events the first watch's client read
	nextOf := func(w watch.Interface, want watch.EventType) watch.EventType {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed, want %s", want)
			}
			return ev.Type
		case <-ctx.Done():
			t.Fatalf("no %s event: %v", want, ctx.Err())
		}
		return ""
	}
	next := func(want watch.EventType) watch.EventType {
		t.Helper()
		seen++
		return nextOf(w, want)
	}
	// From resourceVersion 0 a watch starts with p0 as ADDED.
	if got := next(watch.Added); got != watch.Added {
		t.Fatalf("first event %s, want ADDED", got)
	}
	if got := nextOf(w2, watch.Added); got != watch.Added {
		t.Fatalf("second watch's first event %s, want ADDED", got)
	}
	afterOpen := scrapeMetrics(t)
	if got := metricValue(t, afterOpen, "apiserver_registered_watchers", podKind...); got != watchers+2 {
		t.Errorf("apiserver_registered_watchers{Pod} = %v after two watches opened, want %v", got, watchers+2)
	}
	if got, was := metricValue(t, afterOpen, "apiserver_init_events_total", "resource", "pods"), metricOrZero(before, "apiserver_init_events_total", "resource", "pods"); got != was+2 {
		t.Errorf("apiserver_init_events_total{pods} = %v, want %v (the watches' one initial event each)", got, was+2)
	}

	const n = 3
	for i := 1; i <= n; i++ {
		if _, err := pods.Create(ctx, newPod("p"+strconv.Itoa(i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := next(watch.Added); got != watch.Added {
			t.Fatalf("event %s after a create, want ADDED", got)
		}
	}
	if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// A pod's delete may first mark it deleted (MODIFIED).
	deleteEvents := 0
	for next(watch.Deleted) != watch.Deleted {
		deleteEvents++
	}
	deleteEvents++
	for i := 1; i < seen; i++ {
		nextOf(w2, "")
	}
	// The events were sent: the handler counted them before the clients
	// read them.
	after := scrapeMetrics(t)
	delta := func(name string, labels ...string) float64 {
		return metricValue(t, after, name, labels...) - metricOrZero(before, name, labels...)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"etcd_requests_total", []string{"operation", "create", "type", "pods"}, n},
		{"etcd_request_duration_seconds", []string{"operation", "create", "type", "pods"}, n},
		{"etcd_requests_total", []string{"operation", "delete", "type", "pods"}, 1},
		// ADDED for the initial state, the creates, the delete's, to
		// each watcher.
		{"apiserver_watch_events_total", podKind, float64(2 * seen)},
		// As kube: the size of an initial event's encoding (made per
		// watcher) per watcher, of a dispatched change's (shared) once.
		{"apiserver_watch_events_sizes", podKind, float64(2 + seen - 1)},
		{"apiserver_storage_objects", []string{"resource", "pods"}, n - 1},
		{"apiserver_watch_cache_events_received_total", []string{"resource", "pods"}, float64(n + deleteEvents)},
		{"apiserver_storage_events_received_total", []string{"resource", "pods"}, float64(n + deleteEvents)},
	} {
		if got := delta(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := delta("apiserver_watch_cache_resource_version", "resource", "pods"); got < n+1 {
		t.Errorf("apiserver_watch_cache_resource_version{pods} moved by %v, want at least the %d writes", got, n+1)
	}
	// A namespace's own objects under its group resource.
	if _, ok := after.Value("etcd_requests_total", "type", "leases.coordination.k8s.io"); !ok {
		t.Errorf("no etcd request of leases.coordination.k8s.io (the identity lease); types: %v", after.Series("etcd_requests_total"))
	}

	w.Stop()
	w2.Stop()
	eventually(t, 10*time.Second, "the closed watches to leave apiserver_registered_watchers", func(context.Context) (bool, error) {
		return metricValue(t, scrapeMetrics(t), "apiserver_registered_watchers", podKind...) == watchers, nil
	})
}

// TestMetricsCacheList: a LIST served from the watch cache counts under
// the resource's key prefix the objects it read and the page it returned.
func TestMetricsCacheList(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(name, map[string]string{"pick": strconv.FormatBool(name != "c")}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := []string{"resource_prefix", "/pods", "index", ""}
	before := scrapeMetrics(t)
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "pick=true", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("LIST returned %d pods, want 1", len(list.Items))
	}
	after := scrapeMetrics(t)
	for name, want := range map[string]float64{
		"apiserver_cache_list_total":                 1,
		"apiserver_cache_list_fetched_objects_total": 3, // the namespace's pods
	} {
		if got := metricValue(t, after, name, labels...) - metricOrZero(before, name, labels...); got != want {
			t.Errorf("%s moved by %v, want %v", name, got, want)
		}
	}
	returned := []string{"resource_prefix", "/pods"}
	if got := metricValue(t, after, "apiserver_cache_list_returned_objects_total", returned...) - metricOrZero(before, "apiserver_cache_list_returned_objects_total", returned...); got != 1 {
		t.Errorf("apiserver_cache_list_returned_objects_total moved by %v, want 1", got)
	}
}

// TestMetricsExposition: the whole exposition parses, with kube's HELP
// (stability prefix included) and types for the storage and watch
// metrics, and none of the corekube_watch_cache_* names they replace.
func TestMetricsExposition(t *testing.T) {
	fs := scrapeMetrics(t)
	for name, want := range map[string]string{
		"apiserver_storage_objects":                   "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
		"apiserver_storage_size_bytes":                "[STABLE] Size of the storage database file physically allocated in bytes.",
		"etcd_request_duration_seconds":               "[ALPHA] Etcd request latency in seconds for each operation and object type.",
		"apiserver_watch_cache_resource_version":      "[ALPHA] Current resource version of watch cache broken by resource type.",
		"watch_cache_capacity":                        "[ALPHA] Total capacity of watch cache broken by resource type.",
		"apiserver_terminated_watchers_total":         "[ALPHA] Counter of watchers closed due to unresponsiveness broken by resource type.",
		"apiserver_watch_cache_initializations_total": "[ALPHA] Counter of watch cache initializations broken by resource type.",
	} {
		f := fs[name]
		if f == nil {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		if f.GetHelp() != want {
			t.Errorf("HELP %s = %q, want kube's %q", name, f.GetHelp(), want)
		}
	}
	if got := metricValue(t, fs, "apiserver_watch_cache_initializations_total", "resource", "pods"); got != 1 {
		t.Errorf("apiserver_watch_cache_initializations_total{pods} = %v, want 1", got)
	}
	if got := metricValue(t, fs, "watch_cache_capacity", "resource", "leases.coordination.k8s.io"); got <= 0 {
		t.Errorf("watch_cache_capacity{leases} = %v, want the cache's window", got)
	}
	if got := metricValue(t, fs, "apiserver_storage_size_bytes", "storage_cluster_id", "etcd-0"); got <= 0 {
		t.Errorf("apiserver_storage_size_bytes = %v, want etcd's database size", got)
	}
	for name := range fs {
		if strings.HasPrefix(name, "corekube_watch_cache_") {
			t.Errorf("/metrics still has %s (now under kube's name)", name)
		}
	}
	// The namespaces the server writes at start exist from the start.
	if got := metricValue(t, fs, "apiserver_storage_objects", "resource", "namespaces"); got < 4 {
		t.Errorf("apiserver_storage_objects{namespaces} = %v, want the system namespaces at least", got)
	}
}
