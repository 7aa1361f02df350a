package flowcontrol

import (
	"github.com/corekube/corekube/test/metricstest"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
)

func request(u *user.Info, method, path string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	ctx := user.WithUser(r.Context(), u)
	return r.WithContext(handlers.WithRequestInfo(ctx, handlers.NewRequestInfo(r)))
}

// TestHandlerRejects: a full Reject level answers kube's 429, with
// Retry-After and the PF headers; long-running requests pass untouched.
func TestHandlerRejects(t *testing.T) {
	c := New(Options{ServerConcurrencyLimit: 1})
	release := make(chan struct{})
	var started sync.WaitGroup
	h := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" {
			started.Done()
			<-release
		}
		w.WriteHeader(200)
	}))
	// The catch-all level (Reject) of a configuration without
	// global-default: its one seat taken, the next request is rejected.
	b := BootstrapConfiguration()
	var fss = b.FlowSchemas[:0]
	for _, fs := range b.FlowSchemas {
		if fs.Name != "global-default" {
			fss = append(fss, fs)
		}
	}
	c.Update(fss, b.PriorityLevels)
	started.Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), request(alice, "GET", "/api/v1/namespaces/a/pods?hold=1"))
	}()
	started.Wait()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(alice, "GET", "/api/v1/namespaces/a/pods"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" || w.Body.String() != "Too many requests, please try again later.\n" ||
		w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("got %d %v %q", w.Code, w.Header(), w.Body.String())
	}
	if c.Rejected() != 1 {
		t.Errorf("rejected %d", c.Rejected())
	}
	m := metricstest.Text(t, c)
	for _, want := range []string{
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="catch-all",priority_level="catch-all",reason="concurrency-limit"} 1`,
		`apiserver_flowcontrol_current_executing_seats{priority_level="catch-all"} 1`,
		`apiserver_flowcontrol_nominal_limit_seats{priority_level="catch-all"} 1`,
	} {
		if !strings.Contains(string(m), want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
	// The admin is exempt; logs are long-running: both pass.
	for _, r := range []*http.Request{request(admin, "GET", "/api/v1/namespaces/a/pods"), request(alice, "GET", "/api/v1/namespaces/a/pods/p/log")} {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("%s: %d", r.URL, w.Code)
		}
	}
	close(release)
	<-done
}

// TestWatchReleasesSeats: a watch gives its seats back once it has
// written its first answer, and keeps streaming.
func TestWatchReleasesSeats(t *testing.T) {
	c := New(Options{ServerConcurrencyLimit: 1})
	streaming, stop := make(chan struct{}), make(chan struct{})
	h := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			close(streaming)
			<-stop
			return
		}
		w.WriteHeader(200)
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), request(alice, "GET", "/api/v1/namespaces/a/pods?watch=1"))
	}()
	<-streaming
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(alice, "GET", "/api/v1/namespaces/a/pods/x"))
	if w.Code != 200 {
		t.Errorf("a GET while a watch streams: %d", w.Code)
	}
	close(stop)
	<-done
}

// BenchmarkFilter is the filter's cost per request, the handler doing
// nothing: the admin (exempt: classification only) and a
// ServiceAccount (workload-low: classification, seats and release).
func BenchmarkFilter(b *testing.B) {
	c := New(Options{})
	h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, bc := range []struct {
		name string
		u    *user.Info
	}{{"exempt", admin}, {"workload-low", appSA}, {"global-default", alice}} {
		b.Run(bc.name, func(b *testing.B) {
			r := request(bc.u, "POST", "/api/v1/namespaces/default/pods")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discard{h: http.Header{}}
				for pb.Next() {
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
