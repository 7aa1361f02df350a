package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// childEnv, when set, makes the test binary run one start-up/memory
// measurement instead of the tests (see startup_test.go).
const childEnv = "COREKUBE_BENCH_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	// No set-up here: servers and fixtures are started lazily by the
	// benchmarks that need them, so plain `go test` and `go test -short`
	// start nothing.
	code := m.Run()
	runCleanups()
	os.Exit(code)
}

// skipShort skips the heavy benchmarks under -short.
func skipShort(b *testing.B) {
	b.Helper()
	if testing.Short() {
		b.Skip("benchmark with an embedded etcd: skipped under -short")
	}
}

// procTB is the testing.TB of servers shared by several benchmarks (and
// -count repeats), which a *testing.B cannot own: Cleanup runs when the
// server is stopped (stopLazyServer) or at the end of TestMain, and Fatal
// panics with a fatalError that startServer turns into an error. Methods
// testserver does not use are left to the embedded nil TB.
type procTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

type fatalError string

func (e fatalError) Error() string { return string(e) }

func (t *procTB) Helper()                         {}
func (t *procTB) Name() string                    { return "bench" }
func (t *procTB) Log(args ...any)                 { fmt.Fprintln(os.Stderr, args...) }
func (t *procTB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *procTB) Error(args ...any)               { t.Log(args...) }
func (t *procTB) Errorf(format string, args ...any) {
	t.Logf(format, args...)
}
func (t *procTB) Fatal(args ...any) { panic(fatalError(fmt.Sprint(args...))) }
func (t *procTB) Fatalf(format string, args ...any) {
	panic(fatalError(fmt.Sprintf(format, args...)))
}
func (t *procTB) Context() context.Context { return context.Background() }
func (t *procTB) TempDir() string {
	dir, err := os.MkdirTemp("", "corekube-bench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
func (t *procTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *procTB) runCleanups() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

var (
	procTBsMu sync.Mutex
	procTBs   []*procTB
)

func runCleanups() {
	procTBsMu.Lock()
	defer procTBsMu.Unlock()
	for i := len(procTBs) - 1; i >= 0; i-- {
		procTBs[i].runCleanups()
	}
}

// newProcTB returns a procTB whose cleanups run at the end of the process at
// the latest.
func newProcTB() *procTB {
	tb := &procTB{}
	procTBsMu.Lock()
	procTBs = append(procTBs, tb)
	procTBsMu.Unlock()
	return tb
}

// recoverFatal turns a procTB Fatal into *err.
func recoverFatal(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(fatalError)
		if !ok {
			panic(r)
		}
		*err = f
	}
}

// startServer starts a test server (testserver.Start: 127.0.0.1:0, a fresh
// temporary directory, embedded etcd without fsync) that lives until tb's
// cleanups run.
func startServer(tb *procTB) (srv *server.Server, err error) {
	defer recoverFatal(&err)
	return testserver.Start(tb).Server, nil
}

// startPlainServer starts a server like startServer but serving plain HTTP
// (--insecure-http), to show what TLS costs. Without client certificates
// its admin is a static token in system:masters (plainAdminToken).
func startPlainServer(tb *procTB) (srv *server.Server, err error) {
	defer recoverFatal(&err)
	dir, err := os.MkdirTemp("", "corekube-bench-plain-")
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(plainAdminToken+",bench-admin,bench-admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	return testserver.StartWith(tb, dir, func(c *server.Config) {
		c.InsecureHTTP = true
		c.TokenAuthFile = tokens
	}).Server, nil
}

// startAuditServer starts a server like startServer with the audit log on:
// every request at Metadata level (but the RequestReceived stage), written
// to a file, as a production cluster's policy commonly does.
func startAuditServer(tb *procTB) (srv *server.Server, err error) {
	defer recoverFatal(&err)
	dir, err := os.MkdirTemp("", "corekube-bench-audit-")
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	policy := filepath.Join(dir, "audit-policy.yaml")
	const metadata = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
	if err := os.WriteFile(policy, []byte(metadata), 0o600); err != nil {
		return nil, err
	}
	return testserver.StartWith(tb, filepath.Join(dir, "data"), func(c *server.Config) {
		c.AuditPolicyFile, c.AuditLogPath = policy, filepath.Join(dir, "audit.log")
	}).Server, nil
}

// plainAdminToken is the admin's bearer token on servers of plain HTTP.
const plainAdminToken = "bench-plain-admin-token"

// clientFor is the admin's client for url: the client certificate over
// HTTPS, the static admin token over plain HTTP.
func clientFor(url string) *http.Client {
	if strings.HasPrefix(url, "http://") {
		return newTokenClient(plainAdminToken)
	}
	return newClient()
}

// startFsyncServer starts a server like testserver.Start does but with
// fsync on, as `corekube up` runs, to show what durability costs.
func startFsyncServer(tb *procTB) (srv *server.Server, err error) {
	dir, err := os.MkdirTemp("", "corekube-bench-fsync-")
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := testserver.NewConfig(dir)
	if err != nil {
		return nil, err
	}
	cfg.UnsafeNoFsync = false
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err = server.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	// Pods need their namespace's default ServiceAccount, as on a
	// testserver; the controller stops before the server (LIFO).
	tb.Cleanup(testserver.StartControllers(srv))
	return srv, nil
}

// lazyServer is a server with a fixture, set up by the first benchmark that
// asks for it and kept for the benchmarks after it (and -count repeats).
// Only one lazyServer runs at a time: starting one stops the others, so
// that a benchmark never pays for the heap (etcd index, raft log) and the
// background work of another benchmark's server in the same process.
type lazyServer struct {
	start func(tb *procTB) (*server.Server, error) // nil: startServer
	setup func(srv *server.Server) error

	tb  *procTB
	srv *server.Server
}

var (
	lazyMu      sync.Mutex
	lazyRunning *lazyServer
)

func (l *lazyServer) get(b *testing.B) *server.Server {
	b.Helper()
	lazyMu.Lock()
	defer lazyMu.Unlock()
	if lazyRunning == l {
		return l.srv
	}
	stopLazyServerLocked()
	start := l.start
	if start == nil {
		start = startServer
	}
	l.tb = newProcTB()
	srv, err := start(l.tb)
	if err == nil && l.setup != nil {
		err = l.setup(srv)
	}
	if err != nil {
		l.tb.runCleanups()
		b.Fatalf("set-up: %v", err)
	}
	l.srv = srv
	lazyRunning = l
	return srv
}

// stopLazyServer stops the running lazyServer, if any, and collects its
// garbage.
func stopLazyServer() {
	lazyMu.Lock()
	defer lazyMu.Unlock()
	stopLazyServerLocked()
}

func stopLazyServerLocked() {
	if lazyRunning == nil {
		return
	}
	lazyRunning.tb.runCleanups()
	lazyRunning.srv = nil
	lazyRunning = nil
	runtime.GC()
}

// newClient returns an HTTP client tuned for 16+ concurrent requests to one
// host: enough idle connections that none is closed and re-dialled. It
// speaks HTTPS with the test CA and the admin's client certificate, over
// HTTP/1.1 connections of its own as separate clients would.
func newClient() *http.Client {
	return &http.Client{Transport: newTransport(testTLSConfig()), Timeout: 60 * time.Second}
}

// newTokenClient is newClient authenticating with a bearer token instead
// of a client certificate.
func newTokenClient(token string) *http.Client {
	tlsConfig, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: testserver.CA()}})
	if err != nil {
		panic(err)
	}
	return &http.Client{Transport: bearer{token: "Bearer " + token, next: newTransport(tlsConfig)}, Timeout: 60 * time.Second}
}

func newTransport(tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		TLSClientConfig:     tlsConfig,
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  *http.Transport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.token)
	return b.next.RoundTrip(r)
}

// CloseIdleConnections closes the transport's idle connections.
func (b bearer) CloseIdleConnections() { b.next.CloseIdleConnections() }

// serviceAccountToken creates ServiceAccount name in namespace ns (with
// the admin's client), binds it to the edit ClusterRole there (RBAC then
// decides its every request, as for any workload) and returns a token for
// it, as a pod's would be.
func serviceAccountToken(srv *server.Server, ns, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(testserver.ClientConfig(srv.URL()))
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// testTLSConfig trusts the test servers and presents the admin's client
// certificate.
func testTLSConfig() *tls.Config {
	c, err := rest.TLSConfigFor(testserver.ClientConfig(""))
	if err != nil {
		panic(err)
	}
	return c
}

// post sends a JSON body to url and reads the whole answer; a status
// other than want is an error that quotes the answer.
func post(ctx context.Context, c *http.Client, url string, body []byte, want int) error {
	return send(ctx, c, http.MethodPost, url, "application/json", body, want)
}

// send is post for any method and body type.
func send(ctx context.Context, c *http.Client, method, url, contentType string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s %s: %d, want %d: %s", method, url, resp.StatusCode, want, msg)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// createNamespace creates namespace name through the API.
func createNamespace(c *http.Client, base, name string) error {
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	})
	return post(context.Background(), c, base+"/api/v1/namespaces", body, http.StatusCreated)
}

// runPool runs fn for items 0..n-1 on exactly workers goroutines and
// returns each item's latency, sorted, the wall time and the first error.
func runPool(workers, n int, fn func(i int) error) (lat []time.Duration, wall time.Duration, err error) {
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	perWorker := make([][]time.Duration, workers)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make([]time.Duration, 0, n/workers+1)
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				t0 := time.Now()
				if err := fn(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					break
				}
				own = append(own, time.Since(t0))
			}
			perWorker[w] = own
		}()
	}
	wg.Wait()
	wall = time.Since(start)
	lat = make([]time.Duration, 0, n)
	for _, own := range perWorker {
		lat = append(lat, own...)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, wall, firstErr
}

// percentile returns the p-th percentile (nearest rank) of sorted lat.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	rank := int(float64(len(lat))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(lat)-1))
	return lat[rank]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
