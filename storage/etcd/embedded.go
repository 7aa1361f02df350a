package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EmbeddedConfig configures an in-process, single-member etcd.
type EmbeddedConfig struct {
	// Dir is the data directory. It is created if missing; an existing one
	// is reopened with its data.
	Dir string
	// ClientURL is where etcd serves clients. The default (empty) is a
	// unix socket, etcd.sock in Dir (mode 0600 in a 0700 directory), so
	// that only the user running corekube can reach the keys: etcd's
	// client port has no authentication of its own. "http://127.0.0.1:0"
	// serves plaintext TCP on a free port instead (any local process can
	// then read and write every key); Endpoints reports the one bound.
	ClientURL string
	// PeerURL is where etcd listens for peers. A single member never dials
	// it, but etcd insists on having one: the default is a unix socket,
	// etcd-peer.sock in Dir, reachable by nobody else either.
	PeerURL string
	// UnsafeNoFsync skips fsync: fast, and loses data on power failure.
	// Tests only.
	UnsafeNoFsync bool
	// WatchProgressInterval is how often idle watches get a progress
	// notification; zero keeps etcd's default (10 minutes).
	WatchProgressInterval time.Duration
	// Logger receives etcd's errors; nil means slog.Default().
	Logger *slog.Logger
}

// Embedded is a running in-process etcd and a client connected to it.
type Embedded struct {
	etcd      *embed.Etcd
	sockDir   string // a private directory for the sockets when Dir's path is too long; removed by Close
	client    *clientv3.Client
	endpoints []string
	lock      *fileutil.LockedFile

	closeOnce sync.Once
	closeErr  error
}

const (
	// quotaBytes is the backend size above which etcd refuses writes. etcd's
	// default (2 GiB) is small for a cluster's worth of objects; 8 GiB is
	// etcd's recommended maximum.
	quotaBytes = 8 << 30
	// snapshotCount and snapshotCatchUpEntries bound etcd's in-memory raft
	// log (see embedConfig).
	snapshotCount          = 2000
	snapshotCatchUpEntries = 1000
)

// StartEmbedded starts a single-member etcd in cfg.Dir and waits until it
// serves requests or ctx ends.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	e, err := startEmbedded(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %q: %w", cfg.Dir, err)
	}
	return e, nil
}

func startEmbedded(ctx context.Context, cfg EmbeddedConfig) (_ *Embedded, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("no data directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	// The directory holds the keys' files and the sockets: nobody else may
	// enter it, even when it existed before with a looser mode.
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict data directory: %w", err)
	}
	sockDir, private, err := socketDir(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && private {
			os.RemoveAll(sockDir)
		}
	}()
	// etcd waits forever for a data directory another etcd has open; fail
	// fast instead.
	lock, err := fileutil.TryLockFile(filepath.Join(cfg.Dir, "corekube.lock"), os.O_WRONLY|os.O_CREATE, fileutil.PrivateFileMode)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()

	// After the lock: a socket in the directory is then a stale one.
	ecfg, err := embedConfig(cfg, sockDir)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ecfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	// The listeners know the ports the kernel picked for ":0" URLs.
	endpoints := make([]string, len(e.Clients))
	for i, l := range e.Clients {
		if l.Addr().Network() == "unix" {
			// etcd creates the socket with the umask's mode; only the
			// owner may connect (the 0700 directory already says so).
			if err := os.Chmod(l.Addr().String(), 0o600); err != nil {
				return nil, fmt.Errorf("restrict etcd socket: %w", err)
			}
			endpoints[i] = "unix://" + l.Addr().String()
			continue
		}
		endpoints[i] = "http://" + l.Addr().String()
	}
	for _, p := range e.Peers {
		if p.Addr().Network() == "unix" {
			if err := os.Chmod(p.Addr().String(), 0o600); err != nil {
				return nil, fmt.Errorf("restrict etcd peer socket: %w", err)
			}
		}
	}
	client, err := newClient(endpoints, nil, zapLogger(cfg.Logger))
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := defragmentIfFragmented(ctx, client, endpoints[0], log); err != nil {
		client.Close()
		return nil, err
	}
	emb := &Embedded{etcd: e, client: client, endpoints: endpoints, lock: lock}
	if private {
		emb.sockDir = sockDir
	}
	return emb, nil
}

// maxSocketPath is the longest unix socket path Linux takes (108 bytes
// with the terminating NUL), less a margin.
const maxSocketPath = 100

// socketDir is where the unix sockets go: Dir, unless a socket's path
// there would be too long for the kernel (deep test directories), then a
// new private (0700) directory under the system's temporary one.
func socketDir(cfg EmbeddedConfig) (dir string, private bool, err error) {
	dir, err = filepath.Abs(cfg.Dir)
	if err != nil {
		return "", false, fmt.Errorf("data directory: %w", err)
	}
	if len(filepath.Join(dir, peerSocket)) <= maxSocketPath {
		return dir, false, nil
	}
	// MkdirTemp makes it 0700.
	if dir, err = os.MkdirTemp("", "corekube-etcd-"); err != nil {
		return "", false, fmt.Errorf("etcd socket directory: %w", err)
	}
	return dir, true, nil
}

// The sockets' names in the data directory.
const (
	clientSocket = "etcd.sock"
	peerSocket   = "etcd-peer.sock"
)

func embedConfig(cfg EmbeddedConfig, sockDir string) (*embed.Config, error) {
	clientURL, err := parseURL(cfg.ClientURL, filepath.Join(sockDir, clientSocket))
	if err != nil {
		return nil, fmt.Errorf("client URL: %w", err)
	}
	peerURL, err := parseURL(cfg.PeerURL, filepath.Join(sockDir, peerSocket))
	if err != nil {
		return nil, fmt.Errorf("peer URL: %w", err)
	}

	ecfg := embed.NewConfig()
	ecfg.Name = "corekube"
	ecfg.Dir = cfg.Dir
	// With port 0 the advertised URLs name no real port. Nothing dials
	// them: clients use Endpoints, and a lone member has no peers.
	// etcd wants host:port in advertised URLs, which a socket's path is
	// not: a unix listener advertises a placeholder no one dials.
	ecfg.ListenClientUrls = []url.URL{*clientURL}
	ecfg.AdvertiseClientUrls = []url.URL{advertised(clientURL)}
	ecfg.ListenPeerUrls = []url.URL{*peerURL}
	ecfg.AdvertisePeerUrls = []url.URL{advertised(peerURL)}
	ecfg.InitialCluster = ecfg.InitialClusterFromName(ecfg.Name)
	// Only read for a fresh Dir; an existing member ignores it.
	ecfg.ClusterState = embed.ClusterStateFlagNew

	// A lone member must still win an election before it serves, which
	// takes one to two election timeouts (etcd skips ahead on a fresh start
	// but not on a restart). Heartbeats only matter between peers, so short
	// timeouts cost nothing but 50 idle ticks a second, and start etcd in
	// well under a second instead of up to two (at the default 1s).
	ecfg.TickMs = 10
	ecfg.ElectionMs = 50

	// etcd keeps the raft log in memory: every entry since its last
	// snapshot plus SnapshotCatchUpEntries before it (~2.4 KiB per pod
	// write). etcd's defaults (100,000 and 5,000) grow the heap by ~230 MiB
	// under sustained writes. A lone member has no follower to catch up,
	// and a snapshot in etcd 3.5 is cheap (it commits bbolt and saves the
	// small v2 store; the keys stay in bbolt), so snapshots can come 50
	// times as often and keep 1,000 entries back: 2,000–3,000 entries,
	// ~5–7 MiB, whatever the write rate.
	ecfg.SnapshotCount = snapshotCount
	ecfg.SnapshotCatchUpEntries = snapshotCatchUpEntries

	ecfg.UnsafeNoFsync = cfg.UnsafeNoFsync
	ecfg.QuotaBackendBytes = quotaBytes
	// corekube compacts by itself; etcd must not drop history under it.
	ecfg.AutoCompactionRetention = "0"
	if cfg.WatchProgressInterval > 0 {
		ecfg.ExperimentalWatchProgressNotifyInterval = cfg.WatchProgressInterval
	}

	// Nothing but the gRPC API: no metrics or pprof listeners, no JSON gateway.
	ecfg.Metrics = "basic"
	ecfg.ListenMetricsUrls = nil
	ecfg.EnablePprof = false
	ecfg.EnableGRPCGateway = false

	ecfg.Logger = "zap"
	ecfg.LogLevel = "error"
	ecfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapLogger(cfg.Logger))
	return ecfg, nil
}

// advertised is what etcd advertises for a listen URL: the URL itself,
// or for a unix socket "unix://localhost:0", which etcd's validation
// takes and nothing dials (a lone member has no peers; its clients use
// Endpoints).
func advertised(u *url.URL) url.URL {
	if u.Scheme == "unix" {
		return url.URL{Scheme: "unix", Host: "localhost:0"}
	}
	return *u
}

// parseURL parses a listen URL; empty means a unix socket at sock. etcd
// reads a unix URL's path from its Host (the peer listener reads nothing
// else), so the path goes there.
func parseURL(s, sock string) (*url.URL, error) {
	if s == "" {
		// A stale socket of a previous run would make the listen fail;
		// the data directory's lock says no etcd is using it.
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
		return &url.URL{Scheme: "unix", Host: sock}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Port() == "" {
		return nil, fmt.Errorf("%q: want http://host:port", s)
	}
	return u, nil
}

// Client returns the client connected to this etcd. It is closed by Close.
func (e *Embedded) Client() *clientv3.Client { return e.client }

// Endpoints returns the client URLs etcd serves on, with real ports.
func (e *Embedded) Endpoints() []string { return e.endpoints }

// Err reports fatal errors of the running server, for callers that want to
// stop when etcd does.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close closes the client, stops etcd and waits until it has stopped. It
// may be called more than once.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		// The client goes first: its open watch streams would otherwise
		// hold etcd's graceful shutdown until its timeout.
		err := e.client.Close()
		e.etcd.Close() // not idempotent: it closes the Err channel
		e.lock.Close()
		if e.sockDir != "" {
			os.RemoveAll(e.sockDir)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			e.closeErr = fmt.Errorf("close embedded etcd client: %w", err)
		}
	})
	return e.closeErr
}

// ClientTLS are the files of a TLS connection to etcd, as kube-apiserver's
// --etcd-cafile, --etcd-certfile and --etcd-keyfile: the CA bundle that
// verifies the members' serving certificates (empty: the system's roots)
// and the client certificate and key the members verify (both or none).
type ClientTLS struct {
	CAFile, CertFile, KeyFile string
}

// Empty reports whether no file is set: plain connections, unless the
// endpoints are https.
func (t ClientTLS) Empty() bool { return t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" }

// Config is the client TLS configuration the files describe.
func (t ClientTLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		bundle, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(bundle) {
			return nil, fmt.Errorf("etcd CA file %s: no PEM certificate", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("the etcd client certificate and key files go together")
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// NewClient returns a client for an external etcd cluster (--etcd-servers),
// over TLS when tlsFiles says so. It connects lazily: an unreachable
// cluster shows up as ErrUnavailable from Store.Healthy rather than as an
// error here.
func NewClient(endpoints []string, tlsFiles ...ClientTLS) (*clientv3.Client, error) {
	var tlsConfig *tls.Config
	for _, t := range tlsFiles {
		if t.Empty() {
			continue
		}
		var err error
		if tlsConfig, err = t.Config(); err != nil {
			return nil, fmt.Errorf("new etcd client for %v: %w", endpoints, err)
		}
	}
	return newClient(endpoints, tlsConfig, zapLogger(nil))
}

func newClient(endpoints []string, tlsConfig *tls.Config, lg *zap.Logger) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("new etcd client: no endpoints")
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tlsConfig,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		Logger:               lg,
	})
	if err != nil {
		return nil, fmt.Errorf("new etcd client for %v: %w", endpoints, err)
	}
	return client, nil
}
