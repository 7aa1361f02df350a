package server

import (
	"fmt"
	"net/http"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/watch"
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
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.metrics.Register(c); err != nil {
			return fmt.Errorf("register the Go and process metrics: %w", err)
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

// cacheCollector reads the watch caches' figures at each scrape: enough
// to see watchers being closed for falling behind.
type cacheCollector struct{ api *handlers.API }

var cacheMetrics = []struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(s watch.Stats) float64
}{
	{prometheus.NewDesc("corekube_watch_cache_objects", "Objects in the watch cache.", []string{"group", "resource"}, nil),
		prometheus.GaugeValue, func(s watch.Stats) float64 { return float64(s.Objects) }},
	{prometheus.NewDesc("corekube_watch_cache_watchers", "Open watches served by the watch cache.", []string{"group", "resource"}, nil),
		prometheus.GaugeValue, func(s watch.Stats) float64 { return float64(s.Watchers) }},
	{prometheus.NewDesc("corekube_watch_cache_revision", "The etcd revision the watch cache reflects.", []string{"group", "resource"}, nil),
		prometheus.GaugeValue, func(s watch.Stats) float64 { return float64(s.Revision) }},
	{prometheus.NewDesc("corekube_watch_cache_slow_watchers_closed_total", "Watches closed because they fell too far behind.", []string{"group", "resource"}, nil),
		prometheus.CounterValue, func(s watch.Stats) float64 { return float64(s.SlowWatchersClosed) }},
}

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range cacheMetrics {
		ch <- m.desc
	}
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for _, res := range c.api.Resources() {
		info, stats := res.Store.Info(), res.Store.CacheStats()
		for _, m := range cacheMetrics {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(stats), info.Group, info.Resource)
		}
	}
}
