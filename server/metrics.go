package server

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/corekube/corekube/handlers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the registry /metrics serves: the server's, and in `up`
// every in-process component's.
func (s *Server) Metrics() *prometheus.Registry { return s.metrics }

// setupMetrics takes the configured registry (or makes one) and registers
// what every kube component exports: Go's runtime and the process's
// collectors, under their usual go_* and process_* names.
func (s *Server) setupMetrics() error {
	s.metrics = s.cfg.Metrics
	if s.metrics == nil {
		s.metrics = prometheus.NewRegistry()
	}
	s.requests = newRequestMetrics()
	s.requestLogLevel = slog.LevelDebug
	if s.cfg.Verbosity >= requestLogVerbosity {
		s.requestLogLevel = slog.LevelInfo
	}
	for _, c := range []prometheus.Collector{
		s.requests,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.metrics.Register(c); err != nil {
			return fmt.Errorf("register the request, Go and process metrics: %w", err)
		}
	}
	var err error
	s.authMetrics, err = newAuthMetrics(s.metrics)
	return err
}

// metricsHandler serves the registry in the Prometheus exposition formats
// after registering the collectors that read the server's parts at each
// scrape (watch caches, audit, API Priority and Fairness).
func (s *Server) metricsHandler(api *handlers.API) http.Handler {
	s.metrics.MustRegister(cacheCollector{api})
	if s.audit != nil {
		s.metrics.MustRegister(s.audit.backend)
	}
	if s.apf != nil {
		s.metrics.MustRegister(s.apf.ctl)
	}
	return promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}})
}

// slogPrinter sends promhttp's gathering errors to the server's log.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Error("gather metrics", "err", fmt.Sprint(v...)) }

// nameStorageMetrics labels the etcd metrics of each resource's keys
// with kube's group resource ("leases.coordination.k8s.io"), before the
// first request under them.
func (s *Server) nameStorageMetrics(api *handlers.API) {
	if s.etcd == nil {
		return // Config.Storage: no etcd metrics
	}
	for _, res := range api.Resources() {
		info := res.Store.Info()
		s.etcd.SetMetricsName(info.Resource, info.GroupResource().String())
	}
}

// cacheCollector reads the watch caches' gauges at each scrape, which
// costs the hot paths nothing: kube's objects per resource (it counts
// them in etcd once a minute; the cache has the count at hand), the
// cache's revision and capacity, and the open watchers.
type cacheCollector struct{ api *handlers.API }

var (
	storageObjectsDesc = prometheus.NewDesc("apiserver_storage_objects",
		"[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
		[]string{"resource"}, nil)
	cacheRevisionDesc = prometheus.NewDesc("apiserver_watch_cache_resource_version",
		"[ALPHA] Current resource version of watch cache broken by resource type.", []string{"resource"}, nil)
	cacheCapacityDesc = prometheus.NewDesc("watch_cache_capacity",
		"[ALPHA] Total capacity of watch cache broken by resource type.", []string{"resource"}, nil)
	// apiserver_registered_watchers left kube in 1.25 (for
	// apiserver_longrunning_requests{verb="WATCH"}); it is served as kube
	// served it until then, for the dashboards that still read it.
	registeredWatchersDesc = prometheus.NewDesc("apiserver_registered_watchers",
		"[ALPHA] Number of currently registered watchers for a given resources", []string{"group", "version", "kind"}, nil)
)

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storageObjectsDesc
	ch <- cacheRevisionDesc
	ch <- cacheCapacityDesc
	ch <- registeredWatchersDesc
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for _, res := range c.api.Resources() {
		info, stats := res.Store.Info(), res.Store.CacheStats()
		resource := info.GroupResource().String()
		// A cache that is (re)listing has no count to give: kube's -1
		// for a count it could not fetch.
		objects := float64(stats.Objects)
		if !res.Store.CacheReady() {
			objects = -1
		}
		ch <- prometheus.MustNewConstMetric(storageObjectsDesc, prometheus.GaugeValue, objects, resource)
		if res.Store.WatchCacheDisabled() {
			// kube has no watch cache series for such a resource; its
			// object count comes from etcd (counted every minute).
			continue
		}
		ch <- prometheus.MustNewConstMetric(cacheRevisionDesc, prometheus.GaugeValue, float64(stats.Revision), resource)
		ch <- prometheus.MustNewConstMetric(cacheCapacityDesc, prometheus.GaugeValue, float64(stats.Capacity), resource)
		ch <- prometheus.MustNewConstMetric(registeredWatchersDesc, prometheus.GaugeValue, float64(stats.Watchers),
			info.Group, info.Version, info.Kind)
	}
}
