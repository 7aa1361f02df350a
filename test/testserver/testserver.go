// Package testserver starts a real corekube API server in-process on
// 127.0.0.1:0 over a real embedded etcd in a temporary directory, for
// integration tests and benchmarks. The servers serve HTTPS as `up` does;
// every server a test process starts has its certificates from one test CA,
// so that one client (Config, HTTPClient: the admin, kubernetes-admin in
// system:masters, by client certificate) works with all of them.
package testserver

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"github.com/corekube/corekube/test/logbuf"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/storage/memory"
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

// StartMemory starts a server over an in-memory store (storage/memory)
// instead of etcd, and stops it (and the store) when the test ends: for
// tests of what runs on the API (controllers, the scheduler), not of
// etcd. Unlike the etcd servers it runs under -short too.
func StartMemory(tb testing.TB) *Server {
	tb.Helper()
	return StartMemoryWith(tb, nil)
}

// StartMemoryWith is StartMemory after configure (if not nil) has adjusted
// the server's configuration.
func StartMemoryWith(tb testing.TB, configure func(*server.Config)) *Server {
	tb.Helper()
	st := memory.New()
	tb.Cleanup(st.Close) // after the server's Stop, registered below
	return start(tb, tb.TempDir(), func(c *server.Config) {
		c.Storage = st
		if configure != nil {
			configure(c)
		}
	})
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
	SkipShort(tb)
	return start(tb, dir, configure)
}

func start(tb testing.TB, dir string, configure func(*server.Config)) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := NewConfig(dir)
	if err != nil {
		tb.Fatal(err)
	}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("start corekube: %v", err)
	}
	s := &Server{Server: srv, Config: ClientConfig(srv.URL())}
	s.Client, err = kubernetes.NewForConfig(s.Config)
	if err != nil {
		tb.Fatal(err)
	}
	startControllers(s)
	tb.Cleanup(func() { s.Stop(tb) })
	return s
}

// SkipShort skips the test under -short: a full API server over a real
// etcd (StartWith calls it), a corekube process, or a test that is slow
// for other reasons (node agents) is what `make test-short` leaves out,
// so that it stays a quick subset; `make test` runs everything.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a full API server or a process: skipped under -short")
	}
}

// ShortMain is for the TestMain of a package whose every test runs against
// servers it starts up front: under -short it reports why nothing runs
// and returns true, and TestMain should exit 0 without starting anything.
// It parses the flags (testing.Short needs them).
func ShortMain(pkg string) bool {
	flag.Parse()
	if !testing.Short() {
		return false
	}
	fmt.Fprintf(os.Stderr, "%s: every test starts a full API server or a process: skipped under -short\n", pkg)
	return true
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

// NewConfig is the configuration of a test server on the etcd data in dir
// (a real embedded etcd without fsync), listening on 127.0.0.1:0 over TLS
// with certificates from the test CA kept in dir/pki. Callers adjust it
// before server.Start (an external etcd, plain HTTP, ...).
func NewConfig(dir string) (server.Config, error) {
	cfg := server.Config{
		Listen:        "127.0.0.1:0",
		DataDir:       dir,
		UnsafeNoFsync: true,
		Logger:        Logger(),
		AnonymousAuth: true,
		CertDir:       filepath.Join(dir, "pki"),
	}
	ca, err := testCA()
	if err != nil {
		return cfg, err
	}
	if err := ca.ca.Write(cfg.CertDir); err != nil {
		return cfg, fmt.Errorf("test CA: %w", err)
	}
	return cfg, nil
}

// ClientConfig is the admin's client config for a test server at url.
func ClientConfig(url string) *rest.Config {
	ca, err := testCA()
	if err != nil {
		// NewConfig failed before any server could start with it.
		panic(err)
	}
	return &rest.Config{Host: url, QPS: -1, TLSClientConfig: rest.TLSClientConfig{
		CAData: ca.ca.PEM, CertData: ca.admin.CertPEM, KeyData: ca.admin.KeyPEM,
	}}
}

// HTTPClient is an HTTP client that trusts the test servers and
// authenticates to them as the admin, shared by the test process.
func HTTPClient() *http.Client {
	sharedHTTP.once.Do(func() {
		c := ClientConfig("")
		sharedHTTP.client, sharedHTTP.err = rest.HTTPClientFor(c)
	})
	if sharedHTTP.err != nil {
		panic(fmt.Errorf("test HTTP client: %w", sharedHTTP.err))
	}
	return sharedHTTP.client
}

// AnonymousHTTPClient trusts the test servers and sends no credentials,
// shared by the test process.
func AnonymousHTTPClient() *http.Client {
	sharedAnonymousHTTP.once.Do(func() {
		ca, err := testCA()
		if err != nil {
			sharedAnonymousHTTP.err = err
			return
		}
		sharedAnonymousHTTP.client, sharedAnonymousHTTP.err = rest.HTTPClientFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: ca.ca.PEM}})
	})
	if sharedAnonymousHTTP.err != nil {
		panic(fmt.Errorf("test HTTP client: %w", sharedAnonymousHTTP.err))
	}
	return sharedAnonymousHTTP.client
}

// testAuthority is the test process's CA and the admin's certificate.
type testAuthority struct {
	ca    *pki.CA
	admin pki.KeyPair
}

var (
	sharedCA struct {
		once sync.Once
		ca   *testAuthority
		err  error
	}
	sharedHTTP, sharedAnonymousHTTP struct {
		once   sync.Once
		client *http.Client
		err    error
	}
)

// CA is the PEM of the test CA.
func CA() []byte {
	ca, err := testCA()
	if err != nil {
		panic(err)
	}
	return ca.ca.PEM
}

// IssueClient issues a client certificate of the test CA for user name in
// groups (to test other users than the admin).
func IssueClient(name string, groups ...string) (pki.KeyPair, error) {
	ca, err := testCA()
	if err != nil {
		return pki.KeyPair{}, err
	}
	return ca.ca.Client(name, groups...)
}

// Environment variables that hand the test CA to a child process (ChildEnv).
const (
	caCertEnv = "COREKUBE_TEST_CA_CERT"
	caKeyEnv  = "COREKUBE_TEST_CA_KEY"
)

// ChildEnv is the environment that makes a child test process (a benchmark
// client in a process of its own) use this process's test CA: its
// HTTPClient and ClientConfig then work with this process's servers.
func ChildEnv() []string {
	ca, err := testCA()
	if err != nil {
		panic(err)
	}
	key, err := ca.ca.KeyPEM()
	if err != nil {
		panic(err)
	}
	return []string{caCertEnv + "=" + string(ca.ca.PEM), caKeyEnv + "=" + string(key)}
}

func testCA() (*testAuthority, error) {
	sharedCA.once.Do(func() {
		var ca *pki.CA
		var err error
		if cert := os.Getenv(caCertEnv); cert != "" {
			ca, err = pki.ParseCA([]byte(cert), []byte(os.Getenv(caKeyEnv)))
		} else {
			ca, err = pki.NewCA("corekube-test-ca")
		}
		if err != nil {
			sharedCA.err = err
			return
		}
		admin, err := ca.Client(server.AdminUser, user.SystemPrivilegedGroup)
		if err != nil {
			sharedCA.err = err
			return
		}
		sharedCA.ca = &testAuthority{ca: ca, admin: admin}
	})
	return sharedCA.ca, sharedCA.err
}

// SyncBuffer is a log destination that a server's logger or a process
// writes while the test reads it.
type SyncBuffer = logbuf.Buffer

// KubeletHTTPClient is an HTTP client for node agents' kubelet APIs: it
// presents a client certificate of the test CA for user name in groups
// (the CA the agents of test servers trust) and, as kube-apiserver without
// --kubelet-certificate-authority, does not verify the agents'
// self-signed serving certificates. No name: no client certificate.
func KubeletHTTPClient(name string, groups ...string) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // the agents' certificates are self-signed
	if name != "" {
		pair, err := IssueClient(name, groups...)
		if err != nil {
			return nil, err
		}
		cert, err := pair.TLSCertificate()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// AdminKubeletHTTPClient is KubeletHTTPClient as the admin (system:masters).
func AdminKubeletHTTPClient() *http.Client {
	c, err := KubeletHTTPClient(server.AdminUser, "system:masters")
	if err != nil {
		panic(fmt.Errorf("kubelet HTTP client: %w", err))
	}
	return c
}
