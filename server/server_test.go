package server

import (
	"context"
	"errors"
	"github.com/corekube/corekube/test/logbuf"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	etcdstore "github.com/corekube/corekube/storage/etcd"
	"github.com/corekube/corekube/storage/memory"
	"k8s.io/client-go/rest"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// memoryStore is an in-memory store (Config.Storage) for a test of what
// does not depend on etcd, closed when the test ends.
func memoryStore(t *testing.T) storage.Interface {
	st := memory.New()
	t.Cleanup(st.Close)
	return st
}

// skipShort skips a test that starts a full server under -short (as
// testserver.SkipShort, which this package cannot import).
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a full API server: skipped under -short")
	}
}

// get GETs url from srv as its admin.
func get(t *testing.T, srv *Server, url string) (int, string) {
	t.Helper()
	client, err := rest.HTTPClientFor(srv.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestExternalEtcd runs the server on an external etcd (--etcd-servers) and
// checks that /readyz and /healthz report it becoming unreachable while
// /livez stays ok.
func TestExternalEtcd(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	etcd, err := etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()

	srv, err := Start(ctx, Config{Listen: "127.0.0.1:0", EtcdServers: etcd.Endpoints(), Logger: quietLogger(), AnonymousAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	if code, body := get(t, srv, srv.URL()+"/readyz"); code != 200 || body != "ok" {
		t.Fatalf("/readyz = %d %q, want 200 ok", code, body)
	}
	if code, body := get(t, srv, srv.URL()+"/api/v1/namespaces/kube-system"); code != 200 || !strings.Contains(body, `"phase":"Active"`) {
		t.Fatalf("kube-system on external etcd: %d %s", code, body)
	}

	if err := etcd.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		code, body := get(t, srv, srv.URL()+path+"?verbose")
		if code != http.StatusInternalServerError || !strings.Contains(body, "[-]etcd failed") {
			t.Errorf("%s with etcd down = %d %q, want 500 with [-]etcd failed", path, code, body)
		}
	}
	if code, _ := get(t, srv, srv.URL()+"/livez"); code != 200 {
		t.Errorf("/livez with etcd down = %d, want 200", code)
	}
	// One check alone tells why; excluded checks are skipped, as kube's.
	if code, body := get(t, srv, srv.URL()+"/readyz/etcd"); code != http.StatusInternalServerError || !strings.HasPrefix(body, "internal server error: ") {
		t.Errorf("/readyz/etcd with etcd down = %d %q, want 500 internal server error: <reason>", code, body)
	}
	if code, body := get(t, srv, srv.URL()+"/readyz/ping"); code != 200 || body != "ok" {
		t.Errorf("/readyz/ping = %d %q, want 200 ok", code, body)
	}
	code, body := get(t, srv, srv.URL()+"/readyz?verbose&exclude=etcd&exclude=etcd-readiness&exclude=informer-sync&exclude=nope")
	want := "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\n[+]etcd-readiness excluded: ok\n[+]informer-sync excluded: ok\n" + hookLines() + "[+]shutdown ok\n" +
		"warn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
	if code != 200 || body != want {
		t.Errorf("/readyz excluding etcd = %d\n%s\nwant 200\n%s", code, body, want)
	}
}

// TestReadyzChecks: a healthy server lists kube's readyz checks.
func TestReadyzChecks(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := Start(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), UnsafeNoFsync: true, Logger: quietLogger(), AnonymousAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	code, body := get(t, srv, srv.URL()+"/readyz?verbose")
	want := "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]informer-sync ok\n" + hookLines() + "[+]shutdown ok\nreadyz check passed\n"
	if code != 200 || body != want {
		t.Errorf("/readyz?verbose = %d\n%s\nwant 200\n%s", code, body, want)
	}
	if code, body := get(t, srv, srv.URL()+"/livez?verbose"); code != 200 || body != "[+]ping ok\n[+]log ok\n"+hookLines()+"livez check passed\n" {
		t.Errorf("/livez?verbose = %d %q", code, body)
	}
}

// hookLines are the post-start hooks' lines of a healthy ?verbose report.
func hookLines() string {
	var b strings.Builder
	for _, name := range postStartHookOrder {
		b.WriteString("[+]poststarthook/" + name + " ok\n")
	}
	return b.String()
}

func TestConfigRequiresStorage(t *testing.T) {
	if _, err := Start(context.Background(), Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("Start without DataDir or EtcdServers succeeded")
	}
}

// TestPeriodicCompaction: history older than one interval is compacted.
func TestPeriodicCompaction(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := Start(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), UnsafeNoFsync: true,
		CompactionInterval: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	first, err := srv.Storage().CurrentRevision(ctx, "/pods/")
	if err != nil {
		t.Fatal(err)
	}
	// Compacting to a revision keeps that revision readable: move on.
	if _, err := srv.Storage().Create(ctx, "/test/k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := srv.Storage().List(ctx, "/namespaces/", storage.ListOptions{Revision: first})
		if errors.Is(err, storage.ErrCompacted) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("revision", first, "never compacted")
		case <-time.After(20 * time.Millisecond): // polling etcd's state, which sends no event
		}
	}
}

// TestProfiling: /debug/pprof/ is served only when Profiling is on.
func TestProfiling(t *testing.T) {
	skipShort(t)
	for _, on := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		srv, err := Start(ctx, Config{Listen: "127.0.0.1:0", Storage: memoryStore(t), Profiling: on, Logger: quietLogger(), AnonymousAuth: true})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		code, body := get(t, srv, srv.URL()+"/debug/pprof/")
		heap, _ := get(t, srv, srv.URL()+"/debug/pprof/heap?debug=1")
		if on && (code != 200 || !strings.Contains(body, "goroutine") || heap != 200) {
			t.Errorf("profiling on: /debug/pprof/ %d, heap %d:\n%.200s", code, heap, body)
		}
		if !on && (code != 404 || heap != 404) {
			t.Errorf("profiling off: /debug/pprof/ %d, heap %d, want 404", code, heap)
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		cancel()
	}
}

// TestInsecureHTTPWarns: plain HTTP only when asked for, and then with a
// warning at start-up; HTTPS otherwise.
func TestInsecureHTTPWarns(t *testing.T) {
	skipShort(t)
	for _, insecure := range []bool{false, true} {
		logs := &logbuf.Buffer{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		srv, err := Start(ctx, Config{Listen: "127.0.0.1:0", Storage: memoryStore(t), InsecureHTTP: insecure,
			AnonymousAuth: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		wantScheme := map[bool]string{false: "https://", true: "http://"}[insecure]
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "--insecure-http")
		if !strings.HasPrefix(srv.URL(), wantScheme) || warned != insecure {
			t.Errorf("insecure=%v: URL %s, warned %v", insecure, srv.URL(), warned)
		}
		if code, _ := get(t, srv, srv.URL()+"/readyz"); code != 200 {
			t.Errorf("insecure=%v: /readyz %d", insecure, code)
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestRevisionLog: the compactor's target is the newest revision seen at
// least an interval ago, never a younger one.
func TestRevisionLog(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l revisionLog
	if got := l.newestAtOrBefore(t0); got != 0 {
		t.Fatalf("empty log: %d, want 0", got)
	}
	for i := range 6 { // revisions 10, 20, ... 60 at t0, t0+1m, ... t0+5m
		l.add(t0.Add(time.Duration(i)*time.Minute), int64(10*(i+1)))
	}
	for _, c := range []struct {
		cutoff time.Duration
		want   int64
	}{
		{-time.Second, 0},
		{0, 10},
		{90 * time.Second, 20},
		{90 * time.Second, 20}, // asked again: still there
		{4 * time.Minute, 50},
		{10 * time.Minute, 60},
	} {
		if got := l.newestAtOrBefore(t0.Add(c.cutoff)); got != c.want {
			t.Errorf("cutoff t0%+v: %d, want %d", c.cutoff, got, c.want)
		}
	}
	if len(l) != 1 {
		t.Errorf("%d entries kept after the newest was taken, want 1", len(l))
	}
}
