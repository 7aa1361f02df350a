package watch

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Metrics are the watch caches' metrics under kube-apiserver's names
// (its cacher's, k8s.io/apiserver/pkg/storage/cacher/metrics, and the
// watch events of its endpoints): one Metrics per server, shared by its
// caches, each of which makes its label children once (Config.Metrics),
// so that counting an event is an atomic add, not a label lookup.
type Metrics struct {
	eventsDispatched *prometheus.CounterVec
	eventsReceived   *prometheus.CounterVec
	initializations  *prometheus.CounterVec
	initEvents       *prometheus.CounterVec
	terminated       *prometheus.CounterVec
	readWait         *prometheus.HistogramVec
	listTotal        *prometheus.CounterVec
	listFetched      *prometheus.CounterVec
	listReturned     *prometheus.CounterVec
	watchEvents      *prometheus.CounterVec
	watchEventSizes  *prometheus.HistogramVec
	consistentReads  *prometheus.CounterVec
}

// readWaitBuckets are kube's for apiserver_watch_cache_read_wait_seconds.
var readWaitBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3}

// watchEventSizeBuckets are kube's for apiserver_watch_events_sizes:
// 1 KiB to 128 KiB, doubling.
var watchEventSizeBuckets = prometheus.ExponentialBuckets(1024, 2, 8)

// NewMetrics registers the watch caches' metrics in reg; nil reg means
// no metrics (a nil *Metrics, which caches accept).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	byResource := []string{"resource"}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gvk := []string{"group", "version", "kind"}
	m := &Metrics{
		eventsDispatched: counter("apiserver_watch_cache_events_dispatched_total",
			"[ALPHA] Counter of events dispatched in watch cache broken by resource type.", byResource),
		eventsReceived: counter("apiserver_watch_cache_events_received_total",
			"[ALPHA] Counter of events received in watch cache broken by resource type.", byResource),
		initializations: counter("apiserver_watch_cache_initializations_total",
			"[ALPHA] Counter of watch cache initializations broken by resource type.", byResource),
		initEvents: counter("apiserver_init_events_total",
			"[ALPHA] Counter of init events processed in watch cache broken by resource type.", byResource),
		terminated: counter("apiserver_terminated_watchers_total",
			"[ALPHA] Counter of watchers closed due to unresponsiveness broken by resource type.", byResource),
		readWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_watch_cache_read_wait_seconds",
			Help:    "[ALPHA] Histogram of time spent waiting for a watch cache to become fresh.",
			Buckets: readWaitBuckets,
		}, byResource),
		listTotal: counter("apiserver_cache_list_total",
			"[ALPHA] Number of LIST requests served from watch cache", []string{"resource_prefix", "index"}),
		listFetched: counter("apiserver_cache_list_fetched_objects_total",
			"[ALPHA] Number of objects read from watch cache in the course of serving a LIST request", []string{"resource_prefix", "index"}),
		listReturned: counter("apiserver_cache_list_returned_objects_total",
			"[ALPHA] Number of objects returned for a LIST request from watch cache", []string{"resource_prefix"}),
		watchEvents: counter("apiserver_watch_events_total",
			"[ALPHA] Number of events sent in watch clients", gvk),
		watchEventSizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_watch_events_sizes",
			Help:    "[ALPHA] Watch event size distribution in bytes",
			Buckets: watchEventSizeBuckets,
		}, gvk),
		// kube labels it "resource" but puts the key prefix in it.
		consistentReads: counter("apiserver_watch_cache_consistent_read_total",
			"[ALPHA] Counter for consistent reads from cache.", []string{"resource", "success", "fallback"}),
	}
	reg.MustRegister(m.eventsDispatched, m.eventsReceived, m.initializations, m.initEvents, m.terminated,
		m.readWait, m.listTotal, m.listFetched, m.listReturned, m.watchEvents, m.watchEventSizes, m.consistentReads)
	return m
}

// cacheMetrics are one cache's label children. A nil *cacheMetrics (a
// cache without Metrics) records nothing.
type cacheMetrics struct {
	eventsDispatched prometheus.Counter
	eventsReceived   prometheus.Counter
	initializations  prometheus.Counter
	initEvents       prometheus.Counter
	terminated       prometheus.Counter
	readWait         prometheus.Observer
	listTotal        prometheus.Counter
	listFetched      prometheus.Counter
	listReturned     prometheus.Counter
	watchEvents      prometheus.Counter
	watchEventSizes  prometheus.Observer
	// consistentReads counts the consistent LISTs served; failed ones
	// (rare) are looked up in the vector when they happen.
	consistentReads *prometheus.CounterVec
	consistentOK    prometheus.Counter
	resourcePrefix  string
}

// forCache makes the children of one cache: resource is kube's group
// resource ("pods", "leases.coordination.k8s.io"), prefix the cache's key
// prefix, kind the kind its watchers are sent.
func (m *Metrics) forCache(resource, prefix string, kind schema.GroupVersionKind) *cacheMetrics {
	if m == nil {
		return nil
	}
	// kube's resource_prefix is the resource's key prefix without the
	// trailing slash ("/pods"); the cache lists without an index.
	resourcePrefix := strings.TrimSuffix(prefix, "/")
	const noIndex = ""
	return &cacheMetrics{
		eventsDispatched: m.eventsDispatched.WithLabelValues(resource),
		eventsReceived:   m.eventsReceived.WithLabelValues(resource),
		initializations:  m.initializations.WithLabelValues(resource),
		initEvents:       m.initEvents.WithLabelValues(resource),
		terminated:       m.terminated.WithLabelValues(resource),
		readWait:         m.readWait.WithLabelValues(resource),
		listTotal:        m.listTotal.WithLabelValues(resourcePrefix, noIndex),
		listFetched:      m.listFetched.WithLabelValues(resourcePrefix, noIndex),
		listReturned:     m.listReturned.WithLabelValues(resourcePrefix),
		watchEvents:      m.watchEvents.WithLabelValues(kind.Group, kind.Version, kind.Kind),
		watchEventSizes:  m.watchEventSizes.WithLabelValues(kind.Group, kind.Version, kind.Kind),
		consistentReads:  m.consistentReads,
		consistentOK:     m.consistentReads.WithLabelValues(resourcePrefix, "true", "false"),
		resourcePrefix:   resourcePrefix,
	}
}

// consistentRead counts a consistent LIST the cache served (err nil) or
// failed; the cache never falls back to etcd for one.
func (cm *cacheMetrics) consistentRead(err error) {
	switch {
	case cm == nil:
	case err == nil:
		cm.consistentOK.Inc()
	default:
		cm.consistentReads.WithLabelValues(cm.resourcePrefix, "false", "false").Inc()
	}
}

// received counts a change the cache took from etcd, which it also
// dispatches (kube counts both).
func (cm *cacheMetrics) received() {
	if cm == nil {
		return
	}
	cm.eventsReceived.Inc()
	cm.eventsDispatched.Inc()
}

// progressed counts a progress notification that moved the cache's
// revision: kube's cache dispatches it as a bookmark of its own.
func (cm *cacheMetrics) progressed() {
	if cm != nil {
		cm.eventsDispatched.Inc()
	}
}

func (cm *cacheMetrics) initialized() {
	if cm != nil {
		cm.initializations.Inc()
	}
}

func (cm *cacheMetrics) initialEvents(n int) {
	if cm != nil && n > 0 {
		cm.initEvents.Add(float64(n))
	}
}

func (cm *cacheMetrics) terminatedWatcher() {
	if cm != nil {
		cm.terminated.Inc()
	}
}

// waited records how long a read waited for the cache to reach the
// revision it asked for (reads at any revision do not wait, and are not
// recorded, as kube's).
func (cm *cacheMetrics) waited(start time.Duration) {
	if cm != nil {
		cm.readWait.Observe((monotonic() - start).Seconds())
	}
}

// epoch is the origin of monotonic(): a time with a monotonic reading.
var epoch = time.Now()

// monotonic is the time since epoch, read from the monotonic clock only
// (time.Now reads the wall clock too, several times the cost).
func monotonic() time.Duration { return time.Since(epoch) }

// now is monotonic(), or zero without metrics.
func (cm *cacheMetrics) now() time.Duration {
	if cm == nil {
		return 0
	}
	return monotonic()
}

// RecordList counts one LIST served from the cache: fetched objects read
// under its prefix, returned in the answer (after selectors and limit).
func (c *Cache) RecordList(fetched, returned int) {
	if cm := c.metrics; cm != nil {
		cm.listTotal.Inc()
		cm.listFetched.Add(float64(fetched))
		cm.listReturned.Add(float64(returned))
	}
}

// RecordSent counts one event sent to a watch client, whose object's
// encoding (made for this watcher) is size bytes:
// apiserver_watch_events_total and apiserver_watch_events_sizes. The
// watch handler calls it per event per watcher: two atomic adds, no
// allocation.
func (c *Cache) RecordSent(size int) {
	if cm := c.metrics; cm != nil {
		cm.watchEvents.Inc()
		cm.watchEventSizes.Observe(float64(size))
	}
}

// RecordSentShared counts one dispatched event sent to a watch client
// with the cache's encoding of its object (JSON, or protobuf), size
// bytes, which every watcher of the event shares. Its size is observed
// once per object, encoding and event type, not per watcher, as kube
// observes it when it encodes a dispatched event, whose encoding its
// watchers then share. The count is per watcher, as kube's.
func (c *Cache) RecordSentShared(obj *Object, typ EventType, protobuf bool, size int) {
	cm := c.metrics
	if cm == nil {
		return
	}
	cm.watchEvents.Inc()
	bit := uint32(1) << sizeBit(typ, protobuf)
	// A load first: after the first watcher, the word is only read, so
	// the watchers of one event do not contend for its cache line.
	if obj.sizesObserved.Load()&bit == 0 && obj.sizesObserved.Or(bit)&bit == 0 {
		cm.watchEventSizes.Observe(float64(size))
	}
}

// sizeBit numbers an encoding and event type for Object.sizesObserved.
func sizeBit(typ EventType, protobuf bool) uint {
	var n uint
	switch typ {
	case Modified:
		n = 1
	case Deleted:
		n = 2
	case Bookmark:
		n = 3
	}
	if protobuf {
		n += 4
	}
	return n
}
