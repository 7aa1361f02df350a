package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/server"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newAPIServerCommand() *cobra.Command {
	var (
		cfg         server.Config
		etcdServers string
		kubeconfig  string
	)
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the API server alone, on an embedded etcd (--data-dir) or an external cluster (--etcd-servers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if etcdServers != "" {
				cfg.EtcdServers = strings.Split(etcdServers, ",")
			}
			if cfg.DataDir == "" && len(cfg.EtcdServers) == 0 {
				return errors.New("one of --data-dir or --etcd-servers is required")
			}
			if len(cfg.EtcdServers) == 0 && (cfg.EtcdCAFile != "" || cfg.EtcdCertFile != "" || cfg.EtcdKeyFile != "") {
				return errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers")
			}
			if cfg.CertDir == "" && cfg.DataDir != "" {
				cfg.CertDir = filepath.Join(cfg.DataDir, "pki")
			}
			if cfg.DataDir != "" {
				// Tokens outlive the process, and servers started on one
				// --data-dir sign and verify with one key.
				if err := upServiceAccountKey(&cfg); err != nil {
					return err
				}
			}
			cfg.Verbosity, _ = cmd.Flags().GetInt("v")
			return runServer(cmd.Context(), cfg, kubeconfig, false, nil)
		},
	}
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address to listen on")
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "", "directory of the embedded etcd (when --etcd-servers is not set) and of the certificates and keys (pki/); API servers on one etcd cluster started on the same directory share the CA and the ServiceAccount keys")
	cmd.Flags().StringVar(&etcdServers, "etcd-servers", "", "comma-separated client URLs of an external etcd cluster, e.g. http://a:2379,http://b:2379")
	cmd.Flags().StringVar(&cfg.EtcdCAFile, "etcd-cafile", "", "CA bundle (PEM) that verifies the etcd members' serving certificates")
	cmd.Flags().StringVar(&cfg.EtcdCertFile, "etcd-certfile", "", "client certificate (PEM) for TLS to etcd")
	cmd.Flags().StringVar(&cfg.EtcdKeyFile, "etcd-keyfile", "", "key (PEM) of --etcd-certfile")
	cmd.Flags().StringVar(&cfg.CertDir, "cert-dir", "", "directory of the certificates the server makes for itself (CA, serving, admin); default <data-dir>/pki, or in memory without --data-dir")
	cmd.Flags().StringVar(&kubeconfig, "write-kubeconfig", "", "write an admin kubeconfig for this server to this path")
	addAPIFlags(cmd.Flags(), &cfg)
	return cmd
}

// addAPIFlags registers the flags of the API's behaviour that `apiserver`
// and `up` share, named as kube-apiserver's.
func addAPIFlags(f *pflag.FlagSet, cfg *server.Config) {
	cfg.EventTTL = server.DefaultEventTTL
	f.StringVar(&cfg.EtcdPrefix, "etcd-prefix", server.DefaultEtcdPrefix,
		"etcd key prefix every object is stored under; clusters sharing one etcd need different prefixes")
	f.StringVar(&cfg.StorageMediaType, "storage-media-type", registry.MediaTypeProtobuf,
		"how objects are written to etcd: "+registry.MediaTypeProtobuf+" (kube's encoding) or "+registry.MediaTypeJSON+"; both are read")
	f.StringVar(&cfg.StorageCompression, "storage-compression", server.StorageCompressionNone,
		"how the values of pods and events are written to etcd: "+server.StorageCompressionNone+" (kube's format) or "+
			server.StorageCompressionDeflate+" (DEFLATE with a built-in dictionary: pods ~7x smaller, for large clusters; kube-apiserver cannot read them); both are read")
	cfg.CompactionInterval = server.DefaultCompactionInterval
	f.Var(zeroNever{&cfg.CompactionInterval}, "etcd-compaction-interval",
		"how often etcd history is compacted, by one of the API servers sharing the etcd (0: never)")
	f.Var(zeroNever{&cfg.EventTTL}, "event-ttl", "how long an event is kept after its last write (0: forever, as kube)")
	f.Int64Var(&cfg.DefaultNotReadyTolerationSeconds, "default-not-ready-toleration-seconds", server.DefaultTolerationSeconds,
		"tolerationSeconds of the node.kubernetes.io/not-ready:NoExecute toleration added to every pod that has none")
	f.Int64Var(&cfg.DefaultUnreachableTolerationSeconds, "default-unreachable-toleration-seconds", server.DefaultTolerationSeconds,
		"tolerationSeconds of the node.kubernetes.io/unreachable:NoExecute toleration added to every pod that has none")
	f.IntVar(&cfg.MaxRequestsInflight, "max-requests-inflight", 400,
		"with --max-mutating-requests-inflight, the seats API Priority and Fairness shares among the priority levels (their sum)")
	f.IntVar(&cfg.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", 200,
		"with --max-requests-inflight, the seats API Priority and Fairness shares among the priority levels (their sum)")
	f.BoolVar(&cfg.AnonymousAuth, "anonymous-auth", true, "let requests without credentials in as system:anonymous (group system:unauthenticated)")
	f.BoolVar(&cfg.InsecureHTTP, "insecure-http", false, "serve plain HTTP instead of HTTPS (no TLS, no client certificates): only on a trusted network")
	f.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM, may hold intermediates) instead of one from the server's own CA")
	f.StringVar(&cfg.TLSPrivateKeyFile, "tls-private-key-file", "", "key of --tls-cert-file (PEM)")
	f.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA bundle (PEM) whose client certificates authenticate: CN is the user, O the groups (default: the server's own CA)")
	f.StringVar(&cfg.KubeletClientCertFile, "kubelet-client-certificate", "", "client certificate (PEM) the server presents to kubelets (default: one of the server's own CA, user kube-apiserver-kubelet-client in system:masters)")
	f.StringVar(&cfg.KubeletClientKeyFile, "kubelet-client-key", "", "key of --kubelet-client-certificate (PEM)")
	f.StringVar(&cfg.KubeletCertificateAuthority, "kubelet-certificate-authority", "", "CA bundle (PEM) that verifies the kubelets' serving certificates (default: not verified, as kube)")
	f.StringSliceVar(&cfg.KubeletPreferredAddressTypes, "kubelet-preferred-address-types", []string{"Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP"}, "the order in which a node's address types are tried to reach its kubelet")
	f.StringSliceVar(&cfg.TLSSANs, "tls-san", nil, "extra DNS names or IP addresses for the generated serving certificate (repeatable or comma-separated)")
	f.StringVar(&cfg.TokenAuthFile, "token-auth-file", "", "file of static bearer tokens, one CSV record each: token,user,uid,\"group1,group2\"")
	f.StringVar(&cfg.AuthenticationConfigFile, "authentication-config", "", "file of an apiserver.config.k8s.io AuthenticationConfiguration: the JWT (OIDC) issuers whose tokens authenticate users")
	cfg.AuthorizationModes = server.DefaultAuthorizationModes
	f.Var(authorizationModes{&cfg.AuthorizationModes}, "authorization-mode",
		"ordered list of authorizers: AlwaysAllow, AlwaysDeny, Node (not yet implemented: no opinion), RBAC; system:masters is always allowed")
	f.StringVar(&cfg.AuditPolicyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy: which requests are audited, at which level (with --audit-log-path)")
	f.StringVar(&cfg.AuditLogPath, "audit-log-path", "", "file the audit events are written to as JSON lines; '-' for standard output")
	f.IntVar(&cfg.AuditLogMaxAge, "audit-log-maxage", 0, "days to keep rotated audit log files (0: no limit)")
	f.IntVar(&cfg.AuditLogMaxBackup, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: no limit)")
	f.IntVar(&cfg.AuditLogMaxSize, "audit-log-maxsize", 0, "megabytes an audit log file grows to before it is rotated (0: lumberjack's 100)")
	cfg.RequestTimeout, cfg.ShutdownDelayDuration = server.DefaultRequestTimeout, server.DefaultShutdownDelayDuration
	f.Var(nonNegativeDuration{&cfg.RequestTimeout, "--request-timeout"}, "request-timeout",
		"longest time a request that is not long-running (watch, log, proxy) may take before it is answered 504 and its work cancelled; a request's ?timeout= may ask for less")
	f.Var(nonNegativeDuration{&cfg.ShutdownDelayDuration, "--shutdown-delay-duration"}, "shutdown-delay-duration",
		"on SIGTERM, keep serving this long with /readyz failing (so that load balancers stop sending requests) before the server stops accepting connections")
	f.Var(negatedBool{&cfg.DisableWatchCache}, "watch-cache", "keep watch caches (LISTs and watches served from memory); false: every LIST and watch reads etcd")
	f.Lookup("watch-cache").NoOptDefVal = "true"
	f.StringSliceVar(&cfg.WatchCacheSizes, "watch-cache-sizes", nil,
		"resource[.group]#size, comma separated: a size of 0 keeps no watch cache for that resource (its LISTs and watches read etcd), any other size keeps one; over the default "+strings.Join(server.DefaultWatchCacheSizes, ","))
	f.BoolVar(&cfg.Profiling, "profiling", true, "serve Go's profiles at /debug/pprof/ (e.g. go tool pprof http://ADDR/debug/pprof/heap)")
	f.StringArrayVar(&cfg.ServiceAccountKeyFiles, "service-account-key-file", nil,
		"PEM file of RSA keys (public, or private ones' public half) that verify ServiceAccount tokens; repeatable (default: the signing key)")
	f.StringVar(&cfg.ServiceAccountSigningKeyFile, "service-account-signing-key-file", "",
		"PEM file of the RSA private key that signs ServiceAccount tokens (default with --data-dir: <data-dir>/pki/sa.key, created on first start and shared by the servers on that directory)")
	f.StringArrayVar(&cfg.ServiceAccountIssuers, "service-account-issuer", []string{server.DefaultServiceAccountIssuer},
		"iss of the ServiceAccount tokens; repeatable: the first is issued, all are accepted")
	f.StringVar(&cfg.ServiceAccountJWKSURI, "service-account-jwks-uri", "",
		"jwks_uri of the issuer discovery document (default: this server's /openid/v1/jwks)")
	f.StringSliceVar(&cfg.APIAudiences, "api-audiences", nil,
		"audiences a token must be for to authenticate here, and the default audiences of TokenRequests (default: the issuers)")
	f.DurationVar(&cfg.ServiceAccountMaxTokenExpiration, "service-account-max-token-expiration", 0,
		"longest life a TokenRequest may ask for (0: no cap)")
	f.BoolVar(&cfg.ServiceAccountExtendTokenExpiration, "service-account-extend-token-expiration", true,
		"give pod-bound tokens asked for 3607s a year of life, flagged after the hour, as kube does for the kubelet's projected tokens")
	// NodeRestriction is on as in a kubeadm cluster (kube-apiserver's own
	// default is off): with the Node authorizer, it holds nodes to their
	// own objects.
	f.StringSliceVar(&cfg.EnableAdmissionPlugins, "enable-admission-plugins", []string{"NodeRestriction"},
		"admission plugins to run besides the default ones (NamespaceLifecycle, ServiceAccount, PodSecurity, Priority, DefaultTolerationSeconds, MutatingAdmissionWebhook, ValidatingAdmissionWebhook); comma-separated, any order: they run in kube's order")
	f.StringSliceVar(&cfg.DisableAdmissionPlugins, "disable-admission-plugins", nil,
		"default admission plugins not to run; comma-separated")
	f.StringVar(&cfg.AdmissionControlConfigFile, "admission-control-config-file", "",
		"file of an apiserver.config.k8s.io/v1 AdmissionConfiguration configuring plugins (PodSecurity's defaults and exemptions)")
}

// zeroNever is a duration flag where 0 means "never", as kube-apiserver's
// --event-ttl (keep events for ever) and --etcd-compaction-interval (no
// compaction), which server.Config spells as negative (its zero value
// means the default).
type zeroNever struct{ d *time.Duration }

func (v zeroNever) String() string {
	if v.d == nil || *v.d < 0 {
		return "0s"
	}
	return v.d.String()
}

func (v zeroNever) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		d = -1
	}
	*v.d = d
	return nil
}

func (zeroNever) Type() string { return "duration" }

// nonNegativeDuration is a duration flag that refuses negative values
// with kube-apiserver's message.
type nonNegativeDuration struct {
	d    *time.Duration
	flag string
}

func (v nonNegativeDuration) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v nonNegativeDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("%s can not be negative value", v.flag)
	}
	*v.d = d
	return nil
}

func (nonNegativeDuration) Type() string { return "duration" }

// authorizationModes is --authorization-mode: kube's comma-separated list,
// checked as kube checks it.
type authorizationModes struct{ modes *[]string }

func (v authorizationModes) String() string {
	if v.modes == nil {
		return ""
	}
	return strings.Join(*v.modes, ",")
}

func (v authorizationModes) Set(s string) error {
	modes, err := authorizer.ParseModes(s)
	if err != nil {
		return err
	}
	*v.modes = modes
	return nil
}

func (authorizationModes) Type() string { return "strings" }

// negatedBool is a boolean flag stored negated: --watch-cache (default
// true) in server.Config's DisableWatchCache, whose zero value is kube's
// default.
type negatedBool struct{ b *bool }

func (v negatedBool) String() string {
	if v.b == nil {
		return "true"
	}
	return strconv.FormatBool(!*v.b)
}

func (v negatedBool) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.b = !on
	return nil
}

func (negatedBool) Type() string { return "bool" }
