package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/authorizer/rbac"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/storage"
	etcdstore "github.com/corekube/corekube/storage/etcd"
	"github.com/corekube/corekube/watch"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
)

// Server is a running API server.
type Server struct {
	cfg      Config
	log      *slog.Logger
	listener net.Listener
	http     *http.Server
	storage  storage.Interface
	etcd     *etcdstore.Store
	// identity names this server's identity lease (identity.go).
	identity string
	closers  []func() error

	// stopCaches ends the watch caches' goroutines (after the requests).
	stopCaches context.CancelFunc
	caches     sync.WaitGroup
	// longRunningCtx ends (endLongRunning) when the server stops
	// listening at shutdown: watches and other long-running requests then
	// end cleanly instead of holding the shutdown up (timeout.go).
	longRunningCtx context.Context
	endLongRunning context.CancelFunc
	// shutdown is the state of a graceful shutdown (shutdown.go).
	shutdown shutdownState
	// logs follows the log's writes for the log health check, hooks the
	// start-up work the poststarthook/* checks report (health.go).
	logs  *logWatch
	hooks postStartHooks

	// loopbackToken authenticates the server's own clients (LoopbackConfig)
	// as system:apiserver in system:masters.
	loopbackToken string
	loopbackUID   string
	// metrics is the registry /metrics serves (metrics.go).
	metrics *prometheus.Registry
	// requests are the request metrics (requests.go); requestLogLevel is
	// the level of every request's log line.
	requests        *requestMetrics
	requestLogLevel slog.Level
	// authMetrics are the authentication and authorization metrics.
	authMetrics *authMetrics
	// tls is the serving TLS material (nil with InsecureHTTP).
	tls *serving
	// audit is the audit log (nil when off).
	audit *auditing
	// authorization decides on every request (authz.go).
	authorization *authorization
	// apf is API Priority and Fairness (apf.go).
	apf *apf

	// saTokens issues and verifies ServiceAccount tokens (satokens.go);
	// tokenReviewAuthn is the bearer token authentication TokenReviews run.
	saTokens         *saTokens
	tokenReviewAuthn authenticator.Request

	// fresh holds the connections that have not carried a request yet:
	// http.Server.Shutdown waits up to 5s for them, so Shutdown closes them.
	freshMu sync.Mutex
	fresh   map[net.Conn]struct{}

	wg      sync.WaitGroup
	serveMu sync.Mutex
	served  error
}

// Start starts etcd (or connects to it), ensures the system namespaces
// exist and starts serving. It returns once the server answers requests;
// ctx bounds only the start-up.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	// Admission's flags and configuration file are checked before
	// anything starts, as kube checks its flags.
	if err := checkAdmission(&cfg); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logs: &logWatch{}, hooks: newPostStartHooks(postStartHookOrder)}
	s.log = slog.New(s.logs.wrap(cfg.Logger.Handler()))
	if err := s.setupMetrics(); err != nil {
		return nil, err
	}
	s.longRunningCtx, s.endLongRunning = context.WithCancel(context.Background())
	if s.loopbackToken, err = newLoopbackToken(); err != nil {
		return nil, err
	}
	s.loopbackUID = string(uuid.NewUUID())
	defer func() {
		if err != nil {
			s.close()
		}
	}()

	if cfg.Storage != nil {
		s.storage = cfg.Storage
	} else {
		client, err := s.connectEtcd(ctx)
		if err != nil {
			return nil, err
		}
		s.etcd = etcdstore.New(client, etcdstore.WithPrefix(cfg.EtcdPrefix), etcdstore.WithMetrics(s.metrics),
			etcdstore.WithCompression(cfg.StorageCompression == StorageCompressionDeflate))
		s.storage = s.etcd
	}
	s.authorization = &authorization{escalation: &rbac.EscalationCheck{}}
	types := &typeConverter{}
	admissionMetrics, err := admission.NewMetrics(s.metrics)
	if err != nil {
		return nil, err
	}
	noWatchCache, err := cfg.noWatchCache()
	if err != nil {
		return nil, fmt.Errorf("--watch-cache-sizes: %w", err)
	}
	api, nsStore, stores, err := newAPI(s.storage, registry.Options{Logger: s.log, WatchCacheSize: cfg.WatchCacheSize,
		BookmarkInterval: cfg.BookmarkInterval, TypeConverter: types.get, WatchMetrics: watch.NewMetrics(s.metrics),
		NoWatchCache: noWatchCache, StorageMediaType: cfg.StorageMediaType},
		&cfg, admissionMetrics, s.authorization.escalation)
	if err != nil {
		return nil, err
	}
	s.nameStorageMetrics(api)
	s.hooks.finished(hookAdmissionInitializer)
	if err := s.serveServiceAccountTokens(api); err != nil {
		return nil, err
	}
	// Build the type converter while the caches start and the system
	// namespaces are written (their creates record managedFields and
	// would otherwise build it in line). The resources are read here, not
	// in the background: more create-only ones (reviews) are added below.
	types.resources = openAPIResources(api)
	s.runBackground(func(context.Context) { _, _ = types.get() })
	s.runCaches(api)
	s.runBackground(s.requests.maintainWatermarks)
	if stores.webhooks != nil {
		s.runBackground(stores.webhooks.run)
	}
	s.runBackground(stores.priorityClasses.run)
	s.hooks.finished(hookStartInformers)
	if err := ensureSystemNamespaces(ctx, nsStore); err != nil {
		return nil, err
	}
	// kube's system namespaces controller writes kube-system, kube-public
	// and kube-node-lease, its bootstrap controller default.
	s.hooks.finished(hookSystemNamespaces, hookBootstrapController)
	if err := ensureSystemPriorityClasses(ctx, stores.priorityClasses.store, s.log); err != nil {
		return nil, err
	}
	s.hooks.finished(hookBootstrapPriorityClasses)
	if err := s.setupAuthorization(ctx, api); err != nil {
		return nil, err
	}
	s.hooks.finished(hookBootstrapRoles)
	s.serveAccessReviews(api)
	// After authorization: its writes go through admission, whose RBAC
	// escalation check authorization sets up.
	if err := s.setupFlowControl(ctx, api); err != nil {
		return nil, err
	}
	// The bootstrap configuration is stored (producer) and the filter's
	// controller runs on it (consumer, filter).
	s.hooks.finished(hookAPFConfigProducer, hookAPFConfigConsumer, hookAPFFilter)

	if !cfg.InsecureHTTP {
		if s.tls, err = s.setupTLS(); err != nil {
			return nil, err
		}
	}
	if err := s.setupKubeletClient(stores.podLog); err != nil {
		return nil, err
	}
	if err := s.setupAudit(); err != nil {
		return nil, err
	}
	authn, err := s.buildAuthenticator()
	if err != nil {
		return nil, err
	}

	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.listener = s.shutdown.track(listener)
	// The identity lease is named after the address just bound.
	if err := s.runIdentityLease(api.Resource("coordination.k8s.io", "v1", "leases").Store); err != nil {
		return nil, errors.Join(err, s.listener.Close())
	}
	s.hooks.finished(hookIdentityLease, hookIdentityLeaseCollector)
	s.http = &http.Server{
		Handler:           s.routes(api, authn),
		ConnState:         s.trackFresh,
		ReadHeaderTimeout: defaultReadHeaderTimeout,
		// kube's idle keep-alive timeout (HTTP/1.1 and HTTP/2 alike).
		IdleTimeout: defaultIdleTimeout,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if s.tls != nil {
			s.http.TLSConfig = s.tls.config
			err = s.http.ServeTLS(s.listener, "", "")
		} else {
			err = s.http.Serve(s.listener)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveMu.Lock()
			s.served = err
			s.serveMu.Unlock()
		}
	}()
	if cfg.InsecureHTTP {
		s.log.Warn("serving plain HTTP (--insecure-http): no TLS and no client certificates; anyone who can reach the port can use every credential sent to it and act as anonymous", "url", s.URL())
	}
	s.log.Info("corekube API server ready", "url", s.URL())
	return s, nil
}

// connectEtcd starts the embedded etcd or dials the external cluster.
func (s *Server) connectEtcd(ctx context.Context) (*clientv3.Client, error) {
	if len(s.cfg.EtcdServers) > 0 {
		client, err := etcdstore.NewClient(s.cfg.EtcdServers, etcdstore.ClientTLS{
			CAFile: s.cfg.EtcdCAFile, CertFile: s.cfg.EtcdCertFile, KeyFile: s.cfg.EtcdKeyFile})
		if err != nil {
			return nil, fmt.Errorf("connect to etcd %v: %w", s.cfg.EtcdServers, err)
		}
		s.closers = append(s.closers, client.Close)
		return client, nil
	}
	e, err := etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{
		Dir:           s.cfg.DataDir,
		UnsafeNoFsync: s.cfg.UnsafeNoFsync,
		Logger:        s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	s.closers = append(s.closers, e.Close)
	return e.Client(), nil
}

// URL is the server's base URL.
func (s *Server) URL() string {
	scheme := "https://"
	if s.tls == nil {
		scheme = "http://"
	}
	return scheme + s.listener.Addr().String()
}

// LoopbackConfig is a client config for the server's own clients (the
// control loops and node agents `up` runs in-process): they act as
// system:apiserver, in system:masters, and speak protobuf, as
// kube-apiserver's loopback client.
func (s *Server) LoopbackConfig() *rest.Config {
	c := &rest.Config{Host: s.URL(), BearerToken: s.loopbackToken, QPS: -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json"}}
	if s.tls != nil {
		c.TLSClientConfig = rest.TLSClientConfig{CAData: s.tls.caPEM, ServerName: s.tls.loopbackSNI}
	}
	return c
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Storage is the server's storage (for tests and benchmarks).
func (s *Server) Storage() storage.Interface { return s.storage }

func (s *Server) trackFresh(c net.Conn, state http.ConnState) {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	if state == http.StateNew {
		if s.fresh == nil {
			s.fresh = map[net.Conn]struct{}{}
		}
		s.fresh[c] = struct{}{}
		return
	}
	delete(s.fresh, c)
}

func (s *Server) closeFresh() {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
	}
}

// runCaches starts one goroutine per resource that keeps its watch cache
// current, and the compactor; close stops them before etcd goes.
func (s *Server) runCaches(api *handlers.API) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCaches = cancel
	if s.cfg.CompactionInterval > 0 && s.etcd != nil {
		s.caches.Add(1)
		go func() {
			defer s.caches.Done()
			compact(ctx, s.etcd, s.cfg.CompactionInterval, s.log)
		}()
	}
	for _, r := range api.Resources() {
		s.caches.Add(1)
		go func() {
			defer s.caches.Done()
			if err := r.Store.Run(ctx); err != nil {
				s.log.Error("watch cache stopped", "resource", r.Store.Info().Resource, "err", err)
			}
		}()
	}
}

func (s *Server) serveErr() error {
	s.serveMu.Lock()
	defer s.serveMu.Unlock()
	return s.served
}

func (s *Server) close() error {
	if s.endLongRunning != nil {
		s.endLongRunning()
	}
	if s.stopCaches != nil {
		s.stopCaches()
		s.caches.Wait()
		s.stopCaches = nil
	}
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}
