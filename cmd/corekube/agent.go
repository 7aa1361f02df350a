package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/corekube/corekube/agent"
	"github.com/corekube/corekube/agent/bootstrap"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
)

func newAgentCommand() *cobra.Command {
	var (
		opts        agentOptions
		kubeconfig  string
		contentType string
		qps         float32
		nodeCADir   string
		// TLS bootstrapping (agent_bootstrap.go).
		bootstrapKubeconfig, certDir string
		clientCAFile                 string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run simulated node agents (kubelets) against an API server",
		Long: `Run --nodes simulated nodes, named <prefix>-<n>, in one process. Each registers
its Node, renews its Lease, reports its status and runs the pods bound to it on
a simulated container runtime, as the kubelet does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			if bootstrapKubeconfig != "" {
				rules.ExplicitPath = bootstrapKubeconfig
			}
			restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			restConfig.QPS = qps
			if qps == 0 {
				restConfig.QPS = -1
			}
			if err := setContentType(restConfig, contentType); err != nil {
				return err
			}
			cfg, err := opts.config()
			if err != nil {
				return err
			}
			if clientCAFile != "" {
				if cfg.ClientCA, err = os.ReadFile(clientCAFile); err != nil {
					return fmt.Errorf("--client-ca-file: %w", err)
				}
			}
			if bootstrapKubeconfig != "" {
				return runBootstrappedAgents(cmd.Context(), restConfig, certDir, cfg)
			}
			if nodeCADir != "" {
				if cfg.NodeConfig, err = nodeIdentitiesFromCA(nodeCADir, restConfig); err != nil {
					return err
				}
			}
			return agent.Run(cmd.Context(), restConfig, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: $KUBECONFIG, then ~/.kube/config)")
	f.IntVar(&opts.cfg.Nodes, "nodes", 1, "number of nodes to run")
	f.StringVar(&bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig of a bootstrap identity (bound to system:node-bootstrapper): each node gets its own client certificate through a CertificateSigningRequest, kept in --cert-dir, and runs as system:node:NAME (--kubeconfig is then not read)")
	f.StringVar(&certDir, "cert-dir", "", "directory of the nodes' client certificates (<cert-dir>/<node>/"+bootstrap.CertFileName+")")
	f.Float32Var(&qps, "kube-api-qps", 0, "client-side limit of requests per second to the API server (0: none)")
	addContentTypeFlag(f, &contentType)
	opts.addFlags(f)
	f.StringVar(&clientCAFile, "client-ca-file", "", "CA bundle (PEM) whose client certificates authenticate to the kubelet API, as the kubelet's (default: the CA of --kubeconfig's cluster, which signs the API server's kubelet client certificate when the server makes its own)")
	f.StringVar(&opts.cfg.TLSCertFile, "tls-cert-file", "", "the kubelet API's serving certificate (default: a self-signed one made in memory, as the kubelet's)")
	f.StringVar(&opts.cfg.TLSPrivateKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	f.StringVar(&nodeCADir, "node-identities-ca-dir", "", "benchmarks and tests: each node authenticates with a client certificate of system:node:NAME issued from the CA in this directory (ca.crt, ca.key)")
	_ = f.MarkHidden("node-identities-ca-dir")
	return cmd
}

// agentOptions are the node agent flags `agent` and `up` share.
type agentOptions struct {
	cfg                   agent.Config
	labels, taints        string
	zones                 string
	capacity, allocatable string
	debugHandlers         bool
	advertiseURL          string // the removed --kubelet-advertise-url, read for its host
}

// addFlags registers the agent flags (all but --nodes, whose default
// differs between `agent` and `up`).
func (o *agentOptions) addFlags(f *pflag.FlagSet) {
	cfg := &o.cfg
	f.StringVar(&cfg.NodeNamePrefix, "node-name-prefix", agent.DefaultNodeNamePrefix, "nodes are named <prefix>-1 ... <prefix>-<nodes>")
	f.IntVar(&cfg.FirstNode, "first-node", 1, "number of the first node (for several agent processes sharing a prefix)")
	f.StringVar(&o.labels, "node-labels", "", "labels added to the nodes: key=value,...")
	f.StringVar(&o.zones, "node-zones", "", "zones given to the nodes round robin as their "+v1.LabelTopologyZone+" label: a,b,c (node 1 in a, node 2 in b, ...)")
	f.StringVar(&o.cfg.Region, "node-region", "", "region given to every node as its "+v1.LabelTopologyRegion+" label")
	f.StringVar(&o.taints, "register-with-taints", "", "taints the nodes register with: key=value:Effect,...")
	f.StringVar(&o.capacity, "capacity", "", "node capacity, e.g. cpu=4,memory=16Gi,pods=110,ephemeral-storage=100Gi (unset keys keep these defaults)")
	f.StringVar(&o.allocatable, "allocatable", "", "node allocatable (default: capacity minus the hard memory.available threshold and 10% of ephemeral-storage)")
	f.StringVar(&cfg.PodCIDRs, "pod-cidrs", agent.DefaultPodCIDRs, "range of the nodes' pod CIDRs: node n gets the n-th /24")
	f.StringVar(&cfg.NodeIPs, "node-ips", agent.DefaultNodeIPs, "range of the nodes' InternalIPs: node n gets the n-th address")
	f.StringVar(&cfg.KubeletVersion, "kubelet-version", agent.DefaultKubeletVersion, "kubeletVersion the nodes report")
	f.StringVar(&cfg.KubeletListen, "kubelet-listen", agent.DefaultKubeletListen, "address of the kubelet API (HTTPS: container logs, /metrics, /debug/pprof/ for authenticated and authorized callers) that serves all the nodes of the process")
	f.StringVar(&cfg.KubeletAdvertiseHost, "kubelet-advertise-host", "", "host name or IP address the API server reaches the kubelet API at, reported as every node's Hostname address "+
		"(default: the host of --kubelet-listen; required when --kubelet-listen binds every interface)")
	f.DurationVar(&cfg.AuthenticationCacheTTL, "authentication-token-webhook-cache-ttl", agent.DefaultAuthenticationCacheTTL, "how long the kubelet API keeps a TokenReview's answer")
	f.DurationVar(&cfg.AuthorizationAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", agent.DefaultAuthorizationAuthorizedTTL, "how long the kubelet API keeps an allowing SubjectAccessReview's answer")
	f.DurationVar(&cfg.AuthorizationUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", agent.DefaultAuthorizationUnauthorizedTTL, "how long the kubelet API keeps a refusing SubjectAccessReview's answer")
	f.StringVar(&o.advertiseURL, "kubelet-advertise-url", "", "replaced by --kubelet-advertise-host: its host is used")
	_ = f.MarkDeprecated("kubelet-advertise-url", "use --kubelet-advertise-host (the API server reaches the kubelet API over HTTPS at the node's address and kubelet port)")
	f.DurationVar(&cfg.LeaseDuration, "lease-duration", agent.DefaultLeaseDuration, "leaseDurationSeconds of the node leases")
	f.DurationVar(&cfg.LeaseRenewInterval, "lease-renew-interval", agent.DefaultLeaseRenewInterval, "how often node leases are renewed")
	f.DurationVar(&cfg.NodeStatusUpdateFrequency, "node-status-update-frequency", agent.DefaultNodeStatusUpdateFrequency, "how often node status is computed (written when it changed)")
	f.DurationVar(&cfg.NodeStatusReportFrequency, "node-status-report-frequency", agent.DefaultNodeStatusReportFrequency, "how often node status is written when unchanged")
	f.DurationVar(&cfg.RelistPeriod, "pleg-relist-period", agent.DefaultRelistPeriod, "PLEG relist period")
	f.DurationVar(&cfg.PLEGRelistThreshold, "pleg-relist-threshold", agent.DefaultPLEGRelistThreshold, "age of the last relist after which the node is NotReady")
	f.DurationVar(&cfg.SyncFrequency, "sync-frequency", agent.DefaultSyncFrequency, "how often every pod is synced without events")
	f.DurationVar(&cfg.BackoffBase, "restart-backoff-base", agent.DefaultBackoffBase, "first container restart back-off (doubles each crash)")
	f.DurationVar(&cfg.BackoffMax, "restart-backoff-max", agent.DefaultBackoffMax, "longest container restart back-off")
	f.DurationVar(&cfg.BackoffReset, "restart-backoff-reset", agent.DefaultBackoffReset, "running this long without a crash resets the back-off")
	f.StringVar(&cfg.EvictionHard, "eviction-hard", agent.DefaultEvictionHard, "hard eviction thresholds, as the kubelet's: signal<quantity or percentage,... (memory.available is the one the simulated runtime observes; \"none\": none)")
	f.StringVar(&cfg.EvictionSoft, "eviction-soft", "", "soft eviction thresholds, as --eviction-hard; each needs an --eviction-soft-grace-period")
	f.StringVar(&cfg.EvictionSoftGracePeriod, "eviction-soft-grace-period", "", "how long each soft threshold must be met before pods are evicted: signal=duration,...")
	f.StringVar(&cfg.EvictionMinimumReclaim, "eviction-minimum-reclaim", "", "how far above a threshold that drove evictions the signal must come back before it is resolved: signal=quantity or percentage,...")
	f.DurationVar(&cfg.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", agent.DefaultEvictionPressureTransitionPeriod, "how long a node keeps a pressure condition after a threshold was last met")
	f.Int64Var(&cfg.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", 0, "most seconds a pod evicted for a soft threshold gets to stop (at least 2)")
	f.DurationVar(&cfg.EvictionMonitoringPeriod, "eviction-monitoring-period", agent.DefaultEvictionMonitoringPeriod, "how often each node's memory is checked against the eviction thresholds")
	f.IntVar(&cfg.PodWorkers, "pod-workers", 0, "pods synced at once (0: one per 20 nodes, at least 16)")
	f.IntVar(&cfg.NodeWorkers, "node-workers", 0, "node registrations, lease renewals and status writes at once (0: one per 20 nodes, at least 8)")
	f.BoolVar(&cfg.DisableEvents, "disable-events", false, "do not record events")
	f.BoolVar(&o.debugHandlers, "enable-debugging-handlers", true, "serve Go's profiles at /debug/pprof/ on the kubelet API, as the kubelet's debugging and profiling handlers (container logs are served either way: the API server's pods/log reads them)")
}

// config parses the flags that need parsing and returns the agent
// configuration.
func (o *agentOptions) config() (agent.Config, error) {
	cfg := o.cfg
	cfg.DisableProfiling = !o.debugHandlers
	// A cache TTL of 0 on the command line keeps nothing, as the
	// kubelet's; in Config, 0 is the default.
	for _, ttl := range []*time.Duration{&cfg.AuthenticationCacheTTL, &cfg.AuthorizationAuthorizedTTL, &cfg.AuthorizationUnauthorizedTTL} {
		if *ttl == 0 {
			*ttl = -1
		}
	}
	var err error
	if o.advertiseURL != "" && cfg.KubeletAdvertiseHost == "" {
		u, err := url.Parse(o.advertiseURL)
		if err != nil || u.Hostname() == "" {
			return cfg, fmt.Errorf("--kubelet-advertise-url %q: want http(s)://host[:port]", o.advertiseURL)
		}
		cfg.KubeletAdvertiseHost = u.Hostname()
	}
	if cfg.Labels, err = parseLabels(o.labels); err != nil {
		return cfg, fmt.Errorf("--node-labels: %w", err)
	}
	if cfg.Zones, err = parseZones(o.zones); err != nil {
		return cfg, fmt.Errorf("--node-zones: %w", err)
	}
	if cfg.Region != "" {
		if errs := validation.IsValidLabelValue(cfg.Region); len(errs) > 0 {
			return cfg, fmt.Errorf("--node-region: %q: %s", cfg.Region, strings.Join(errs, "; "))
		}
	}
	if cfg.Taints, err = parseTaints(o.taints); err != nil {
		return cfg, fmt.Errorf("--register-with-taints: %w", err)
	}
	if cfg.Capacity, err = parseResources(o.capacity); err != nil {
		return cfg, fmt.Errorf("--capacity: %w", err)
	}
	if cfg.Allocatable, err = parseResources(o.allocatable); err != nil {
		return cfg, fmt.Errorf("--allocatable: %w", err)
	}
	cfg.Logger = slog.Default()
	return cfg, nil
}

// parseLabels reads key=value,...
func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// parseZones reads a,b,c: label values, none empty.
func parseZones(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, z := range strings.Split(s, ",") {
		z = strings.TrimSpace(z)
		if z == "" {
			return nil, fmt.Errorf("%q has an empty zone", s)
		}
		if errs := validation.IsValidLabelValue(z); len(errs) > 0 {
			return nil, fmt.Errorf("%q: %s", z, strings.Join(errs, "; "))
		}
		out = append(out, z)
	}
	return out, nil
}

// parseTaints reads key[=value]:Effect,...
func parseTaints(s string) ([]v1.Taint, error) {
	if s == "" {
		return nil, nil
	}
	var out []v1.Taint
	for _, spec := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(strings.TrimSpace(spec), ":")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value:Effect", spec)
		}
		k, v, _ := strings.Cut(kv, "=")
		t := v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("%q: invalid effect %q", spec, effect)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseResources reads name=quantity,...
func parseResources(s string) (v1.ResourceList, error) {
	if s == "" {
		return nil, nil
	}
	out := v1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[v1.ResourceName(k)] = q
	}
	return out, nil
}
