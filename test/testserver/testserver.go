// Package testserver starts a real corekube API server in-process on
// 127.0.0.1:0 over a real embedded etcd in a temporary directory, for
// integration tests and benchmarks.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Server is a running test server.
type Server struct {
	*server.Server
	// Config is a client-go config for the server.
	Config *rest.Config
	// Client is a typed clientset for the server.
	Client kubernetes.Interface

	stopped bool
	// stopControllers ends the controllers startControllers runs.
	stopControllers func()
}

// Stop shuts the server down before the test ends (to restart it).
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.stopControllers != nil {
		s.stopControllers()
	}
	if err := s.Shutdown(context.Background()); err != nil {
		tb.Errorf("shutdown: %v", err)
	}
}

// Start starts a server and stops it when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	dir, err := os.MkdirTemp("", "corekube-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return StartInDir(tb, dir)
}

// StartInDir starts a server on the etcd data in dir (to test restarts).
func StartInDir(tb testing.TB, dir string) *Server {
	tb.Helper()
	return StartWith(tb, dir, nil)
}

// StartWith starts a server on the etcd data in dir after configure (if
// not nil) has adjusted its configuration.
func StartWith(tb testing.TB, dir string, configure func(*server.Config)) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := server.Config{
		Listen:        "127.0.0.1:0",
		DataDir:       dir,
		UnsafeNoFsync: true,
		Logger:        Logger(),
		AnonymousAuth: true,
	}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("start corekube: %v", err)
	}
	s := &Server{Server: srv, Config: &rest.Config{Host: srv.URL(), QPS: -1}}
	s.Client, err = kubernetes.NewForConfig(s.Config)
	if err != nil {
		tb.Fatal(err)
	}
	startControllers(s)
	tb.Cleanup(func() { s.Stop(tb) })
	return s
}

// Logger is the logger of test servers and of the components tests run
// beside them: it discards everything unless COREKUBE_TEST_LOG is set, then
// it writes debug logs to stderr.
func Logger() *slog.Logger {
	if os.Getenv("COREKUBE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// CloseIdleConnections closes the unused connections of the client
// transport for s.Config: net/http's Server.Shutdown waits up to 5s for a
// connection that never carried a request, and concurrent clients (a
// controller's informers) leave some behind.
func (s *Server) CloseIdleConnections(tb testing.TB) {
	tb.Helper()
	rt, err := rest.TransportFor(s.Config)
	if err != nil {
		tb.Errorf("transport: %v", err)
		return
	}
	if tr, ok := rt.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections()
	} else {
		tb.Logf("transport %T cannot close idle connections", rt)
	}
}
