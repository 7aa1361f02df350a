package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/handlers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/version"
)

// Version is the Kubernetes version corekube serves, with its own suffix.
var Version = version.Info{
	Major:        "1",
	Minor:        "32",
	GitVersion:   "v1.32.3-corekube",
	GitCommit:    "unknown",
	GitTreeState: "clean",
	BuildDate:    "1970-01-01T00:00:00Z",
	GoVersion:    runtime.Version(),
	Compiler:     runtime.Compiler,
	Platform:     runtime.GOOS + "/" + runtime.GOARCH,
}

// healthCheck is one named check of /healthz, /livez or /readyz.
type healthCheck struct {
	name  string
	check func(ctx context.Context) error
}

// healthHandler answers "ok", or the verbose per-check report kube gives
// with ?verbose; a failing check makes it a 500 with the report. Checks
// named by ?exclude= (repeatable) are skipped as kube skips them, and the
// names that match no check are listed in a warning line. Each check run
// is recorded in slis (nil: not recorded).
func healthHandler(kind string, checks []healthCheck, slis *healthSLIs) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		ctx = context.WithValue(ctx, reportMemoKey{}, &reportMemo{})
		query := r.URL.Query()
		excluded := map[string]bool{}
		for _, name := range query["exclude"] {
			excluded[name] = true
		}
		var report strings.Builder
		failed := false
		for _, c := range checks {
			if excluded[c.name] {
				delete(excluded, c.name)
				fmt.Fprintf(&report, "[+]%s excluded: ok\n", c.name)
				continue
			}
			err := c.check(ctx)
			slis.observe(c.name, kind, err == nil)
			if err != nil {
				failed = true
				// The reason stays out of this public report, as in kube;
				// /<kind>/<check> (which needs authorization) tells it.
				fmt.Fprintf(&report, "[-]%s failed: reason withheld\n", c.name)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", c.name)
			}
		}
		if len(excluded) > 0 {
			names := make([]string, 0, len(excluded))
			for name := range excluded {
				names = append(names, strconv.Quote(name))
			}
			slices.Sort(names)
			fmt.Fprintf(&report, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		healthHeaders(w)
		_, verbose := query["verbose"]
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", report.String(), kind)
		case verbose:
			fmt.Fprintf(w, "%s%s check passed\n", report.String(), kind)
		default:
			fmt.Fprint(w, "ok")
		}
	}
}

// checkHandler serves one check alone (/readyz/etcd): "ok", or a 500
// that says why, as kube's per-check paths.
func checkHandler(c healthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		healthHeaders(w)
		if err := c.check(ctx); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "internal server error: %v\n", err)
			return
		}
		fmt.Fprint(w, "ok")
	}
}

func healthHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache, private")
}

// healthRoutes serves /<kind> with checks and /<kind>/<check> for each.
func healthRoutes(r interface {
	Get(pattern string, h http.HandlerFunc)
}, kind string, checks []healthCheck, slis *healthSLIs) {
	r.Get("/"+kind, healthHandler(kind, checks, slis))
	for _, c := range checks {
		r.Get("/"+kind+"/"+c.name, checkHandler(c))
	}
}

// cachesReady fails while a resource's watch cache is not serving (its
// first list, or a relist after etcd was lost).
func cachesReady(api *handlers.API) error {
	var waiting []string
	for _, r := range api.Resources() {
		if r.Store != nil && !r.Store.CacheReady() {
			waiting = append(waiting, r.Store.Info().GroupResource().String())
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("watch caches not ready: %s", strings.Join(waiting, ", "))
	}
	return nil
}

// etcdCheckTimeout and etcdReadinessTimeout bound the etcd and
// etcd-readiness checks' read: kube's --etcd-healthcheck-timeout and
// --etcd-readycheck-timeout defaults (storage's own bound is 2 s too).
const (
	etcdCheckTimeout     = 2 * time.Second
	etcdReadinessTimeout = 2 * time.Second
)

// etcdProbe is the read of etcd behind the etcd and etcd-readiness checks.
// Within one report both checks share one read (kube's two checks read
// apart): a dead etcd fails /readyz within one timeout (2 s), not one per
// check. Each request reads afresh: no result outlives its report.
type etcdProbe struct {
	healthy func(context.Context) error
}

// check reads etcd, bounded by timeout, unless ctx's report has read it
// already.
func (p *etcdProbe) check(ctx context.Context, timeout time.Duration) error {
	memo, _ := ctx.Value(reportMemoKey{}).(*reportMemo)
	if memo != nil && memo.etcdRead {
		return memo.etcdErr
	}
	readCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := p.healthy(readCtx)
	if memo != nil {
		memo.etcdRead, memo.etcdErr = true, err
	}
	return err
}

// reportMemo is what the checks of one /readyz, /livez or /healthz report
// share; they run one after the other.
type reportMemo struct {
	etcdRead bool
	etcdErr  error
}

type reportMemoKey struct{}

// logBlockedAfter is how long a log write may stay unfinished before the
// log check fails (kube's: two minutes without a completed flush).
const logBlockedAfter = 2 * time.Minute

// logWatch follows the server's log writes for kube's log check: the log
// is blocked when a write has been under way for logBlockedAfter with none
// finishing meanwhile (a full pipe, a stuck terminal). Each record costs
// two atomic adds and a clock read (two when the log was idle).
type logWatch struct {
	// now is the clock (nil: time.Now), set by tests.
	now     func() time.Time
	writing atomic.Int64
	// progress is the last time (UnixNano) a write finished, or one
	// started while none was under way.
	progress atomic.Int64
}

// wrap returns h reporting its writes to w.
func (w *logWatch) wrap(h slog.Handler) slog.Handler { return watchedHandler{inner: h, w: w} }

// check is the log health check.
func (w *logWatch) check(context.Context) error {
	if w.writing.Load() > 0 && w.clock().Sub(time.Unix(0, w.progress.Load())) > logBlockedAfter {
		return errors.New("logging blocked")
	}
	return nil
}

func (w *logWatch) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

type watchedHandler struct {
	inner slog.Handler
	w     *logWatch
}

func (h watchedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h watchedHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.w.writing.Add(1) == 1 {
		h.w.progress.Store(h.w.clock().UnixNano())
	}
	err := h.inner.Handle(ctx, r)
	h.w.progress.Store(h.w.clock().UnixNano())
	h.w.writing.Add(-1)
	return err
}

func (h watchedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return watchedHandler{inner: h.inner.WithAttrs(attrs), w: h.w}
}

func (h watchedHandler) WithGroup(name string) slog.Handler {
	return watchedHandler{inner: h.inner.WithGroup(name), w: h.w}
}

// Post-start hooks: kube's names for the start-up work corekube does too,
// in the order kube-apiserver v1.32's /readyz lists them. kube runs them
// once it serves; corekube does this work in Start, before it serves, so
// each is finished by the time anyone can ask, but a hook reports only
// what its work did: "not finished" until the step that does it is done.
const (
	hookAdmissionInitializer   = "start-apiserver-admission-initializer"
	hookStartInformers         = "generic-apiserver-start-informers"
	hookAPFConfigConsumer      = "priority-and-fairness-config-consumer"
	hookAPFFilter              = "priority-and-fairness-filter"
	hookSystemNamespaces       = "start-system-namespaces-controller"
	hookIdentityLease          = "start-kube-apiserver-identity-lease-controller"
	hookIdentityLeaseCollector = "start-kube-apiserver-identity-lease-garbage-collector"
	hookBootstrapRoles         = "rbac/bootstrap-roles"
	// ensureSystemPriorityClasses (priorityclasses.go).
	hookBootstrapPriorityClasses = "scheduling/bootstrap-system-priority-classes"
	hookAPFConfigProducer        = "priority-and-fairness-config-producer"
	hookBootstrapController      = "bootstrap-controller"
)

// postStartHookOrder is kube's order of the hooks above.
var postStartHookOrder = []string{
	hookAdmissionInitializer, hookStartInformers, hookAPFConfigConsumer, hookAPFFilter,
	hookSystemNamespaces, hookIdentityLease, hookIdentityLeaseCollector, hookBootstrapRoles,
	hookBootstrapPriorityClasses, hookAPFConfigProducer, hookBootstrapController,
}

// postStartHooks are the hooks' states: a channel each, closed when its
// work is done.
type postStartHooks map[string]chan struct{}

func newPostStartHooks(names []string) postStartHooks {
	h := postStartHooks{}
	for _, name := range names {
		h[name] = make(chan struct{})
	}
	return h
}

// finished marks the hooks done (once each).
func (h postStartHooks) finished(names ...string) {
	for _, name := range names {
		select {
		case <-h[name]:
		default:
			close(h[name])
		}
	}
}

// checks are the hooks' health checks, named poststarthook/<name> as in
// kube, in order.
func (h postStartHooks) checks(order []string) []healthCheck {
	out := make([]healthCheck, 0, len(order))
	for _, name := range order {
		done := h[name]
		out = append(out, healthCheck{name: "poststarthook/" + name, check: func(context.Context) error {
			select {
			case <-done:
				return nil
			default:
				return errHookNotFinished
			}
		}})
	}
	return out
}

// errHookNotFinished is kube's reason for a hook still running.
var errHookNotFinished = errors.New("not finished")

// healthSLIs are kube's component SLI metrics of the health checks
// (kubernetes_healthcheck, kubernetes_healthchecks_total), served at
// /metrics/slis from a registry of their own, as kube serves them.
type healthSLIs struct {
	registry *prometheus.Registry
	result   *prometheus.GaugeVec
	total    *prometheus.CounterVec
}

func newHealthSLIs() *healthSLIs {
	h := &healthSLIs{
		registry: prometheus.NewRegistry(),
		result: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubernetes_healthcheck",
			Help: "[STABLE] This metric records the result of a single healthcheck.",
		}, []string{"name", "type"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubernetes_healthchecks_total",
			Help: "[STABLE] This metric records the results of all healthcheck.",
		}, []string{"name", "type", "status"}),
	}
	h.registry.MustRegister(h.result, h.total)
	return h
}

// observe records one run of check name of /<kind> (a probe every few
// seconds: the children are looked up each time).
func (h *healthSLIs) observe(name, kind string, ok bool) {
	if h == nil {
		return
	}
	value, status := 0.0, "error"
	if ok {
		value, status = 1, "success"
	}
	h.result.WithLabelValues(name, kind).Set(value)
	h.total.WithLabelValues(name, kind, status).Inc()
}

// handler serves the SLI metrics.
func (h *healthSLIs) handler() http.Handler {
	return promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{})
}
