package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/watch"
)

// metricsHandler serves the watch caches' figures in the Prometheus text
// format: enough to see watchers being closed for falling behind without
// a metrics library.
//
// extra write more metrics after those (the audit backend's).
func metricsHandler(api *handlers.API, extra ...func(io.Writer)) http.HandlerFunc {
	type metric struct {
		name, kind, help string
		value            func(s watch.Stats) float64
	}
	metrics := []metric{
		{"corekube_watch_cache_objects", "gauge", "Objects in the watch cache.", func(s watch.Stats) float64 { return float64(s.Objects) }},
		{"corekube_watch_cache_watchers", "gauge", "Open watches served by the watch cache.", func(s watch.Stats) float64 { return float64(s.Watchers) }},
		{"corekube_watch_cache_revision", "gauge", "The etcd revision the watch cache reflects.", func(s watch.Stats) float64 { return float64(s.Revision) }},
		{"corekube_watch_cache_slow_watchers_closed_total", "counter", "Watches closed because they fell too far behind.", func(s watch.Stats) float64 { return float64(s.SlowWatchersClosed) }},
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		resources := api.Resources()
		for _, m := range metrics {
			fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
			for _, res := range resources {
				info := res.Store.Info()
				fmt.Fprintf(&b, "%s{group=%q,resource=%q} %g\n", m.name, info.Group, info.Resource, m.value(res.Store.CacheStats()))
			}
		}
		for _, write := range extra {
			write(&b)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
	}
}
