package server

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/go-chi/chi/v5"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/server/audit"
	"github.com/corekube/corekube/storage/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DefaultRequestTimeout is kube-apiserver's --request-timeout default.
const DefaultRequestTimeout = time.Minute

// writeTimeoutUpperBound caps the time of a create, update, patch or
// delete, as kube's REST handlers cap theirs (34 s) inside the request's
// own deadline. A variable for the tests.
var writeTimeoutUpperBound = 34 * time.Second

// The answers kube gives to a request that ran out of time: its timeout
// filter's, and its REST handlers' for a write that hit their own bound.
const (
	filterTimeoutMessage = "request did not complete within the allotted timeout"
	invalidTimeoutPrefix = "invalid timeout specified in the request URL - "
)

// longRunning is kube-apiserver's long-running request check
// (RequestInfo.LongRunning), plus Go's profiles: those run for as long as
// they need; every other request has a deadline.
func longRunning(ri *handlers.RequestInfo) bool {
	return ri.LongRunning() || strings.HasPrefix(ri.Path, "/debug/pprof/")
}

// isWrite reports the verbs whose kube handlers bound them by
// writeTimeoutUpperBound.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// withRequestTimeout gives every request that is not long-running a
// deadline, as kube's request deadline and timeout filters do: the
// --request-timeout, or the request's ?timeout= when shorter. Everything
// the request does (storage calls included) runs under that deadline, and
// when it passes the client gets kube's 504 at once, whatever the handler
// is still waiting for. Long-running requests instead end when the server
// shuts down (s.endLongRunning).
func (s *Server) withRequestTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri, ok := handlers.RequestInfoFrom(r.Context())
		if !ok {
			ri = handlers.NewRequestInfo(r)
		}
		if longRunning(ri) {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(s.longRunningCtx, cancel)
			defer stop()
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		timeout := s.cfg.RequestTimeout
		if v := r.URL.Query().Get("timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				handlers.WriteError(w, r, apierrors.NewBadRequest(invalidTimeoutPrefix+err.Error()))
				return
			}
			// 0 (or less) asks for no timeout of the client's own: the
			// server's applies.
			if d > 0 && d < timeout {
				timeout = d
			}
		}
		handlerBound := false
		if isWrite(ri.Verb) && writeTimeoutUpperBound < timeout {
			timeout, handlerBound = writeTimeoutUpperBound, true
		}
		// The 504 carries the request's Audit-Id, as every answer does.
		audit.EnsureID(w, r)
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		serveWithDeadline(w, r.WithContext(ctx), next, handlerBound)
	})
}

// serveWithDeadline runs next in its own goroutine and answers kube's 504
// when r's context ends first. The handler goes on until it notices its
// context ended; what it writes from then on is dropped.
func serveWithDeadline(w http.ResponseWriter, r *http.Request, next http.Handler, handlerBound bool) {
	tw := &timeoutWriter{w: w, ctx: r.Context(), header: w.Header().Clone()}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &timeoutBody{ReadCloser: r.Body, tw: tw}
	}
	answer := r
	r = detached(r)
	done := make(chan any, 1)
	go func() {
		defer func() {
			// A panic crosses back to the serving goroutine, where the
			// recoverer answers it; it carries this goroutine's stack
			// for the log.
			p := recover()
			if p != nil && p != http.ErrAbortHandler {
				p = &handlerPanic{value: p, stack: debug.Stack()}
			}
			done <- p
		}()
		next.ServeHTTP(tw, r)
	}()
	select {
	case p := <-done:
		if p != nil {
			panic(p)
		}
		// A handler that gave up on its ended context without writing
		// (its writes were already refused) still owes the 504.
		tw.timeout(answer, handlerBound, false)
	case <-r.Context().Done():
		if r.Body != nil && r.Body != http.NoBody {
			// A body still arriving (trickled a byte at a time) would
			// otherwise hold the 504 back: net/http reads what is left
			// of a small body before it answers. Reads from now on fail,
			// the handler's blocked read included, and the connection
			// closes after the answer (a 504 is final in kube too).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
		if !handlerBound {
			// kube's timeout filter counts its 504s as terminations.
			trace.From(r.Context()).TimedOut()
		}
		tw.timeout(answer, handlerBound, true)
	}
}

// detached is r for a handler that may outlive the request, with what
// the handler changes and the serving goroutine still reads after a 504
// made its own:
//   - the headers (authentication removes Authorization; the 504's
//     negotiation and the request's log line read them);
//   - chi's routing context, which chi takes from a pool and puts back
//     when the request returns, so a late handler would otherwise route
//     into, and read, a context another request already uses. The filter
//     runs before chi routes, so the copy holds only the router and the
//     path so far.
func detached(r *http.Request) *http.Request {
	ctx := r.Context()
	if pooled := chi.RouteContext(ctx); pooled != nil {
		own := chi.NewRouteContext()
		own.Routes = pooled.Routes
		own.RoutePath = pooled.RoutePath
		own.RouteMethod = pooled.RouteMethod
		own.URLParams.Keys = append(own.URLParams.Keys, pooled.URLParams.Keys...)
		own.URLParams.Values = append(own.URLParams.Values, pooled.URLParams.Values...)
		own.RoutePatterns = append(own.RoutePatterns, pooled.RoutePatterns...)
		ctx = context.WithValue(ctx, chi.RouteCtxKey, own)
	}
	d := r.WithContext(ctx)
	d.Header = r.Header.Clone()
	return d
}

// timeoutWriter is the handler's ResponseWriter under a deadline: it keeps
// the handler's headers apart until the handler writes, and refuses every
// write once the deadline passed, so that the 504 and a late answer never
// mix.
type timeoutWriter struct {
	w   http.ResponseWriter
	ctx context.Context
	// header is the handler's, copied to w's when it writes.
	header http.Header

	mu          sync.Mutex
	wroteHeader bool
	timedOut    atomic.Bool
}

func (tw *timeoutWriter) Header() http.Header {
	if tw.timedOut.Load() {
		return http.Header{}
	}
	return tw.header
}

// admitLocked reports whether the handler may still write, starting the
// response when it first does.
func (tw *timeoutWriter) admitLocked(code int) bool {
	if tw.timedOut.Load() {
		return false
	}
	if tw.wroteHeader {
		return true
	}
	if tw.ctx.Err() != nil {
		// The deadline passed: the 504 is on its way.
		tw.timedOut.Store(true)
		return false
	}
	dst := tw.w.Header()
	for k, v := range tw.header {
		dst[k] = v
	}
	tw.wroteHeader = true
	tw.w.WriteHeader(code)
	return true
}

func (tw *timeoutWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.admitLocked(code)
}

func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if !tw.admitLocked(http.StatusOK) {
		return 0, http.ErrHandlerTimeout
	}
	return tw.w.Write(p)
}

func (tw *timeoutWriter) Flush() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut.Load() {
		return
	}
	if f, ok := tw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// timeout ends the request after its deadline: kube's 504 Status if the
// handler wrote nothing yet, else a cut connection (kube aborts the
// stream). Called after the handler returned (force false), it only acts
// when the handler's writes were refused.
func (tw *timeoutWriter) timeout(r *http.Request, handlerBound, force bool) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if !force && !tw.timedOut.Load() {
		return
	}
	if tw.wroteHeader {
		tw.timedOut.Store(true)
		panic(http.ErrAbortHandler)
	}
	tw.timedOut.Store(true)
	if handlerBound {
		// kube's REST handlers answer their own bound with a Status
		// negotiated as any error.
		handlers.WriteError(tw.w, r, apierrors.NewTimeoutError(
			fmt.Sprintf("request did not complete within requested timeout - %s", context.DeadlineExceeded), 0))
		return
	}
	// kube's timeout filter writes the Status as bare JSON: no kind or
	// apiVersion, no Content-Type (so Go sniffs text/plain).
	tw.w.WriteHeader(http.StatusGatewayTimeout)
	_ = json.NewEncoder(tw.w).Encode(apierrors.NewTimeoutError(filterTimeoutMessage, 0).ErrStatus)
}

// timeoutBody refuses reads once the request timed out: the serving
// goroutine has moved on, and the body is no longer the handler's.
type timeoutBody struct {
	io.ReadCloser
	tw *timeoutWriter
}

func (b *timeoutBody) Read(p []byte) (int, error) {
	if b.tw.timedOut.Load() {
		return 0, http.ErrHandlerTimeout
	}
	return b.ReadCloser.Read(p)
}

// handlerPanic is a handler's panic carried to the serving goroutine with
// the stack of the goroutine it happened in.
type handlerPanic struct {
	value any
	stack []byte
}

func (p *handlerPanic) String() string { return fmt.Sprint(p.value) }
