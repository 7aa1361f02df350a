package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultShutdownDelayDuration is kube-apiserver's
// --shutdown-delay-duration default: none.
const DefaultShutdownDelayDuration = time.Duration(0)

// errShuttingDown is the readyz "shutdown" check's failure.
var errShuttingDown = errors.New("server is shutting down")

// shutdownState is where a graceful shutdown stands.
type shutdownState struct {
	// initiated turns /readyz's shutdown check red.
	initiated atomic.Bool

	mu    sync.Mutex
	began time.Time

	// listenerClosed is closed when the server stops accepting
	// connections.
	listenerClosed chan struct{}
}

// track returns l, noting in s when it is closed.
func (st *shutdownState) track(l net.Listener) net.Listener {
	st.listenerClosed = make(chan struct{})
	return &closeNotifyListener{Listener: l, closed: st.listenerClosed}
}

type closeNotifyListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closeNotifyListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// check is /readyz's "shutdown" check: it fails from the moment a
// shutdown begins, as kube's.
func (st *shutdownState) check(context.Context) error {
	if st.initiated.Load() {
		return errShuttingDown
	}
	return nil
}

// BeginShutdown is the first step of kube-apiserver's graceful shutdown
// (on SIGTERM): /readyz fails at once while every request is still
// served, for the ShutdownDelayDuration (time for load balancers to take
// the server out of rotation) or until ctx ends. Calling it again waits
// for the same delay, not a new one.
func (s *Server) BeginShutdown(ctx context.Context) {
	s.shutdown.mu.Lock()
	if s.shutdown.began.IsZero() {
		s.shutdown.began = time.Now()
		s.shutdown.initiated.Store(true)
		s.log.Info("shutdown initiated: /readyz fails from now on", "shutdownDelayDuration", s.cfg.ShutdownDelayDuration)
	}
	until := s.shutdown.began.Add(s.cfg.ShutdownDelayDuration)
	s.shutdown.mu.Unlock()
	wait := time.Until(until)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Shutdown shuts the server down gracefully, as kube-apiserver: /readyz
// fails and the shutdown delay passes (BeginShutdown), then the server
// stops accepting connections, lets the requests in flight finish (for
// at most ShutdownTimeout; they have their own deadlines too), ends
// watches and other long-running requests cleanly (their responses end
// as a normal end of stream, so clients simply watch again elsewhere),
// and finally stops the caches and etcd.
func (s *Server) Shutdown(ctx context.Context) error {
	s.BeginShutdown(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	s.http.SetKeepAlivesEnabled(false)
	stopped := make(chan error, 1)
	go func() { stopped <- s.http.Shutdown(ctx) }()
	// Once no new request can reach this server, the connections that
	// never carried one (http.Server.Shutdown waits for them) are closed
	// and the long-running requests end.
	select {
	case <-s.shutdown.listenerClosed:
	case <-ctx.Done():
	}
	s.closeFresh()
	s.endLongRunning()
	err := <-stopped
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("requests still running at the end of the shutdown timeout are cut", "shutdownTimeout", s.cfg.ShutdownTimeout)
		// The listener is closed already; Close only cuts connections.
		_ = s.http.Close()
		err = nil
	}
	s.wg.Wait()
	return errors.Join(err, s.close(), s.serveErr())
}
