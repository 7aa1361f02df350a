// Package etcdcluster runs a real multi-member etcd cluster for the HA and
// fault tests: each member is its own process of etcd's own server main
// (./etcd, built from the etcd version go.mod pins), on loopback ports, so
// that a test can stop, kill and restart members and lose or regain quorum
// exactly as an operator's cluster would.
package etcdcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
)

// Cluster is a running etcd cluster of separate member processes.
type Cluster struct {
	members []*Member
	tls     *TLSFiles
}

// Member is one etcd member process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	DataDir   string

	args []string
	log  string
	// health is the client WaitHealthy polls /health with.
	health *http.Client
	cmd    *exec.Cmd
	done   chan struct{}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary builds etcd's server main once per test process and returns its
// path. The Go build cache makes later builds (other test binaries) quick.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corekube-etcd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "etcd")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", binary, "./etcd")
		cmd.Dir = filepath.Dir(file)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building etcd: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binary
}

// Options adjust a cluster.
type Options struct {
	// Fsync: members sync their WAL (crash-safety tests). Off by default
	// (--unsafe-no-fsync), which is safe for tests that kill no machine.
	Fsync bool
	// ExtraArgs are passed to every member (e.g. TLS flags).
	ExtraArgs []string
	// Scheme of the client URLs: "http" (default) or "https" with TLS
	// flags in ExtraArgs.
	ClientScheme string
	// TLS serves clients over https and requires client certificates, from
	// a CA made for the cluster (Cluster.TLS gives the files a client
	// needs, as kube-apiserver's --etcd-cafile, --etcd-certfile and
	// --etcd-keyfile).
	TLS bool
}

// TLSFiles are the PEM files of a TLS client of the cluster.
type TLSFiles struct {
	// CAFile verifies the members' serving certificates.
	CAFile string
	// CertFile and KeyFile are a client certificate the members accept.
	CertFile, KeyFile string
}

// Start starts an n-member cluster, waits until every member is healthy and
// stops it when the test ends.
func Start(tb testing.TB, n int, opts Options) *Cluster {
	tb.Helper()
	Binary(tb)
	base := tb.TempDir()
	scheme := opts.ClientScheme
	if scheme == "" {
		scheme = "http"
	}
	c := &Cluster{}
	health := &http.Client{Timeout: time.Second}
	if opts.TLS {
		files, config, err := makeTLS(filepath.Join(base, "tls"))
		if err != nil {
			tb.Fatal(err)
		}
		c.tls, scheme = files, "https"
		health.Transport = &http.Transport{TLSClientConfig: config}
		opts.ExtraArgs = append([]string{
			"--cert-file", filepath.Join(base, "tls", "server.crt"), "--key-file", filepath.Join(base, "tls", "server.key"),
			"--trusted-ca-file", files.CAFile, "--client-cert-auth",
		}, opts.ExtraArgs...)
	}
	var initial []string
	for i := 0; i < n; i++ {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: scheme + "://" + FreeAddr(tb),
			PeerURL:   "http://" + FreeAddr(tb),
			DataDir:   filepath.Join(base, fmt.Sprintf("m%d", i)),
			health:    health,
		}
		m.log = m.DataDir + ".log"
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.members {
		m.args = []string{
			"--name", m.Name, "--data-dir", m.DataDir,
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "corekube-test", "--log-level", "warn",
			// Quick elections on loopback, so that fault tests recover in
			// well under a second after a leader is lost.
			"--heartbeat-interval", "50", "--election-timeout", "500",
		}
		if !opts.Fsync {
			m.args = append(m.args, "--unsafe-no-fsync")
		}
		m.args = append(m.args, opts.ExtraArgs...)
		if err := m.start(); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, m := range c.members {
		if err := m.WaitHealthy(ctx); err != nil {
			tb.Fatalf("%v\n%s", err, c.Logs())
		}
	}
	return c
}

// TLS returns the files a client needs (nil without Options.TLS).
func (c *Cluster) TLS() *TLSFiles { return c.tls }

// makeTLS writes a CA, a serving certificate for the members (loopback)
// and a client certificate into dir, and returns the client's files and
// configuration.
func makeTLS(dir string) (*TLSFiles, *tls.Config, error) {
	ca, err := pki.NewCA("etcd-test-ca")
	if err != nil {
		return nil, nil, err
	}
	if err := ca.Write(dir); err != nil {
		return nil, nil, err
	}
	serving, err := ca.Serving(pki.ServingRequest{CommonName: "etcd", Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, nil, err
	}
	client, err := ca.Client("kube-apiserver-etcd-client")
	if err != nil {
		return nil, nil, err
	}
	for name, data := range map[string][]byte{
		"server.crt": serving.CertPEM, "server.key": serving.KeyPEM,
		"client.crt": client.CertPEM, "client.key": client.KeyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, nil, err
		}
	}
	pair, err := client.TLSCertificate()
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	files := &TLSFiles{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "client.crt"), KeyFile: filepath.Join(dir, "client.key")}
	return files, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// Members returns the members in order.
func (c *Cluster) Members() []*Member { return c.members }

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.ClientURL
	}
	return out
}

// Close kills every member still running.
func (c *Cluster) Close() {
	for _, m := range c.members {
		m.Kill()
	}
}

// Logs returns every member's log, for a failing test's message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, m := range c.members {
		data, _ := os.ReadFile(m.log)
		fmt.Fprintf(&b, "--- etcd member %s ---\n%s\n", m.Name, data)
	}
	return b.String()
}

func (m *Member) start() error {
	logFile, err := os.OpenFile(m.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(binary, m.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting etcd member %s: %w", m.Name, err)
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func() {
		defer close(m.done)
		defer logFile.Close()
		_ = cmd.Wait()
	}()
	return nil
}

// Running reports whether the member's process is alive.
func (m *Member) Running() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Stop ends the member with SIGTERM (a clean stop) and waits for it.
func (m *Member) Stop() { m.signal(syscall.SIGTERM) }

// Kill ends the member with SIGKILL (a crash) and waits for it.
func (m *Member) Kill() { m.signal(syscall.SIGKILL) }

func (m *Member) signal(sig syscall.Signal) {
	if !m.Running() {
		return
	}
	_ = m.cmd.Process.Signal(sig)
	<-m.done
	m.cmd = nil
}

// Restart starts a stopped member again on its data directory. It does not
// wait for health: a lone member of a cluster without quorum never is.
func (m *Member) Restart() error {
	if m.Running() {
		return fmt.Errorf("etcd member %s is running", m.Name)
	}
	return m.start()
}

// WaitHealthy polls the member's /health (etcd's own readiness, which needs
// a leader and quorum) until it answers true or ctx ends.
func (m *Member) WaitHealthy(ctx context.Context) error {
	for {
		resp, err := m.health.Get(m.ClientURL + "/health")
		if err == nil {
			healthy := resp.StatusCode == http.StatusOK
			resp.Body.Close()
			if healthy {
				return nil
			}
		}
		if !m.Running() {
			return fmt.Errorf("etcd member %s exited", m.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s not healthy: %w", m.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling another process's state
		}
	}
}

// FreeAddr returns a loopback address with a port free at the moment.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
