package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/test/metricstest"
)

// TestPostStartHookNotFinished: a hook whose work is not done fails its
// check, shown as kube shows it (reason withheld in the report, given by
// the check's own path).
func TestPostStartHookNotFinished(t *testing.T) {
	order := []string{"first", "rbac/second"}
	hooks := newPostStartHooks(order)
	hooks.finished("first")
	hooks.finished("first") // twice is harmless
	checks := append([]healthCheck{{name: "ping", check: func(context.Context) error { return nil }}}, hooks.checks(order)...)
	slis := newHealthSLIs()

	rec := httptest.NewRecorder()
	healthHandler("readyz", checks, slis)(rec, httptest.NewRequest("GET", "/readyz", nil))
	want := "[+]ping ok\n[+]poststarthook/first ok\n[-]poststarthook/rbac/second failed: reason withheld\nreadyz check failed\n"
	if rec.Code != 500 || rec.Body.String() != want {
		t.Errorf("/readyz: %d\n%s\nwant\n%s", rec.Code, rec.Body, want)
	}
	rec = httptest.NewRecorder()
	checkHandler(checks[2])(rec, httptest.NewRequest("GET", "/readyz/poststarthook/rbac/second", nil))
	if rec.Code != 500 || rec.Body.String() != "internal server error: not finished\n" {
		t.Errorf("/readyz/poststarthook/rbac/second: %d %q", rec.Code, rec.Body)
	}

	hooks.finished("rbac/second")
	rec = httptest.NewRecorder()
	healthHandler("readyz", checks, slis)(rec, httptest.NewRequest("GET", "/readyz?verbose", nil))
	if rec.Code != 200 || rec.Body.String() != "[+]ping ok\n[+]poststarthook/first ok\n[+]poststarthook/rbac/second ok\nreadyz check passed\n" {
		t.Errorf("/readyz?verbose once finished: %d\n%s", rec.Code, rec.Body)
	}

	// kube's SLIs: the last result, and every result counted.
	rec = httptest.NewRecorder()
	slis.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/slis", nil))
	fs, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kubernetes_healthcheck", []string{"name", "poststarthook/rbac/second", "type", "readyz"}, 1},
		{"kubernetes_healthchecks_total", []string{"name", "poststarthook/rbac/second", "type", "readyz", "status", "error"}, 1},
		{"kubernetes_healthchecks_total", []string{"name", "poststarthook/rbac/second", "type", "readyz", "status", "success"}, 1},
		{"kubernetes_healthchecks_total", []string{"name", "ping", "type", "readyz", "status", "success"}, 2},
	} {
		if got, ok := fs.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if h := fs["kubernetes_healthcheck"].GetHelp(); h != "[STABLE] This metric records the result of a single healthcheck." {
		t.Errorf("help %q", h)
	}
}

// blockingWriter holds every write until released.
type blockingWriter struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	return len(p), nil
}

// TestLogCheck: the log check fails once a log write has been stuck for
// two minutes, and recovers when it completes; an idle log is healthy.
func TestLogCheck(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	w := &logWatch{now: func() time.Time { return time.Unix(0, now.Load()) }}
	advance := func(d time.Duration) { now.Add(int64(d)) }
	out := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	log := slog.New(w.wrap(slog.NewTextHandler(out, nil))).With("component", "test")

	if err := w.check(context.Background()); err != nil {
		t.Fatalf("before any write: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.Info("stuck")
	}()
	<-out.started
	advance(time.Minute)
	if err := w.check(context.Background()); err != nil {
		t.Errorf("a write under way for a minute: %v", err)
	}
	advance(2 * time.Minute)
	if err := w.check(context.Background()); err == nil || err.Error() != "logging blocked" {
		t.Errorf("a write stuck for three minutes: %v", err)
	}
	close(out.release)
	<-done
	if err := w.check(context.Background()); err != nil {
		t.Errorf("after the write: %v", err)
	}
	// Long idle, then a write that completes: healthy throughout.
	advance(time.Hour)
	slog.New(w.wrap(slog.NewTextHandler(io.Discard, nil))).Info("fine")
	if err := w.check(context.Background()); err != nil {
		t.Errorf("after an idle hour: %v", err)
	}
}

// TestEtcdProbeShared: within one report the etcd checks share one read,
// so that a dead etcd costs /readyz one timeout, not one per check; each
// report (and each check alone) reads afresh.
func TestEtcdProbeShared(t *testing.T) {
	var calls atomic.Int32
	down := errors.New("etcd down")
	probe := &etcdProbe{healthy: func(context.Context) error {
		calls.Add(1)
		return down
	}}
	checks := []healthCheck{
		{name: "etcd", check: func(ctx context.Context) error { return probe.check(ctx, etcdCheckTimeout) }},
		{name: "etcd-readiness", check: func(ctx context.Context) error { return probe.check(ctx, etcdReadinessTimeout) }},
	}
	for i := 1; i <= 2; i++ {
		rec := httptest.NewRecorder()
		healthHandler("readyz", checks, nil)(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != 500 || rec.Body.String() != "[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\nreadyz check failed\n" {
			t.Errorf("report %d: %d %q", i, rec.Code, rec.Body)
		}
		if calls.Load() != int32(i) {
			t.Errorf("after report %d: %d reads of etcd, want %d", i, calls.Load(), i)
		}
	}
	rec := httptest.NewRecorder()
	checkHandler(checks[1])(rec, httptest.NewRequest("GET", "/readyz/etcd-readiness", nil))
	if rec.Code != 500 || rec.Body.String() != "internal server error: etcd down\n" || calls.Load() != 3 {
		t.Errorf("/readyz/etcd-readiness: %d %q after %d reads", rec.Code, rec.Body, calls.Load())
	}
}
