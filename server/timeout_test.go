package server

import (
	"bufio"
	"context"
	"github.com/go-chi/chi/v5"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// timeoutServer serves handler behind the request timeout filter, with
// requestTimeout as --request-timeout.
func timeoutServer(t *testing.T, requestTimeout time.Duration, handler http.HandlerFunc) (*httptest.Server, context.CancelFunc) {
	t.Helper()
	s := &Server{cfg: Config{RequestTimeout: requestTimeout}}
	s.longRunningCtx, s.endLongRunning = context.WithCancel(context.Background())
	ts := httptest.NewServer(s.withRequestTimeout(handler))
	t.Cleanup(ts.Close)
	t.Cleanup(s.endLongRunning)
	return ts, s.endLongRunning
}

type answer struct {
	code        int
	contentType string
	body        string
	took        time.Duration
	auditID     string
}

func send(t *testing.T, method, url string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(body), time.Since(start), resp.Header.Get("Audit-Id")}
}

// kube-apiserver 1.32's timeout filter answer, byte for byte.
const filterTimeoutBody = `{"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the allotted timeout","reason":"Timeout","details":{},"code":504}` + "\n"

// TestRequestTimeout: a request that outlives its deadline (the
// --request-timeout or a shorter ?timeout=) is answered kube's 504 at the
// deadline, with its context cancelled, whatever its handler does later;
// long-running requests have no deadline and end when the server stops.
func TestRequestTimeout(t *testing.T) {
	handlerDone := make(chan error, 10)
	// A handler that waits for its context, then tries to answer anyway.
	stuck := func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, err := w.Write([]byte(`{"late":true}`))
		handlerDone <- err
	}
	ts, _ := timeoutServer(t, 300*time.Millisecond, stuck)

	for _, tc := range []struct {
		name, method, path string
		within             time.Duration
	}{
		{"get at --request-timeout", "GET", "/api/v1/namespaces/default/pods/p", 300 * time.Millisecond},
		{"list at ?timeout", "GET", "/api/v1/pods?timeout=50ms", 50 * time.Millisecond},
		{"create at ?timeout", "POST", "/api/v1/namespaces/default/pods?timeout=50ms", 50 * time.Millisecond},
		{"?timeout longer than --request-timeout", "GET", "/api/v1/pods?timeout=1h", 300 * time.Millisecond},
		{"?timeout=0 is the server's", "GET", "/api/v1/pods?timeout=0s", 300 * time.Millisecond},
		{"non-resource", "GET", "/version", 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, tc.method, ts.URL+tc.path)
			if a.code != http.StatusGatewayTimeout || a.body != filterTimeoutBody || a.contentType != "text/plain; charset=utf-8" {
				t.Errorf("%d %q %q, want 504 %q", a.code, a.contentType, a.body, filterTimeoutBody)
			}
			if a.took < tc.within || a.took > tc.within+2*time.Second {
				t.Errorf("answered after %v, want at %v", a.took, tc.within)
			}
			if a.auditID == "" {
				t.Error("no Audit-Id on the 504")
			}
			if err := <-handlerDone; err != http.ErrHandlerTimeout {
				t.Errorf("the handler's late write: %v, want ErrHandlerTimeout", err)
			}
		})
	}

	t.Run("write at kube's 34s bound", func(t *testing.T) {
		defer func(d time.Duration) { writeTimeoutUpperBound = d }(writeTimeoutUpperBound)
		writeTimeoutUpperBound = 50 * time.Millisecond
		// A server of its own: its filter reads the bound per request.
		ts, _ := timeoutServer(t, time.Minute, stuck)
		a := send(t, "PATCH", ts.URL+"/api/v1/namespaces/default/pods/p")
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}`
		if a.code != http.StatusGatewayTimeout || strings.TrimSpace(a.body) != want || a.contentType != "application/json" {
			t.Errorf("%d %q %s, want 504 %s", a.code, a.contentType, a.body, want)
		}
		if err := <-handlerDone; err != http.ErrHandlerTimeout {
			t.Errorf("the handler's late write: %v, want ErrHandlerTimeout", err)
		}
		// A GET is not a write: the server's minute applies.
		if a := send(t, "GET", ts.URL+"/api/v1/namespaces/default/pods/p?timeout=100ms"); !strings.Contains(a.body, "allotted") {
			t.Errorf("GET: %s, want the filter's 504", a.body)
		}
		<-handlerDone
	})

	t.Run("bad ?timeout", func(t *testing.T) {
		a := send(t, "GET", ts.URL+"/api/v1/pods?timeout=soon")
		want := `"message":"invalid timeout specified in the request URL - time: invalid duration \"soon\"","reason":"BadRequest","code":400`
		if a.code != http.StatusBadRequest || !strings.Contains(a.body, want) {
			t.Errorf("%d %s, want 400 with %s", a.code, a.body, want)
		}
	})

	t.Run("in time", func(t *testing.T) {
		ts, _ := timeoutServer(t, time.Minute, func(w http.ResponseWriter, r *http.Request) {
			if _, ok := r.Context().Deadline(); !ok {
				t.Error("no deadline")
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Mine", "yes")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"ok":true}`)
		})
		a := send(t, "POST", ts.URL+"/api/v1/namespaces/default/pods")
		if a.code != http.StatusCreated || a.body != `{"ok":true}` || a.contentType != "application/json" {
			t.Errorf("%+v", a)
		}
	})

	t.Run("long-running", func(t *testing.T) {
		for _, path := range []string{"/api/v1/pods?watch=true", "/api/v1/watch/pods", "/api/v1/namespaces/default/pods/p/log", "/debug/pprof/profile"} {
			started := make(chan struct{})
			ts, end := timeoutServer(t, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
				if _, ok := r.Context().Deadline(); ok {
					t.Errorf("%s: a deadline", path)
				}
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				close(started)
				<-r.Context().Done()
			})
			go func() {
				<-started
				end()
			}()
			if a := send(t, "GET", ts.URL+path); a.code != http.StatusOK {
				t.Errorf("%s: %+v, want 200 ended by the shutdown", path, a)
			}
		}
	})
}

// TestRequestTimeoutPanic: a handler's panic crosses back from the
// goroutine the timeout runs it in to the recoverer, which answers 500.
func TestRequestTimeoutPanic(t *testing.T) {
	s := &Server{cfg: Config{RequestTimeout: time.Minute}, log: quietLogger()}
	s.longRunningCtx, s.endLongRunning = context.WithCancel(context.Background())
	defer s.endLongRunning()
	ts := httptest.NewServer(s.recoverer(s.withRequestTimeout(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))))
	defer ts.Close()
	a := send(t, "GET", ts.URL+"/api/v1/pods")
	if a.code != http.StatusInternalServerError || !strings.Contains(a.body, `"message":"Internal error occurred: panic: boom"`) {
		t.Errorf("%d %s, want a 500 about the panic", a.code, a.body)
	}
}

// TestRequestTimeoutOwnRouteContext: a handler still running after its
// 504 routes and reads URL parameters in a chi routing context of its
// own, not in the pooled one chi hands to the next request (under -race
// the shared one was a data race).
func TestRequestTimeoutOwnRouteContext(t *testing.T) {
	s := &Server{cfg: Config{RequestTimeout: time.Minute}}
	s.longRunningCtx, s.endLongRunning = context.WithCancel(context.Background())
	t.Cleanup(s.endLongRunning)
	release := make(chan struct{})
	late := make(chan string, 1)
	r := chi.NewRouter()
	r.Use(s.withRequestTimeout)
	r.Get("/slow/{name}", func(w http.ResponseWriter, r *http.Request) {
		<-release // after the 504 and after other requests reused chi's pool
		late <- chi.URLParam(r, "name")
	})
	r.Get("/fast/{name}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, chi.URLParam(r, "name"))
	})
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)

	resp, err := http.Get(ts.URL + "/slow/first?timeout=50ms")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("slow request: %d, want 504", resp.StatusCode)
	}
	for i := range 20 {
		resp, err := http.Get(ts.URL + "/fast/other")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "other" {
			t.Fatalf("fast request %d: %q", i, b)
		}
	}
	close(release)
	if got := <-late; got != "first" {
		t.Errorf("the late handler read name %q, want its own %q", got, "first")
	}
}

// TestRequestTimeoutSlowBody: a body trickled a byte at a time over
// HTTP/1.1 is cut off at the deadline with the 504, rather than read for
// as long as it keeps coming (net/http reads what is left of a small body
// before it answers, unless reads fail).
func TestRequestTimeoutSlowBody(t *testing.T) {
	ts, _ := timeoutServer(t, 300*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
	})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// The trickle, owned by the test: ends with it or when the
		// connection refuses writes.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after %v: %v", time.Since(start), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("answered %d after %v, want 504 at the deadline", resp.StatusCode, time.Since(start))
	}
}
