package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Config configures the node agents of one process. Zero values take the
// kubelet's defaults (see Default*).
type Config struct {
	// NodeNamePrefix names the nodes <prefix>-1 ... <prefix>-<Nodes>.
	NodeNamePrefix string
	// Nodes is how many nodes this process runs.
	Nodes int
	// FirstNode is the number of the first node (default 1), so that several
	// agent processes can share a prefix: nodes FirstNode..FirstNode+Nodes-1.
	FirstNode int

	// Capacity is every node's capacity: cpu, memory, pods,
	// ephemeral-storage (hugepages are reported as 0).
	Capacity v1.ResourceList
	// Allocatable defaults to Capacity minus the hard eviction thresholds
	// of memory.available (quantity or percentage) and nodefs.available
	// (ephemeral-storage 10%).
	Allocatable v1.ResourceList
	// Labels are added to the kubelet's own labels (--node-labels).
	Labels map[string]string
	// Zones, when set, give node number n the topology.kubernetes.io/zone
	// label Zones[(n-1) % len(Zones)] (--node-zones), so that topology
	// spread constraints and zone anti-affinity have domains, as a cloud
	// provider labels the nodes of a real cluster.
	Zones []string
	// Region, when set, is every node's topology.kubernetes.io/region
	// label (--node-region).
	Region string
	// Taints are registered with the node (--register-with-taints).
	Taints []v1.Taint

	// PodCIDRs is the range the nodes' pod CIDRs (one /24 each, by node
	// number) come from. Default 10.244.0.0/14 (1,024 nodes).
	PodCIDRs string
	// NodeIPs is the range node N's InternalIP is the Nth address of.
	// Default 172.20.0.0/14.
	NodeIPs string

	// KubeletVersion is reported in nodeInfo (default v1.32.3).
	KubeletVersion string

	// KubeletListen is where the process's one kubelet API server (container
	// logs, metrics and profiles for all its nodes) listens (default
	// 127.0.0.1:0, a free port). It serves HTTPS and answers only callers
	// that authenticate (a client certificate of ClientCA, or a bearer token
	// the API server accepts in a TokenReview) and that the API server
	// authorizes (SubjectAccessReview on nodes/proxy, nodes/metrics...), as
	// the kubelet with webhook authentication and authorization.
	KubeletListen string
	// KubeletAdvertiseHost is the host name or IP address the API server
	// reaches the kubelet API at: every node of the process reports it as
	// its Hostname address (the nodes all run on this one machine), which
	// kube-apiserver's default --kubelet-preferred-address-types tries
	// first, with the listening port as status.daemonEndpoints. Default:
	// KubeletListen's host; required when that is every interface (0.0.0.0,
	// ::, or empty), as no single address of the machine can be told then.
	KubeletAdvertiseHost string
	// ClientCA is the PEM bundle of the CAs whose client certificates
	// authenticate to the kubelet API (the kubelet's --client-ca-file);
	// nil means ClusterCA, the CA the API server's own certificates come
	// from (the API server's kubelet client certificate among them).
	ClientCA []byte
	// TLSCertFile and TLSPrivateKeyFile are the kubelet API's serving
	// certificate (the kubelet's --tls-cert-file, --tls-private-key-file);
	// without them it makes a self-signed one in memory, as the kubelet
	// does (the API server does not verify it unless given
	// --kubelet-certificate-authority).
	TLSCertFile, TLSPrivateKeyFile string
	// AuthenticationCacheTTL is how long a TokenReview's answer is kept
	// (the kubelet's --authentication-token-webhook-cache-ttl, 2m);
	// AuthorizationAuthorizedTTL and AuthorizationUnauthorizedTTL how long
	// an allowed or refused SubjectAccessReview is
	// (--authorization-webhook-cache-authorized-ttl, 5m, and
	// --authorization-webhook-cache-unauthorized-ttl, 30s). Zero takes the
	// default; negative keeps nothing.
	AuthenticationCacheTTL       time.Duration
	AuthorizationAuthorizedTTL   time.Duration
	AuthorizationUnauthorizedTTL time.Duration

	// LeaseDuration is the node Lease's leaseDurationSeconds (40s).
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often the Lease is renewed (10s).
	LeaseRenewInterval time.Duration
	// NodeStatusUpdateFrequency is how often node status is computed (10s);
	// it is written when it changed.
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is how often node status is written when
	// nothing changed (5m).
	NodeStatusReportFrequency time.Duration

	// RelistPeriod is the PLEG's relist period (1s).
	RelistPeriod time.Duration
	// PLEGRelistThreshold is how old the last relist may be before the
	// PLEG, and with it the node, is unhealthy (3m).
	PLEGRelistThreshold time.Duration
	// SyncFrequency is how often every pod is synced even without events
	// (1m).
	SyncFrequency time.Duration

	// BackoffBase, BackoffMax and BackoffReset shape the restart back-off:
	// 10s, 20s, 40s ... capped at 5m, forgotten after 10m without a crash.
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	BackoffReset time.Duration

	// EvictionHard, EvictionSoft and EvictionSoftGracePeriod are the
	// kubelet's --eviction-hard (default DefaultEvictionHard),
	// --eviction-soft and --eviction-soft-grace-period, in their flag
	// syntax: "memory.available<100Mi,nodefs.available<10%" and
	// "memory.available=1m30s". EvictionHard "none" sets no hard
	// threshold. Only memory.available is observed (see eviction.go).
	EvictionHard            string
	EvictionSoft            string
	EvictionSoftGracePeriod string
	// EvictionMinimumReclaim is --eviction-minimum-reclaim
	// ("memory.available=500Mi"): once a threshold drove evictions, the
	// signal must come back above it by this much before it is resolved.
	EvictionMinimumReclaim string
	// EvictionPressureTransitionPeriod is how long a node keeps a pressure
	// condition after a threshold was last met (5m).
	EvictionPressureTransitionPeriod time.Duration
	// EvictionMaxPodGracePeriod is the most seconds a pod evicted for a
	// soft threshold gets to stop (--eviction-max-pod-grace-period, 0;
	// or the pod's terminationGracePeriodSeconds when shorter; the kubelet
	// gives every container at least 2s).
	EvictionMaxPodGracePeriod int64
	// EvictionMonitoringPeriod is how often each node's eviction manager
	// observes its memory (10s, the kubelet's housekeeping interval).
	EvictionMonitoringPeriod time.Duration

	// PodWorkers is how many pods are synced at once (0: one per
	// NodesPerPodWorker nodes, at least 16); NodeWorkers how
	// many node registrations, lease renewals and status writes run at once
	// (0: one per NodesPerNodeWorker nodes, at least 8); EventWorkers how
	// many events are written at once (4).
	PodWorkers   int
	NodeWorkers  int
	EventWorkers int
	// DisableEvents turns event recording off (for benchmarks).
	DisableEvents bool
	// DisableProfiling stops the kubelet API from serving Go's profiles at
	// /debug/pprof/ (served by default, as the kubelet does with its
	// enableDebuggingHandlers and enableProfilingHandler defaults).
	DisableProfiling bool

	Logger *slog.Logger
	// ClusterCA is the PEM of the CA the API server's certificate is
	// signed by, projected into pods as ca.crt (New takes it from the
	// client config).
	ClusterCA []byte
	// Clock is for tests (default the real clock).
	Clock clock.WithTicker

	// Metrics, when set, is where the agent registers its kubelet metrics
	// besides its own registry (see metrics.go; in `corekube up`, the API
	// server's registry, so that one /metrics serves everything). The
	// kubelet API's /metrics serves the agent's own registry alone: its
	// kubelet metrics with the Go and process collectors.
	Metrics prometheus.Registerer

	// NodeConfig, when set, gives each node an identity of its own: the
	// client config (a client certificate of system:node:NAME) that node's
	// writes go through (registration, lease, status, its pods' status,
	// deletion and tokens), so that the Node authorizer and
	// NodeRestriction hold the node to its own objects. Each such client
	// has its own TLS connection. The watches, the events and the reads
	// stay on the process's own config. Nil: every node writes with it.
	NodeConfig func(name string) (*rest.Config, error)
}

// The kubelet's defaults.
const (
	DefaultNodeNamePrefix            = "node"
	DefaultKubeletVersion            = "v1.32.3"
	DefaultLeaseDuration             = 40 * time.Second
	DefaultLeaseRenewInterval        = 10 * time.Second
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultRelistPeriod              = time.Second
	DefaultPLEGRelistThreshold       = 3 * time.Minute
	DefaultSyncFrequency             = time.Minute
	DefaultBackoffBase               = 10 * time.Second
	DefaultBackoffMax                = 5 * time.Minute
	DefaultBackoffReset              = 10 * time.Minute
	DefaultPodCIDRs                  = "10.244.0.0/14"
	DefaultNodeIPs                   = "172.20.0.0/14"
	DefaultKubeletListen             = "127.0.0.1:0"
)

// DefaultCapacity is a node's capacity when Config.Capacity is not set.
func DefaultCapacity() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("16Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
}

// complete fills in the defaults and checks the configuration.
func (c Config) complete() (Config, error) {
	setDefault := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.NodeNamePrefix == "" {
		c.NodeNamePrefix = DefaultNodeNamePrefix
	}
	if c.Nodes < 0 {
		return c, fmt.Errorf("agent: Nodes must not be negative, got %d", c.Nodes)
	}
	if c.FirstNode <= 0 {
		c.FirstNode = 1
	}
	if c.KubeletVersion == "" {
		c.KubeletVersion = DefaultKubeletVersion
	}
	for _, d := range []struct {
		ttl *time.Duration
		def time.Duration
	}{{&c.AuthenticationCacheTTL, DefaultAuthenticationCacheTTL}, {&c.AuthorizationAuthorizedTTL, DefaultAuthorizationAuthorizedTTL}, {&c.AuthorizationUnauthorizedTTL, DefaultAuthorizationUnauthorizedTTL}} {
		if *d.ttl == 0 {
			*d.ttl = d.def
		}
	}
	setDefault(&c.LeaseDuration, DefaultLeaseDuration)
	setDefault(&c.LeaseRenewInterval, DefaultLeaseRenewInterval)
	setDefault(&c.NodeStatusUpdateFrequency, DefaultNodeStatusUpdateFrequency)
	setDefault(&c.NodeStatusReportFrequency, DefaultNodeStatusReportFrequency)
	setDefault(&c.RelistPeriod, DefaultRelistPeriod)
	setDefault(&c.PLEGRelistThreshold, DefaultPLEGRelistThreshold)
	setDefault(&c.SyncFrequency, DefaultSyncFrequency)
	setDefault(&c.BackoffBase, DefaultBackoffBase)
	setDefault(&c.BackoffMax, DefaultBackoffMax)
	setDefault(&c.BackoffReset, DefaultBackoffReset)
	setDefault(&c.EvictionPressureTransitionPeriod, DefaultEvictionPressureTransitionPeriod)
	setDefault(&c.EvictionMonitoringPeriod, DefaultEvictionMonitoringPeriod)
	if c.EvictionHard == "" {
		c.EvictionHard = DefaultEvictionHard
	}
	thresholds, err := c.thresholds()
	if err != nil {
		return c, err
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		return c, fmt.Errorf("agent: eviction max pod grace period must not be negative, got %d", c.EvictionMaxPodGracePeriod)
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.PodWorkers <= 0 {
		c.PodWorkers = DefaultPodWorkers(c.Nodes)
	}
	if c.NodeWorkers <= 0 {
		c.NodeWorkers = DefaultNodeWorkers(c.Nodes)
	}
	if c.EventWorkers <= 0 {
		c.EventWorkers = 4
	}
	if c.PodCIDRs == "" {
		c.PodCIDRs = DefaultPodCIDRs
	}
	if c.NodeIPs == "" {
		c.NodeIPs = DefaultNodeIPs
	}
	podCIDRs, err := netip.ParsePrefix(c.PodCIDRs)
	if err != nil || !podCIDRs.Addr().Is4() || podCIDRs.Bits() > 24 {
		return c, fmt.Errorf("agent: pod CIDRs %q: want an IPv4 range of /24 or larger", c.PodCIDRs)
	}
	if last := c.FirstNode + c.Nodes - 1; c.Nodes > 0 && last > 1<<(24-podCIDRs.Bits()) {
		return c, fmt.Errorf("agent: pod CIDRs %s hold %d /24s, not enough for node %d", c.PodCIDRs, 1<<(24-podCIDRs.Bits()), last)
	}
	nodeIPs, err := netip.ParsePrefix(c.NodeIPs)
	if err != nil || !nodeIPs.Addr().Is4() {
		return c, fmt.Errorf("agent: node IPs %q: want an IPv4 range", c.NodeIPs)
	}
	if last := c.FirstNode + c.Nodes - 1; c.Nodes > 0 && last >= 1<<(32-nodeIPs.Bits())-1 {
		return c, fmt.Errorf("agent: node IPs %s too small for node %d", c.NodeIPs, last)
	}
	if err := c.completeKubeletAPI(); err != nil {
		return c, err
	}
	if c.Capacity == nil {
		c.Capacity = DefaultCapacity()
	} else {
		capacity := DefaultCapacity()
		for name, q := range c.Capacity {
			capacity[name] = q
		}
		c.Capacity = capacity
	}
	if c.Allocatable == nil {
		c.Allocatable = defaultAllocatable(c.Capacity, thresholds)
	}
	for i, t := range c.Taints {
		if t.Key == "" {
			return c, fmt.Errorf("agent: taint %d has no key", i)
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return c, fmt.Errorf("agent: taint %q: invalid effect %q", t.Key, t.Effect)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c, nil
}

// completeKubeletAPI defaults and checks the kubelet API's listen address
// and advertised host.
func (c *Config) completeKubeletAPI() error {
	if c.KubeletListen == "" {
		c.KubeletListen = DefaultKubeletListen
	}
	host, _, err := net.SplitHostPort(c.KubeletListen)
	if err != nil {
		return fmt.Errorf("agent: kubelet listen address %q: %w", c.KubeletListen, err)
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		return errors.New("agent: the kubelet API's TLS certificate and key files go together")
	}
	if c.KubeletAdvertiseHost == "" {
		if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
			return fmt.Errorf("agent: kubelet listen address %q is every interface of the machine: "+
				"give the host name or address the API server reaches it at (KubeletAdvertiseHost, --kubelet-advertise-host)", c.KubeletListen)
		}
		c.KubeletAdvertiseHost = host
		return nil
	}
	if strings.ContainsAny(c.KubeletAdvertiseHost, "/:@?# ") && net.ParseIP(c.KubeletAdvertiseHost) == nil {
		return fmt.Errorf("agent: kubelet advertise host %q: want a host name or an IP address", c.KubeletAdvertiseHost)
	}
	return nil
}

// thresholds parses the eviction flags (EvictionHard completed).
func (c *Config) thresholds() ([]threshold, error) {
	hard := c.EvictionHard
	if hard == "none" {
		hard = ""
	}
	t, err := parseThresholds(hard, c.EvictionSoft, c.EvictionSoftGracePeriod, c.EvictionMinimumReclaim)
	if err != nil {
		return nil, fmt.Errorf("agent: eviction thresholds: %w", err)
	}
	return t, nil
}

// defaultAllocatable is capacity minus, as the kubelet's node allocatable,
// the hard memory.available threshold, and minus 10% of ephemeral storage
// (nodefs.available<10%).
func defaultAllocatable(capacity v1.ResourceList, thresholds []threshold) v1.ResourceList {
	out := v1.ResourceList{}
	for name, q := range capacity {
		out[name] = q.DeepCopy()
	}
	if m, ok := out[v1.ResourceMemory]; ok {
		for _, t := range thresholds {
			if t.signal == signalMemoryAvailable && t.hard() {
				m.Sub(*t.value(m.Value()))
				out[v1.ResourceMemory] = m
			}
		}
	}
	if s, ok := out[v1.ResourceEphemeralStorage]; ok {
		out[v1.ResourceEphemeralStorage] = *resource.NewQuantity(s.Value()/10*9, resource.BinarySI)
	}
	return out
}

// NodesPerPodWorker is how many nodes share one pod worker by default.
// Each kubelet syncs its pods on goroutines of their own and writes their
// status from its status manager's; an agent's pods share its workers, and
// a sync that writes (a status, the final delete) holds one for a round
// trip to the API server, as long as a second under load. With a fixed 16
// workers an agent of 1,000 nodes synced ~50 pods a second: when a churn
// deleted and created pods faster than that, new pods queued behind the
// terminating ones for tens of seconds. One per 10 nodes made the bulk
// create of 150,000 pods on 5,000 nodes 15% slower than one per 20 (more
// syncs at once competing for the API server) with no better pod startup
// in the churn after it (BENCHMARKS.md, runs 7 and 8).
const NodesPerPodWorker = 20

// DefaultPodWorkers is the pod workers of an agent of n nodes: one per
// NodesPerPodWorker nodes, at least 16.
func DefaultPodWorkers(n int) int { return max(16, (n+NodesPerPodWorker-1)/NodesPerPodWorker) }

// NodesPerNodeWorker is how many nodes share one node worker by default.
// Each kubelet renews its lease on its own; an agent's nodes share its
// workers, and a renewal takes a worker for a round trip to the API server
// (~130 ms on average with 5,000 nodes and 150,000 pods on 2 cores). With a
// fixed 8 workers an agent of 1,000 nodes managed ~60 renewals a second of
// the 100 its nodes need: leases fell 40 s behind, the node lifecycle
// controller marked the nodes unreachable, and their pods were evicted 5
// minutes later. One worker per 20 nodes leaves room for 3× that latency.
const NodesPerNodeWorker = 20

// DefaultNodeWorkers is the node workers of an agent of n nodes: one per
// NodesPerNodeWorker nodes, at least 8.
func DefaultNodeWorkers(n int) int { return max(8, (n+NodesPerNodeWorker-1)/NodesPerNodeWorker) }
