package server

import (
	"errors"
	"fmt"
	"github.com/corekube/corekube/admission"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/events"
	"github.com/corekube/corekube/storage"
)

// Defaults of Config that the command line shows.
const (
	// DefaultEventTTL is how long events are kept (kube's --event-ttl).
	DefaultEventTTL = events.DefaultTTL
	// DefaultTolerationSeconds is the tolerationSeconds of the not-ready
	// and unreachable tolerations pods get.
	DefaultTolerationSeconds = admission.DefaultTolerationSecondsValue
)

// Config configures an API server.
type Config struct {
	// Listen is the address to serve on; port 0 picks a free port.
	Listen string
	// DataDir holds the embedded etcd's data (when EtcdServers is empty).
	DataDir string
	// EtcdServers are the client URLs of an external etcd cluster; empty
	// means run etcd embedded in DataDir.
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the TLS files of the
	// connection to EtcdServers (kube-apiserver's --etcd-cafile,
	// --etcd-certfile, --etcd-keyfile).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// EtcdPrefix is the etcd key every object is stored under (kube's
	// --etcd-prefix; empty means DefaultEtcdPrefix), so that clusters can
	// share one etcd with different prefixes.
	EtcdPrefix string
	// StorageMediaType is how objects are written to etcd (kube's
	// --storage-media-type): registry.MediaTypeProtobuf (the default, as
	// kube) or registry.MediaTypeJSON. Both are read, whatever is written.
	StorageMediaType string
	// StorageCompression is how the values of pods and events are
	// compressed in etcd: StorageCompressionNone (the default, kube's
	// format) or StorageCompressionDeflate (DEFLATE with a built-in
	// dictionary: pods ~7x smaller; for large clusters; kube-apiserver cannot
	// read such values). Both are read, whatever is written.
	StorageCompression string
	// Storage, when set, is the store the server runs on instead of etcd
	// (DataDir and EtcdServers are then unused). No flag sets it: tests
	// pass an in-memory one (storage/memory) where etcd is not what they
	// test. The etcd compactor and etcd's storage metrics are off then.
	Storage storage.Interface
	// UnsafeNoFsync makes the embedded etcd skip fsync. Tests only.
	UnsafeNoFsync bool
	// Logger is the server's logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics is the registry /metrics serves; nil means a new one. `up`
	// passes one registry to the server and to every component it runs in
	// the process, so that one /metrics serves them all. The server
	// registers its own collectors (and Go's and the process's) in it.
	Metrics *prometheus.Registry
	// ShutdownTimeout bounds the graceful shutdown of open requests
	// (default RequestTimeout, as kube).
	ShutdownTimeout time.Duration
	// RequestTimeout is kube-apiserver's --request-timeout: the most a
	// request that is not long-running (not a watch, log or proxy) may
	// take before it is answered 504 and its work cancelled (default a
	// minute; a request's ?timeout= may shorten it).
	RequestTimeout time.Duration
	// ShutdownDelayDuration is kube-apiserver's --shutdown-delay-duration:
	// how long the server keeps serving after a shutdown began (with
	// /readyz failing) before it stops accepting requests (default 0).
	ShutdownDelayDuration time.Duration
	// WatchCacheSize is how many recent events each resource's watch cache
	// keeps for watches from a past resourceVersion; 0 means the default.
	WatchCacheSize int
	// DisableWatchCache is kube-apiserver's --watch-cache=false: no
	// resource keeps a watch cache (every LIST reads etcd, every watch is
	// an etcd watch of its own).
	DisableWatchCache bool
	// WatchCacheSizes is kube-apiserver's --watch-cache-sizes,
	// "resource[.group]#size" each: a size of 0 keeps no watch cache for
	// that resource, any other size keeps one (sizes are not used, as in
	// kube). They apply over DefaultWatchCacheSizes (events#0 and events.events.k8s.io#0, as kube).
	WatchCacheSizes []string
	// BookmarkInterval is how often watches that allow bookmarks get one
	// (default a minute, as kube).
	BookmarkInterval time.Duration
	// EventTTL is how long an event is kept after its last write, as
	// kube-apiserver's --event-ttl (default an hour; negative keeps events
	// forever).
	EventTTL time.Duration
	// DefaultNotReadyTolerationSeconds and
	// DefaultUnreachableTolerationSeconds are the tolerationSeconds the
	// DefaultTolerationSeconds admission plugin gives pods for the
	// not-ready and unreachable NoExecute taints (0 means 300, as kube's
	// --default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// Profiling serves Go's profiles at /debug/pprof/ (kube-apiserver's
	// --profiling, which the command line turns on by default as kube).
	Profiling bool
	// Verbosity is kube's -v: from 3 on every request's log line (kube's
	// httplog) is logged at info level; below, at debug level. Slow
	// requests are logged with their trace at info level whatever it is.
	Verbosity int
	// SlowRequestThreshold is the latency above which a request that is
	// not long-running is logged with its trace at info level (default
	// 1s; kube logs its handlers' traces over 500 ms).
	SlowRequestThreshold time.Duration
	// CompactionInterval is how often etcd history is compacted: each time
	// to the revision of the previous round, so that at least one interval
	// of history stays, by one of the servers sharing the etcd (default 5
	// minutes, as kube's --etcd-compaction-interval; negative disables).
	CompactionInterval time.Duration
	// IdentityLease tunes the apiserver identity lease (zero values:
	// kube's).
	IdentityLease IdentityLeaseConfig
	// MaxRequestsInflight and MaxMutatingRequestsInflight are
	// kube-apiserver's --max-requests-inflight and
	// --max-mutating-requests-inflight: API Priority and Fairness shares
	// their sum among the priority levels (0 means kube's defaults, 400
	// and 200).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// AnonymousAuth lets requests without credentials in as
	// system:anonymous (kube-apiserver's --anonymous-auth, on by default
	// on the command line); off, they are answered 401.
	AnonymousAuth bool

	// Serving: HTTPS (HTTP/2 by ALPN) unless InsecureHTTP.

	// InsecureHTTP serves plain HTTP, with no client certificates: anyone
	// who reaches the port is whoever they claim by token, or anonymous.
	InsecureHTTP bool
	// CertDir keeps the certificates the server makes for itself (the CA,
	// the serving certificate, the admin's client certificate), reused on
	// restart; empty keeps them in memory for the life of the process.
	CertDir string
	// TLSCertFile and TLSPrivateKeyFile are an operator's serving
	// certificate (kube's --tls-cert-file, --tls-private-key-file) instead
	// of one from the server's CA.
	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile is the bundle of CAs whose client certificates
	// authenticate (kube's --client-ca-file); empty trusts the server's CA.
	ClientCAFile string
	// TLSSANs are extra names or addresses for the generated serving
	// certificate (beside the listen address, localhost and 127.0.0.1).
	TLSSANs []string
	// KubeletClientCertFile and KubeletClientKeyFile are the client
	// certificate the server presents to kubelets (kube's
	// --kubelet-client-certificate, --kubelet-client-key); without them the
	// server's CA issues one (CN kube-apiserver-kubelet-client, group
	// system:masters, as kubeadm's; kept in CertDir), which agents trust
	// by default. KubeletCertificateAuthority verifies the kubelets'
	// serving certificates (--kubelet-certificate-authority; empty: not
	// verified, as kube). KubeletPreferredAddressTypes is
	// --kubelet-preferred-address-types (empty: kube's default order).
	KubeletClientCertFile        string
	KubeletClientKeyFile         string
	KubeletCertificateAuthority  string
	KubeletPreferredAddressTypes []string
	// Token authenticators (issue 10), after the loopback token in kube's
	// order.
	//
	// TokenAuthFile is kube-apiserver's --token-auth-file: static bearer
	// tokens, one CSV record each (token,user,uid,"group1,group2").
	TokenAuthFile string
	// AuthenticationConfigFile is kube-apiserver's --authentication-config:
	// an apiserver.config.k8s.io AuthenticationConfiguration whose jwt
	// issuers (OIDC) authenticate bearer tokens.
	AuthenticationConfigFile string
	// ServiceAccount tokens, as kube-apiserver's flags of the same names.
	//
	// ServiceAccountKeyFiles are PEM files whose RSA keys (public, or the
	// public half of private ones) verify tokens
	// (--service-account-key-file); empty: the signing key's.
	ServiceAccountKeyFiles []string
	// ServiceAccountSigningKeyFile is the PEM RSA private key that signs
	// tokens (--service-account-signing-key-file); empty: a key generated
	// in memory, whose tokens die with the process (tests).
	ServiceAccountSigningKeyFile string
	// ServiceAccountIssuers are the accepted iss of tokens; the first is
	// the one tokens are issued as (--service-account-issuer; empty:
	// DefaultServiceAccountIssuer).
	ServiceAccountIssuers []string
	// ServiceAccountJWKSURI is the jwks_uri the discovery document names
	// (--service-account-jwks-uri; empty: this server's /openid/v1/jwks).
	ServiceAccountJWKSURI string
	// APIAudiences are the audiences a token must be for to authenticate
	// to this server, and the default of TokenRequests (--api-audiences;
	// empty: the issuers).
	APIAudiences []string
	// ServiceAccountMaxTokenExpiration caps what a TokenRequest may ask
	// for (--service-account-max-token-expiration; 0: no cap).
	ServiceAccountMaxTokenExpiration time.Duration
	// ServiceAccountExtendTokenExpiration gives pod-bound tokens asked for
	// 3607s a year of life (flagged after the hour), as kube's
	// --service-account-extend-token-expiration (on by default on the
	// command line).
	ServiceAccountExtendTokenExpiration bool

	// Admission plugins (issue 12), as kube-apiserver's flags of the same
	// names.
	//
	// EnableAdmissionPlugins are plugins to run besides the default ones
	// (--enable-admission-plugins); DisableAdmissionPlugins are default
	// ones not to run (--disable-admission-plugins). Plugins run in kube's
	// order whatever the order given; an unknown name fails the start.
	EnableAdmissionPlugins  []string
	DisableAdmissionPlugins []string
	// AdmissionControlConfigFile is an apiserver.config.k8s.io/v1
	// AdmissionConfiguration configuring plugins by name (PodSecurity's
	// defaults and exemptions) (--admission-control-config-file).
	AdmissionControlConfigFile string
	// Authorization (issue 11).
	//
	// AuthorizationModes are kube-apiserver's --authorization-mode, in
	// order: AlwaysAllow, AlwaysDeny, Node, RBAC; empty means Node,RBAC
	// (DefaultAuthorizationModes, a kubeadm cluster's). system:masters is
	// always allowed, before any mode.
	AuthorizationModes []string

	// Audit (kube-apiserver's --audit-* flags): events of the levels
	// AuditPolicyFile's rules give, written as JSON lines to AuditLogPath
	// ("-" for standard output), rotated at AuditLogMaxSize megabytes,
	// keeping AuditLogMaxBackup old files for AuditLogMaxAge days (0: no
	// limit). Both the policy and the path are needed for a log.
	AuditPolicyFile   string
	AuditLogPath      string
	AuditLogMaxAge    int
	AuditLogMaxBackup int
	AuditLogMaxSize   int
}

// The values of Config.StorageCompression.
const (
	StorageCompressionNone    = "none"
	StorageCompressionDeflate = "deflate"
)

// DefaultCompactionInterval is kube-apiserver's --etcd-compaction-interval.
const DefaultCompactionInterval = 5 * time.Minute

// DefaultEtcdPrefix is kube-apiserver's --etcd-prefix.
const DefaultEtcdPrefix = "/registry"

// DefaultServiceAccountIssuer is the token issuer when none is configured,
// kubeadm's.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

func (c *Config) setDefaults() error {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:6443"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = DefaultCompactionInterval
	}
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = DefaultEtcdPrefix
	}
	c.IdentityLease.setDefaults()
	if c.MaxRequestsInflight == 0 && c.MaxMutatingRequestsInflight == 0 {
		c.MaxRequestsInflight, c.MaxMutatingRequestsInflight = 400, 200
	}
	if c.MaxRequestsInflight < 0 || c.MaxMutatingRequestsInflight < 0 {
		return fmt.Errorf("invalid configuration: MaxRequestsInflight=%d and MaxMutatingRequestsInflight=%d; they must add up to something positive", c.MaxRequestsInflight, c.MaxMutatingRequestsInflight)
	}
	if c.EventTTL == 0 {
		c.EventTTL = events.DefaultTTL
	}
	if c.SlowRequestThreshold <= 0 {
		c.SlowRequestThreshold = time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = c.RequestTimeout
	}
	if len(c.ServiceAccountIssuers) == 0 {
		c.ServiceAccountIssuers = []string{DefaultServiceAccountIssuer}
	}
	if len(c.APIAudiences) == 0 {
		c.APIAudiences = c.ServiceAccountIssuers
	}
	if err := registry.CheckStorageMediaType(c.StorageMediaType); err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	switch c.StorageCompression {
	case "":
		c.StorageCompression = StorageCompressionNone
	case StorageCompressionNone, StorageCompressionDeflate:
	default:
		return fmt.Errorf("server config: storage compression %q: must be %q or %q", c.StorageCompression, StorageCompressionNone, StorageCompressionDeflate)
	}
	if c.Storage == nil && len(c.EtcdServers) == 0 && c.DataDir == "" {
		return errors.New("server config: DataDir or EtcdServers is required")
	}
	return nil
}
