package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/openapi"
	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Connection timeouts: headers must arrive within 10 s, and a keep-alive
// connection idle for 90 s is closed, as kube-apiserver's (its
// http.Server's IdleTimeout); a body is bounded by the request's own
// deadline (timeout.go). See docs/limits.md.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = 90 * time.Second
)

// routes mounts every endpoint behind the filters.
func (s *Server) routes(api *handlers.API, authn authenticator.Request) http.Handler {
	r := chi.NewRouter()
	// The handlers log through the server's logger, which every request
	// carries from here on (the recoverer's answers included).
	// What a request asks for is parsed once (RequestInfo) by the first
	// filter, which also records the answer for the request metrics and
	// the request's log line (requests.go); unless it is
	// long-running it has a deadline from then on (timeout.go), as kube's,
	// which its authentication counts against. Every request is
	// authenticated (or answered 401) before anything else acts on it,
	// then acts as whom it impersonates, goes through API Priority and
	// Fairness (as the user it acts as) and is authorized, in kube's order.
	r.Use(handlers.WithLogger(s.log), s.withRequestInfo, s.recoverer, s.withRequestTimeout, s.withAuthentication(authn), s.withAudit(), s.withImpersonation, s.withFlowControl, s.withAuthorization)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		handlers.NotFound(w, r)
	})

	// kube's checks, by kube's names and in kube's order: /livez has no
	// etcd check here (an etcd outage must not make liveness probes
	// restart API servers); informer-sync is every watch cache serving;
	// the post-start hooks are on all three, as kube's.
	ping := healthCheck{name: "ping", check: func(context.Context) error { return nil }}
	logCheck := healthCheck{name: "log", check: s.logs.check}
	probe := &etcdProbe{healthy: s.storage.Healthy}
	etcd := healthCheck{name: "etcd", check: func(ctx context.Context) error { return probe.check(ctx, etcdCheckTimeout) }}
	etcdReadiness := healthCheck{name: "etcd-readiness", check: func(ctx context.Context) error { return probe.check(ctx, etcdReadinessTimeout) }}
	informerSync := healthCheck{name: "informer-sync", check: func(context.Context) error { return cachesReady(api) }}
	hooks := s.hooks.checks(postStartHookOrder)
	shutdown := healthCheck{name: "shutdown", check: s.shutdown.check}
	slis := newHealthSLIs()
	healthRoutes(r, "healthz", slices.Concat([]healthCheck{ping, logCheck, etcd}, hooks), slis)
	healthRoutes(r, "livez", slices.Concat([]healthCheck{ping, logCheck}, hooks), slis)
	healthRoutes(r, "readyz", slices.Concat([]healthCheck{ping, logCheck, etcd, etcdReadiness, informerSync}, hooks, []healthCheck{shutdown}), slis)
	// kube's component SLIs: the health checks' results.
	r.Method(http.MethodGet, "/metrics/slis", slis.handler())
	r.Method(http.MethodGet, "/metrics", s.metricsHandler(api))
	if s.cfg.Profiling {
		// kube-apiserver's --profiling (on by default): Go's profiles at
		// /debug/pprof/, e.g. `go tool pprof http://ADDR/debug/pprof/heap`.
		r.HandleFunc("/debug/pprof/*", pprof.Index)
		r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.routeServiceAccountIssuer(r)
	r.Get("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Version)
	})

	disc := handlers.NewDiscovery(api)
	r.HandleFunc("/api", disc.Versions)
	r.HandleFunc("/api/", disc.Versions)
	coreResources := func(w http.ResponseWriter, r *http.Request) { disc.Resources(w, r, "", "v1") }
	r.HandleFunc("/api/v1", coreResources)
	r.HandleFunc("/api/v1/", coreResources)
	r.Handle("/api/v1/*", api)
	r.HandleFunc("/apis", disc.Groups)
	r.HandleFunc("/apis/", disc.Groups)
	group := func(w http.ResponseWriter, r *http.Request) { disc.Group(w, r, chi.URLParam(r, "group")) }
	r.HandleFunc("/apis/{group}", group)
	r.HandleFunc("/apis/{group}/", group)
	groupVersion := func(w http.ResponseWriter, r *http.Request) {
		disc.Resources(w, r, chi.URLParam(r, "group"), chi.URLParam(r, "version"))
	}
	r.HandleFunc("/apis/{group}/{version}", groupVersion)
	r.HandleFunc("/apis/{group}/{version}/", groupVersion)
	r.Handle("/apis/{group}/{version}/*", api)

	// The OpenAPI documents are built on the first request for them, not
	// at start-up: only kubectl's create/apply/explain read them, and
	// building them costs ~50 ms and ~20 MB that most runs never need.
	oa := &lazyOpenAPI{build: func() (*openapi.Document, error) { return openapi.Build(openAPIResources(api)) }}
	r.HandleFunc("/openapi/v2", oa.serve((*openapi.Document).ServeV2))
	r.HandleFunc("/openapi/v3", oa.serve((*openapi.Document).ServeV3Index))
	r.HandleFunc("/openapi/v3/*", oa.serve((*openapi.Document).ServeV3))
	return r
}

// recoverer turns a panic in a handler into a 500 Status and a log line
// with the stack, instead of a dropped connection.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				stack := debug.Stack()
				if p, ok := v.(*handlerPanic); ok {
					v, stack = p.value, p.stack
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(stack))
				handlers.WriteError(w, r, apierrors.NewInternalError(fmt.Errorf("panic: %v", v)))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// lazyOpenAPI builds the OpenAPI documents once, on first use.
type lazyOpenAPI struct {
	once  sync.Once
	build func() (*openapi.Document, error)
	doc   *openapi.Document
	err   error
}

func (l *lazyOpenAPI) serve(h func(*openapi.Document, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		l.once.Do(func() { l.doc, l.err = l.build() })
		if l.err != nil {
			handlers.WriteError(w, r, apierrors.NewInternalError(fmt.Errorf("build the OpenAPI documents: %w", l.err)))
			return
		}
		h(l.doc, w, r)
	}
}
