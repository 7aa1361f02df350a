package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/storage/trace"
	"github.com/corekube/corekube/test/metricstest"
)

// TestRequestLabels: the verb, scope and resource labels kube's
// endpoints/metrics gives each kind of request.
func TestRequestLabels(t *testing.T) {
	for _, tc := range []struct {
		method, url, contentType string
		want                     metricLabels
	}{
		{"POST", "/api/v1/namespaces/ns/pods", "", metricLabels{verb: "POST", version: "v1", resource: "pods", scope: "resource", component: "apiserver"}},
		{"POST", "/api/v1/namespaces/ns/pods?dryRun=All", "", metricLabels{verb: "POST", dryRun: "All", version: "v1", resource: "pods", scope: "resource", component: "apiserver"}},
		{"POST", "/api/v1/namespaces/ns/pods?dryRun=Some", "", metricLabels{verb: "POST", dryRun: "invalid", version: "v1", resource: "pods", scope: "resource", component: "apiserver"}},
		{"GET", "/api/v1/namespaces/ns/pods/p", "", metricLabels{verb: "GET", version: "v1", resource: "pods", scope: "resource", component: "apiserver"}},
		{"HEAD", "/api/v1/namespaces/ns/pods/p", "", metricLabels{verb: "GET", version: "v1", resource: "pods", scope: "resource", component: "apiserver"}},
		{"GET", "/api/v1/namespaces/ns/pods", "", metricLabels{verb: "LIST", version: "v1", resource: "pods", scope: "namespace", component: "apiserver"}},
		// One name by field selector is still the list route.
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp", "", metricLabels{verb: "LIST", version: "v1", resource: "pods", scope: "namespace", component: "apiserver"}},
		{"GET", "/api/v1/pods", "", metricLabels{verb: "LIST", version: "v1", resource: "pods", scope: "cluster", component: "apiserver"}},
		{"GET", "/api/v1/nodes", "", metricLabels{verb: "LIST", version: "v1", resource: "nodes", scope: "cluster", component: "apiserver"}},
		{"GET", "/api/v1/namespaces/ns", "", metricLabels{verb: "GET", version: "v1", resource: "namespaces", scope: "resource", component: "apiserver"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", "", metricLabels{verb: "WATCH", version: "v1", resource: "pods", scope: "namespace", component: "apiserver"}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", "", metricLabels{verb: "WATCH", version: "v1", resource: "pods", scope: "namespace", component: "apiserver"}},
		{"GET", "/api/v1/namespaces/ns/pods/p/log?follow=true", "", metricLabels{verb: "CONNECT", version: "v1", resource: "pods", subresource: "log", scope: "resource", component: "apiserver"}},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", "", metricLabels{verb: "PUT", version: "v1", resource: "pods", subresource: "status", scope: "resource", component: "apiserver"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", "application/apply-patch+yaml", metricLabels{verb: "APPLY", group: "apps", version: "v1", resource: "deployments", scope: "resource", component: "apiserver"}},
		{"PATCH", "/api/v1/namespaces/ns/pods/p", "application/merge-patch+json", metricLabels{verb: "PATCH", version: "v1", resource: "pods", scope: "resource", component: "apiserver"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", "", metricLabels{verb: "DELETE", version: "v1", resource: "pods", scope: "namespace", component: "apiserver"}},
		{"OPTIONS", "/api/v1/namespaces/ns/pods", "", metricLabels{verb: "other", version: "v1", resource: "pods", scope: "namespace", component: "apiserver"}},
		{"GET", "/readyz", "", metricLabels{verb: "GET", subresource: "/readyz"}},
		{"GET", "/apis", "", metricLabels{verb: "GET", subresource: "/apis", component: "apiserver"}},
	} {
		r := httptest.NewRequest(tc.method, tc.url, nil)
		if tc.contentType != "" {
			r.Header.Set("Content-Type", tc.contentType)
		}
		if got := labelsOf(r, handlers.NewRequestInfo(r)); got != tc.want {
			t.Errorf("%s %s: labels %+v, want %+v", tc.method, tc.url, got, tc.want)
		}
	}
}

// TestRequestMetricsExposition: kube's names, HELP texts and buckets, and
// an exposition the Prometheus parser takes.
func TestRequestMetricsExposition(t *testing.T) {
	m := newRequestMetrics()
	s := &Server{requests: m, log: quietLogger(), requestLogLevel: slog.LevelDebug, cfg: Config{SlowRequestThreshold: time.Second}}
	h := s.withRequestInfo(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trace.From(r.Context()).Served()
		_, _ = w.Write(make([]byte, 1500))
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/namespaces/ns/pods/p", nil))
	text := metricstest.Text(t, m)
	for _, want := range []string{
		"# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 1`,
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="0.005"}`,
		`apiserver_request_sli_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="0.05"}`,
		`apiserver_response_sizes_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="1000"} 0`,
		`apiserver_response_sizes_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="10000"} 1`,
		`apiserver_response_sizes_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1",le="1e+09"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s:\n%s", want, text)
		}
	}
	fs, err := metricstest.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fs.Value("apiserver_request_total"); !ok {
		t.Error("parsed exposition lacks apiserver_request_total")
	}
}

// TestRequestAbortsAndTerminations: a request cut by http.ErrAbortHandler
// counts in apiserver_request_aborts_total; the timeout filter's 504 in
// apiserver_request_terminations_total and, the handler having taken it,
// in apiserver_request_total with its 504; flow control's 429 in both,
// without a latency (kube's RecordDroppedRequest).
func TestRequestAbortsAndTerminations(t *testing.T) {
	m := newRequestMetrics()
	s := &Server{requests: m, log: quietLogger(), requestLogLevel: slog.LevelDebug, cfg: Config{SlowRequestThreshold: time.Second, RequestTimeout: time.Minute}}
	s.longRunningCtx, s.endLongRunning = context.WithCancel(context.Background())
	defer s.endLongRunning()
	h := s.withRequestInfo(s.recoverer(s.withRequestTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("reject") == "" {
			trace.From(r.Context()).Served()
		}
		if r.URL.Query().Get("abort") != "" {
			panic(http.ErrAbortHandler)
		}
		if r.URL.Query().Get("reject") != "" {
			// Flow control's 429: before any handler took the request.
			trace.From(r.Context()).Rejected()
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
			return
		}
		<-r.Context().Done()
	}))))
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/v1/namespaces/ns/pods/p?timeout=10ms")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", resp.StatusCode)
	}
	if _, err := http.Get(ts.URL + "/api/v1/namespaces/ns/pods/p?abort=1"); err == nil {
		t.Fatal("an aborted request answered")
	}
	resp, err = http.Get(ts.URL + "/api/v1/namespaces/ns/pods?reject=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", resp.StatusCode)
	}
	var fs metricstest.Families
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"apiserver_request_terminations_total", []string{"verb", "GET", "resource", "pods", "scope", "resource", "code", "504", "component", "apiserver"}},
		{"apiserver_request_total", []string{"verb", "GET", "resource", "pods", "code", "504"}},
		{"apiserver_request_aborts_total", []string{"verb", "GET", "resource", "pods", "scope", "resource"}},
		{"apiserver_request_total", []string{"verb", "LIST", "resource", "pods", "scope", "namespace", "code", "429"}},
		{"apiserver_request_terminations_total", []string{"verb", "LIST", "resource", "pods", "scope", "namespace", "code", "429"}},
	} {
		// The abort is counted when the serving goroutine unwinds, which
		// may be after the client saw its connection cut.
		deadline := time.Now().Add(10 * time.Second)
		for {
			fs, err = metricstest.Parse(strings.NewReader(metricstest.Text(t, m)))
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := fs.Value(c.name, c.labels...); v == 1 || time.Now().After(deadline) {
				if v != 1 {
					t.Errorf("%s%v = %v, want 1; series %v", c.name, c.labels, v, fs.Series(c.name))
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if v, _ := fs.Value("apiserver_request_duration_seconds", "verb", "LIST"); v != 0 {
		t.Errorf("a rejected request has a latency: %v samples", v)
	}
}

// oldLogRequests and oldWithRequestInfo are the two filters the request
// recorder replaced, for BenchmarkRequestFilters' baseline.
func oldLogRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		if log.Enabled(r.Context(), slog.LevelDebug) {
			log.Debug("request", "method", r.Method, "uri", r.RequestURI, "duration", time.Since(start))
		}
	})
}

func oldWithRequestInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(handlers.WithRequestInfo(r.Context(), handlers.NewRequestInfo(r))))
	})
}

// nopWriter is a ResponseWriter that costs nothing.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

var benchUser = "bench"

// BenchmarkRequestFilters is the cost the request metrics, the trace and
// the request line add to a create: "before" is the two filters they
// replaced, "after" the recorder with a create's trace steps and the
// executing count (the log at info level, as by default).
func BenchmarkRequestFilters(b *testing.B) {
	body := make([]byte, 800)
	req := httptest.NewRequest("POST", "/api/v1/namespaces/bench/pods", nil)
	req.Header.Set("User-Agent", "bench")
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	run := func(b *testing.B, h http.Handler) {
		w := &nopWriter{h: http.Header{}}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			h.ServeHTTP(w, req)
		}
	}
	b.Run("before", func(b *testing.B) {
		run(b, oldLogRequests(log, oldWithRequestInfo(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		}))))
	})
	// "after" marks the steps a create marks; "after, no steps" is the
	// recorder, the metrics and the log check alone.
	for _, steps := range []bool{true, false} {
		name := "after"
		if !steps {
			name = "after, no steps"
		}
		b.Run(name, func(b *testing.B) {
			s := &Server{requests: newRequestMetrics(), log: log, requestLogLevel: slog.LevelDebug, cfg: Config{SlowRequestThreshold: time.Second}}
			run(b, s.withRequestInfo(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx := r.Context()
				tr := trace.From(ctx)
				tr.SetUser(&benchUser)
				ri, _ := handlers.RequestInfoFrom(ctx)
				executing := s.requests.executing(ri.Verb)
				tr.Served()
				if steps {
					tr.Mark(trace.Authenticated)
					tr.Mark(trace.Authorized)
					trace.Mark(ctx, trace.Decoded)
					trace.Mark(ctx, trace.StorageWrite)
					trace.Mark(ctx, trace.StorageWritten)
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write(body)
				if steps {
					trace.Mark(ctx, trace.ResponseWritten)
				}
				executing.Add(-1)
			})))
		})
	}
}
