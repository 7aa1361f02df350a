package server

import (
	"bufio"
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/server/audit"
	"github.com/corekube/corekube/storage/trace"
	"github.com/prometheus/client_golang/prometheus"
)

// This file is what kube-apiserver's endpoints/metrics package, its
// inflight watermarks and its httplog do for every request: one recording
// ResponseWriter installed first (withRequestInfo), the request metrics
// counted from it when the request ends, and one log line per request
// (slow ones with their trace).

// requestLogVerbosity is kube's -v from which every request's line is
// logged at info level (kube's httplog logs at V(3)); below it the lines
// are logged at debug level.
const requestLogVerbosity = 3

// The request metrics' descriptions: kube's names, HELP texts (with the
// stability prefix component-base prints), labels and buckets.
var (
	requestLabels  = []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}
	latencyLabels  = []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}
	sliLabels      = []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}
	durationBucket = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}
	sliBuckets     = []float64{0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}
	sizeBuckets    = prometheus.ExponentialBuckets(1000, 10, 7)
)

// requestMetrics are one server's request metrics.
type requestMetrics struct {
	total        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	sli          *prometheus.HistogramVec
	sizes        *prometheus.HistogramVec
	longRunning  *prometheus.GaugeVec
	terminations *prometheus.CounterVec
	aborts       *prometheus.CounterVec
	inflight     *prometheus.GaugeVec

	// series caches the children of one label set: WithLabelValues
	// hashes nine strings under a lock, a map of comparable keys is
	// cheaper on every request.
	series sync.Map // seriesKey -> *requestSeries

	// The requests executing now, and the most of each kind seen since
	// the last publication (kube publishes the watermark of each second).
	readOnly, mutating         atomic.Int64
	readOnlyMark, mutatingMark atomic.Int64
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, requestLabels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: durationBucket,
		}, latencyLabels),
		sli: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_sli_duration_seconds",
			Help:    "[ALPHA] Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
			Buckets: sliBuckets,
		}, sliLabels),
		sizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_response_sizes",
			Help:    "[STABLE] Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
			Buckets: sizeBuckets,
		}, sliLabels),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
		}, sliLabels),
		terminations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_terminations_total",
			Help: "[ALPHA] Number of requests which apiserver terminated in self-defense.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_aborts_total",
			Help: "[ALPHA] Number of requests which apiserver aborted possibly due to a timeout, for each group, version, verb, resource, subresource and scope",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
		}, []string{"request_kind"}),
	}
}

func (m *requestMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.total, m.duration, m.sli, m.sizes, m.longRunning, m.terminations, m.aborts, m.inflight}
}

// Describe and Collect make the set one collector (registered once).
func (m *requestMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

func (m *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// maintainWatermarks publishes the inflight watermarks every second, as
// kube's watermark maintenance, until ctx ends.
func (m *requestMetrics) maintainWatermarks(ctx context.Context) {
	readOnly, mutating := m.inflight.WithLabelValues("readOnly"), m.inflight.WithLabelValues("mutating")
	readOnly.Set(0)
	mutating.Set(0)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// The next period starts from what executes now: a request
		// running through the whole second is in use all of it.
		readOnly.Set(float64(m.readOnlyMark.Swap(m.readOnly.Load())))
		mutating.Set(float64(m.mutatingMark.Swap(m.mutating.Load())))
	}
}

// executing counts a request that passed flow control and authorization
// as kube's executing-phase inflight counts (get, list and watch are
// read-only); the caller subtracts one from the count returned when the
// request ends.
func (m *requestMetrics) executing(verb string) *atomic.Int64 {
	cur, mark := &m.mutating, &m.mutatingMark
	switch verb {
	case "get", "list", "watch":
		cur, mark = &m.readOnly, &m.readOnlyMark
	}
	n := cur.Add(1)
	for {
		old := mark.Load()
		if n <= old || mark.CompareAndSwap(old, n) {
			break
		}
	}
	return cur
}

// metricLabels are a request's metric labels (but the code), as kube's
// endpoints/metrics reports them.
type metricLabels struct {
	verb, dryRun, group, version, resource, subresource, scope, component string
}

type seriesKey struct {
	metricLabels
	code int
}

// requestSeries are the children of one label set.
type requestSeries struct {
	total         prometheus.Counter
	duration, sli prometheus.Observer
	sizes         prometheus.Observer // nil: kube observes the reads' sizes only
}

func (m *requestMetrics) seriesOf(l metricLabels, code int, observeSize bool) *requestSeries {
	key := seriesKey{l, code}
	if s, ok := m.series.Load(key); ok {
		return s.(*requestSeries)
	}
	codeStr := strconv.Itoa(code)
	s := &requestSeries{
		total:    m.total.WithLabelValues(l.verb, l.dryRun, l.group, l.version, l.resource, l.subresource, l.scope, l.component, codeStr),
		duration: m.duration.WithLabelValues(l.verb, l.dryRun, l.group, l.version, l.resource, l.subresource, l.scope, l.component),
		sli:      m.sli.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component),
	}
	if observeSize {
		s.sizes = m.sizes.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component)
	}
	actual, _ := m.series.LoadOrStore(key, s)
	return actual.(*requestSeries)
}

// applyPatchType is server-side apply's content type: kube reports such
// a PATCH as APPLY.
const applyPatchType = "application/apply-patch+yaml"

// connectSubresources are the subresources kube reports as CONNECT.
func connectSubresource(s string) bool {
	switch s {
	case "log", "exec", "portforward", "attach", "proxy":
		return true
	}
	return false
}

// reportedVerb is kube's verb label: the method, GET as LIST without a
// name, WATCH, APPLY and CONNECT told apart, anything unknown "other".
func reportedVerb(r *http.Request, ri *handlers.RequestInfo, scope string) string {
	verb := r.Method
	switch verb {
	case http.MethodGet, http.MethodHead:
		verb = "GET"
		if scope != "resource" && scope != "" {
			verb = "LIST"
		}
		if ri.Verb == "watch" {
			verb = "WATCH"
		}
	case http.MethodPatch:
		if r.Header.Get("Content-Type") == applyPatchType {
			verb = "APPLY"
		}
	case http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		verb = "other"
	}
	if ri.IsResourceRequest && connectSubresource(ri.Subresource) {
		verb = "CONNECT"
	}
	return verb
}

// routeScope is the scope kube's installer gives a resource route: a
// name in the path (or a create) is "resource", a namespaced collection
// "namespace", anything else "cluster". The name of a metadata.name field
// selector does not count: the request is a list.
func routeScope(r *http.Request, ri *handlers.RequestInfo) string {
	switch {
	case !ri.IsResourceRequest:
		return ""
	case len(ri.Parts) >= 2 || r.Method == http.MethodPost:
		return "resource"
	case ri.Namespace != "":
		return "namespace"
	}
	return "cluster"
}

// dryRunLabel is kube's dry_run label: "" without the parameter, "All",
// or "invalid" for anything else.
func dryRunLabel(r *http.Request) string {
	if !strings.Contains(r.URL.RawQuery, "dryRun") {
		return ""
	}
	values := r.URL.Query()["dryRun"]
	if len(values) == 0 {
		return ""
	}
	for _, v := range values {
		if v != "All" {
			return "invalid"
		}
	}
	return "All"
}

// labelsOf are the labels of r. Non-resource requests are those kube
// instruments: the health endpoints (component "") and discovery, with the
// path as the subresource.
func labelsOf(r *http.Request, ri *handlers.RequestInfo) metricLabels {
	scope := routeScope(r, ri)
	l := metricLabels{verb: reportedVerb(r, ri, scope), scope: scope, component: "apiserver"}
	if ri.IsResourceRequest {
		l.dryRun = dryRunLabel(r)
		l.group, l.version, l.resource, l.subresource = ri.APIGroup, ri.APIVersion, ri.Resource, ri.Subresource
		return l
	}
	l.subresource = ri.Path
	if instrumentedHealth(ri.Path) {
		l.component = ""
	}
	return l
}

// instrumentedHealth reports the health endpoints kube counts (each
// endpoint, not its single checks).
func instrumentedHealth(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz":
		return true
	}
	return false
}

// instrumentedNonResource reports the non-resource paths kube counts in
// its request metrics: the health endpoints and the discovery roots.
func instrumentedNonResource(path string) bool {
	return instrumentedHealth(path) || path == "/api" || path == "/apis"
}

// recorder is the request's ResponseWriter from the first filter on: it
// records the status and the bytes written for the metrics and the log
// line, and carries the request's trace and its context node (one
// allocation for all).
type recorder struct {
	http.ResponseWriter
	code     int
	written  int64
	hijacked bool
	// completed is false when the request was aborted (a panic).
	completed bool
	trace     trace.Trace
	// longRunning is the gauge a long-running request is counted in
	// while a handler serves it.
	longRunning prometheus.Gauge
	ctx         requestContext
}

// requestContext is the request's context from the first filter on: it
// carries the RequestInfo and the trace as two context.WithValue would,
// without their allocations.
type requestContext struct {
	context.Context
	ri *handlers.RequestInfo
	tr *trace.Trace
}

func (c *requestContext) Value(key any) any {
	switch key {
	case handlers.RequestInfoContextKey:
		return c.ri
	case trace.ContextKey:
		return c.tr
	}
	return c.Context.Value(key)
}

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// Flush lets watches and log follows stream through the recorder.
func (w *recorder) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes an upgrade's hijack through; the answer is then the
// upgrade's own (101).
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) status() int {
	switch {
	case w.code != 0:
		return w.code
	case w.hijacked:
		return http.StatusSwitchingProtocols
	}
	// A handler that returned without writing: net/http answers 200.
	return http.StatusOK
}

// withRequestInfo is the first filter: it installs the recorder, starts
// the request's trace, computes the request's RequestInfo once (for
// authorization, flow control and the handlers) and, when the request
// ends, counts it in the request metrics and logs its line.
func (s *Server) withRequestInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		rec.trace.Start(time.Now())
		ri := handlers.NewRequestInfo(r)
		lr := longRunning(ri)
		if lr && s.requests != nil {
			// Counted while a handler serves it, as kube's.
			rec.trace.OnServed(func() { s.requests.longRunningStarted(rec, r, ri) })
		}
		rec.ctx = requestContext{Context: r.Context(), ri: ri, tr: &rec.trace}
		r = r.WithContext(&rec.ctx)
		defer s.requestDone(rec, r, ri, lr)
		next.ServeHTTP(rec, r)
		rec.completed = true
	})
}

// longRunningStarted counts a long-running request in
// apiserver_longrunning_requests until it ends (requestDone).
func (m *requestMetrics) longRunningStarted(rec *recorder, r *http.Request, ri *handlers.RequestInfo) {
	l := labelsOf(r, ri)
	g := m.longRunning.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component)
	g.Inc()
	rec.longRunning = g
}

// requestDone counts the request and logs it. A request that did not
// complete was aborted (http.ErrAbortHandler, the only panic the
// recoverer lets through).
func (s *Server) requestDone(rec *recorder, r *http.Request, ri *handlers.RequestInfo, lr bool) {
	aborted := !rec.completed
	elapsed := time.Since(rec.trace.StartTime())
	code := rec.status()
	if m := s.requests; m != nil {
		if rec.longRunning != nil {
			rec.longRunning.Dec()
		}
		m.count(rec, r, ri, code, elapsed, aborted)
	}
	s.logRequest(rec, r, ri, code, elapsed, lr, aborted)
}

// count records the request in the metrics kube records it in.
func (m *requestMetrics) count(rec *recorder, r *http.Request, ri *handlers.RequestInfo, code int, elapsed time.Duration, aborted bool) {
	tr := &rec.trace
	served := tr.IsServed() || (!ri.IsResourceRequest && instrumentedNonResource(ri.Path) && tr.IsAuthorized())
	if !served && !tr.IsRejected() && !tr.IsTimedOut() && !aborted {
		// Refused before a handler took it (401, 403, an unknown
		// resource's 404): kube's request metrics do not see it.
		return
	}
	l := labelsOf(r, ri)
	switch {
	case tr.IsTimedOut():
		// The timeout filter's 504, even when the handler had started
		// answering and the stream was cut.
		m.terminations.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component, "504").Inc()
	case tr.IsRejected():
		m.terminations.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component, "429").Inc()
	}
	if aborted {
		sub := l.subresource
		if !ri.IsResourceRequest {
			// kube's abort count names no path.
			sub = ""
		}
		m.aborts.WithLabelValues(l.verb, l.group, l.version, l.resource, sub, l.scope).Inc()
	}
	if !served && !tr.IsRejected() {
		return
	}
	if !served && !ri.IsResourceRequest {
		// kube's count of a dropped non-resource request has no path.
		l.subresource, l.component = "", "apiserver"
	}
	observeSize := (r.Method == http.MethodGet || r.Method == http.MethodHead) && !(ri.Verb == "watch" && !strings.Contains(r.URL.RawQuery, "watch"))
	s := m.seriesOf(l, code, observeSize)
	s.total.Inc()
	if tr.IsRejected() && !served {
		// kube counts the rejection, not its latency.
		return
	}
	s.duration.Observe(elapsed.Seconds())
	s.sli.Observe((elapsed - tr.Excluded()).Seconds())
	if s.sizes != nil {
		s.sizes.Observe(float64(rec.written))
	}
}

// logRequest logs the request's line as kube's httplog, at info level
// with -v 3 or more, else at debug level; a slow request (not
// long-running) is logged with its trace at info level whatever the
// level.
func (s *Server) logRequest(rec *recorder, r *http.Request, ri *handlers.RequestInfo, code int, elapsed time.Duration, lr, aborted bool) {
	ctx := r.Context()
	slow := !lr && elapsed > s.cfg.SlowRequestThreshold
	level := s.requestLogLevel
	if slow {
		level = slog.LevelInfo
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("verb", r.Method),
		slog.String("URI", r.RequestURI),
		slog.Duration("latency", elapsed),
		slog.String("userAgent", r.UserAgent()),
		slog.String("audit-ID", rec.Header().Get(audit.HeaderAuditID)),
		slog.String("srcIP", r.RemoteAddr),
		slog.String("user", rec.trace.User()),
		slog.Int("resp", code),
	)
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	s.log.LogAttrs(ctx, level, "HTTP", attrs...)
	if slow {
		s.log.LogAttrs(ctx, slog.LevelInfo, rec.trace.Format(rand.Uint64N(1<<32), traceName(r, ri), traceFields(rec, r, ri), elapsed))
	}
}

// traceName is the name kube's handlers give their trace.
func traceName(r *http.Request, ri *handlers.RequestInfo) string {
	if !ri.IsResourceRequest {
		return "HTTP " + r.Method
	}
	switch ri.Verb {
	case "create":
		return "Create"
	case "update":
		return "Update"
	case "patch":
		return "Patch"
	case "delete":
		return "Delete"
	case "deletecollection":
		return "Delete collection"
	case "list":
		return "List"
	case "get":
		return "Get"
	}
	return ri.Verb
}

// traceFields are the request's fields in the trace's header line, as
// kube's handlers list them.
func traceFields(rec *recorder, r *http.Request, ri *handlers.RequestInfo) string {
	var b strings.Builder
	field := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(v)
	}
	field("audit-id", rec.Header().Get(audit.HeaderAuditID))
	field("client", r.RemoteAddr)
	field("api-group", ri.APIGroup)
	field("api-version", ri.APIVersion)
	field("name", ri.Name)
	field("subresource", ri.Subresource)
	field("namespace", ri.Namespace)
	field("protocol", r.Proto)
	field("resource", ri.Resource)
	field("scope", routeScope(r, ri))
	field("url", r.URL.Path)
	field("user-agent", r.UserAgent())
	field("verb", r.Method)
	return b.String()
}
