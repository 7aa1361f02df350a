package testserver

import (
	"context"
	"fmt"
	"os"

	"github.com/corekube/corekube/controllers/serviceaccount"
	"github.com/corekube/corekube/server"
	"k8s.io/client-go/kubernetes"
)

// StartControllers runs, against srv, the controllers without which the
// server refuses ordinary requests: the ServiceAccounts controller (pods
// need their namespace's default ServiceAccount). It acts as the server's
// own loopback client. stop ends them and returns once they have
// returned; call it before shutting srv down. Test servers from Start run
// them already; a TestMain (or a benchmark) that calls server.Start itself
// calls this.
func StartControllers(srv *server.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serviceaccount.Run(ctx, srv.LoopbackConfig(), serviceaccount.Config{Logger: Logger()}); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "testserver: service account controller:", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// startControllers runs StartControllers for s until s stops.
func startControllers(s *Server) {
	s.stopControllers = StartControllers(s.Server)
}

// StartMain starts a server for a whole test binary (TestMain), where no
// testing.TB exists: StartWith's (NewConfig, adjusted by configure when
// not nil) on etcd data in a new temporary directory, with
// StartControllers.
// stop stops the controllers and the server and removes the directory.
func StartMain(ctx context.Context, configure func(*server.Config)) (_ *Server, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "corekube-main-")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := NewConfig(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start corekube: %w", err)
	}
	s := &Server{Server: srv, Config: ClientConfig(srv.URL())}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		_ = srv.Shutdown(context.Background())
		os.RemoveAll(dir)
		return nil, nil, err
	}
	startControllers(s)
	return s, func() error {
		defer os.RemoveAll(dir)
		s.stopped = true
		s.stopControllers()
		if err := s.Shutdown(context.Background()); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	}, nil
}
