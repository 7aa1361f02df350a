package etcd

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The Store's metrics are kube-apiserver's etcd3 store metrics (package
// k8s.io/apiserver/pkg/storage/etcd3/metrics): the same names, help texts
// (with component-base's stability prefix), labels and buckets, so that
// dashboards and alerts written for kube read them unchanged.

// etcdLatencyBuckets are kube's buckets for etcd_request_duration_seconds
// (the same as its request latency SLO buckets).
var etcdLatencyBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// storageSizeDesc is apiserver_storage_size_bytes, read at scrape time.
var storageSizeDesc = prometheus.NewDesc("apiserver_storage_size_bytes",
	"[STABLE] Size of the storage database file physically allocated in bytes.", []string{"storage_cluster_id"}, nil)

// storageSizeInterval bounds how often a scrape asks etcd for its status:
// scrapes closer together reuse the last answer, so that many scrapers
// cost etcd one status request per interval.
const storageSizeInterval = 10 * time.Second

// storageSizeTimeout bounds the status request of one scrape, as kube's.
const storageSizeTimeout = time.Second

// op is an etcd operation as kube names it in the operation label.
type op uint8

const (
	opGet op = iota
	opList
	opCreate
	opUpdate
	opDelete
	numOps
)

var opNames = [numOps]string{"get", "list", "create", "update", "delete"}

// metrics are one Store's metric vectors. A nil *metrics records nothing.
type metrics struct {
	latency  *prometheus.HistogramVec
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	// bookmarks is a gauge in kube too (it only ever goes up).
	bookmarks      *prometheus.GaugeVec
	eventsReceived *prometheus.CounterVec
	listTotal      *prometheus.CounterVec
	listFetched    *prometheus.CounterVec
	listEvaluated  *prometheus.CounterVec
	listReturned   *prometheus.CounterVec
	leaseObjects   prometheus.Histogram

	// types maps the first segment of a key ("pods" of "/pods/ns/name")
	// to its label children; copied on write, so that a request's lookup
	// takes no lock and allocates nothing.
	types atomic.Pointer[map[string]*typeMetrics]
	mu    sync.Mutex // serializes writers of types and names
	// names are the type labels of key segments whose resource has a
	// group ("leases" is "leases.coordination.k8s.io"); other segments
	// are their own label.
	names map[string]string
}

// typeMetrics are the label children of one type (resource), made on
// first use: a series appears once it has something to count, as kube's.
type typeMetrics struct {
	m    *metrics
	name string
	ops  [numOps]struct {
		once     sync.Once
		latency  prometheus.Observer
		requests prometheus.Counter
	}
	listOnce                                            sync.Once
	listTotal, listFetched, listEvaluated, listReturned prometheus.Counter
	bookmarkOnce                                        sync.Once
	bookmarks                                           prometheus.Gauge
	eventOnce                                           sync.Once
	eventsReceived                                      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	byResource := []string{"resource"}
	m := &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcd_request_duration_seconds",
			Help:    "[ALPHA] Etcd request latency in seconds for each operation and object type.",
			Buckets: etcdLatencyBuckets,
		}, []string{"operation", "type"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_requests_total",
			Help: "[ALPHA] Etcd request counts for each operation and object type.",
		}, []string{"operation", "type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_request_errors_total",
			Help: "[ALPHA] Etcd failed request counts for each operation and object type.",
		}, []string{"operation", "type"}),
		bookmarks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcd_bookmark_counts",
			Help: "[ALPHA] Number of etcd bookmarks (progress notify events) split by kind.",
		}, byResource),
		eventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_events_received_total",
			Help: "[ALPHA] Number of etcd events received split by kind.",
		}, byResource),
		listTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_list_total",
			Help: "[ALPHA] Number of LIST requests served from storage",
		}, byResource),
		listFetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_list_fetched_objects_total",
			Help: "[ALPHA] Number of objects read from storage in the course of serving a LIST request",
		}, byResource),
		listEvaluated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_list_evaluated_objects_total",
			Help: "[ALPHA] Number of objects tested in the course of serving a LIST request from storage",
		}, byResource),
		listReturned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_list_returned_objects_total",
			Help: "[ALPHA] Number of objects returned for a LIST request from storage",
		}, byResource),
		leaseObjects: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "etcd_lease_object_counts",
			Help:    "[ALPHA] Number of objects attached to a single etcd lease.",
			Buckets: []float64{10, 50, 100, 500, 1000, 2500, 5000},
		}),
		names: map[string]string{},
	}
	m.types.Store(&map[string]*typeMetrics{})
	reg.MustRegister(m.latency, m.requests, m.errors, m.bookmarks, m.eventsReceived,
		m.listTotal, m.listFetched, m.listEvaluated, m.listReturned, m.leaseObjects)
	return m
}

// segment is the first segment of a key or prefix: "pods" of "/pods/ns/p".
// It shares key's memory.
func segment(key string) string {
	key = strings.TrimPrefix(key, "/")
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// typeOf returns the label children of the type key belongs to.
func (m *metrics) typeOf(key string) *typeMetrics {
	seg := segment(key)
	if tm := (*m.types.Load())[seg]; tm != nil {
		return tm
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if tm := (*m.types.Load())[seg]; tm != nil {
		return tm
	}
	seg = strings.Clone(seg) // not the whole key's memory
	name := m.names[seg]
	if name == "" {
		name = seg
	}
	return m.addLocked(seg, name)
}

// addLocked installs (or replaces) the children of segment seg, labelled
// name. m.mu is held.
func (m *metrics) addLocked(seg, name string) *typeMetrics {
	old := *m.types.Load()
	types := make(map[string]*typeMetrics, len(old)+1)
	for k, v := range old {
		types[k] = v
	}
	tm := &typeMetrics{m: m, name: name}
	types[seg] = tm
	m.types.Store(&types)
	return tm
}

// setName labels the keys under "/"+seg+"/" with name (kube's group
// resource, "leases.coordination.k8s.io").
func (m *metrics) setName(seg, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names[seg] = name
	if tm := (*m.types.Load())[seg]; tm == nil || tm.name != name {
		m.addLocked(seg, name)
	}
}

// record counts one etcd request of o on key, which took since start and
// failed with err (nil on success; "not found" and lost compare-and-swaps
// are answers, not errors).
func (m *metrics) record(o op, key string, start time.Duration, err error) {
	if m == nil {
		return
	}
	m.typeOf(key).record(o, start, err)
}

func (tm *typeMetrics) record(o op, start time.Duration, err error) {
	c := &tm.ops[o]
	c.once.Do(func() {
		c.latency = tm.m.latency.WithLabelValues(opNames[o], tm.name)
		c.requests = tm.m.requests.WithLabelValues(opNames[o], tm.name)
	})
	c.latency.Observe((monotonic() - start).Seconds())
	c.requests.Inc()
	if err != nil {
		// Rare: the child is looked up each time rather than kept.
		tm.m.errors.WithLabelValues(opNames[o], tm.name).Inc()
	}
}

// recordList counts one LIST served from etcd: fetched objects read,
// evaluated of them tested against the selector, returned in the answer.
func (m *metrics) recordList(prefix string, fetched, evaluated, returned int) {
	if m == nil {
		return
	}
	tm := m.typeOf(prefix)
	tm.listOnce.Do(func() {
		tm.listTotal = m.listTotal.WithLabelValues(tm.name)
		tm.listFetched = m.listFetched.WithLabelValues(tm.name)
		tm.listEvaluated = m.listEvaluated.WithLabelValues(tm.name)
		tm.listReturned = m.listReturned.WithLabelValues(tm.name)
	})
	tm.listTotal.Inc()
	tm.listFetched.Add(float64(fetched))
	tm.listEvaluated.Add(float64(evaluated))
	tm.listReturned.Add(float64(returned))
}

// bookmark counts a progress notification on a watch of tm's type.
func (tm *typeMetrics) bookmark() {
	if tm == nil {
		return
	}
	tm.bookmarkOnce.Do(func() { tm.bookmarks = tm.m.bookmarks.WithLabelValues(tm.name) })
	tm.bookmarks.Inc()
}

// events counts n events received on a watch of tm's type.
func (tm *typeMetrics) events(n int) {
	if tm == nil || n == 0 {
		return
	}
	tm.eventOnce.Do(func() { tm.eventsReceived = tm.m.eventsReceived.WithLabelValues(tm.name) })
	tm.eventsReceived.Add(float64(n))
}

// watchType is typeOf for a watch (nil without metrics).
func (m *metrics) watchType(prefix string) *typeMetrics {
	if m == nil {
		return nil
	}
	return m.typeOf(prefix)
}

// sizeCollector serves apiserver_storage_size_bytes: etcd's database size
// from the status of one of the client's endpoints (picked at random, as
// kube), asked at most once per storageSizeInterval. One etcd cluster,
// so one series, "etcd-0", as kube names its first storage backend.
type sizeCollector struct {
	client *clientv3.Client

	mu      sync.Mutex // held across the status request: one at a time
	checked time.Time
	size    int64
	ok      bool
}

func (c *sizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- storageSizeDesc }

// Collect reports the size, or nothing when etcd did not answer (as kube:
// a failed status leaves the series out rather than report a wrong 0).
func (c *sizeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= storageSizeInterval {
		c.checked = time.Now()
		c.size, c.ok = c.status()
	}
	if c.ok {
		ch <- prometheus.MustNewConstMetric(storageSizeDesc, prometheus.GaugeValue, float64(c.size), "etcd-0")
	}
}

// status asks one endpoint for the database's allocated size.
func (c *sizeCollector) status() (int64, bool) {
	endpoints := c.client.Endpoints()
	if len(endpoints) == 0 {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storageSizeTimeout)
	defer cancel()
	resp, err := c.client.Status(ctx, endpoints[rand.IntN(len(endpoints))])
	if err != nil {
		return 0, false
	}
	return resp.DbSize, true
}

// epoch is the origin of monotonic(): a time with a monotonic reading.
var epoch = time.Now()

// monotonic is the time since epoch. It reads only the monotonic clock:
// time.Now also reads the wall clock, which costs ~5× more (~300 ns on
// the benchmark machine) and a request's duration has no use for it.
func monotonic() time.Duration { return time.Since(epoch) }

// now is the start of a request to be recorded: zero without metrics,
// which spares the clock read.
func (m *metrics) now() time.Duration {
	if m == nil {
		return 0
	}
	return monotonic()
}
