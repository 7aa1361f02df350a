package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/agent/pleg"
	"github.com/corekube/corekube/agent/runtime/sim"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
)

// node is one simulated node: its runtime, PLEG and IP addresses, and what
// the agent last knew of its Node and Lease objects.
type node struct {
	a *Agent
	// client writes as this node (its own identity with
	// Config.NodeConfig, else the agent's client).
	client  kubernetes.Interface
	name    string
	num     int    // 1-based node number
	ip      string // InternalIP
	podCIDR string
	bootID  string

	runtime *sim.Runtime
	pleg    *pleg.GenericPLEG
	// admissions: the pods the node admitted and that have not ended.
	admissions admissions
	// metrics are the node's series of the kubelet metrics.
	metrics *nodeMetrics
	// eviction is the node's eviction manager state (eviction.go).
	eviction evictionState

	mu         sync.Mutex
	ipam       *ipam     // replaced when an adopted Node has another podCIDR
	uid        types.UID // of the Node object, once registered
	registered bool
	lastReport time.Time      // last status write
	lastStatus *v1.NodeStatus // what was last written
	// reportDelay is added to NodeStatusReportFrequency before the next
	// write of an unchanged status: a random delay set at each write of a
	// changed status (and at registration), as the kubelet's
	// delayAfterNodeStatusChange, so that nodes registered together do
	// not all report in the same seconds every period.
	reportDelay time.Duration
	lease       *coordinationv1.Lease // as last written; nil: read it first
}

// newNode builds node number num (1-based) of the configuration.
func (a *Agent) newNode(num int, podCIDRs, nodeIPs netip.Prefix) *node {
	name := fmt.Sprintf("%s-%d", a.cfg.NodeNamePrefix, num)
	// The /24 number num-1 of podCIDRs.
	base := podCIDRs.Masked().Addr().As4()
	idx := uint32(num - 1)
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 + idx<<8
	cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(start >> 24), byte(start >> 16), byte(start >> 8), 0}), 24)
	ipBase := nodeIPs.Masked().Addr().As4()
	ipn := uint32(ipBase[0])<<24 | uint32(ipBase[1])<<16 | uint32(ipBase[2])<<8 | uint32(ipBase[3]) + uint32(num)
	ip := netip.AddrFrom4([4]byte{byte(ipn >> 24), byte(ipn >> 16), byte(ipn >> 8), byte(ipn)})
	n := &node{
		a:       a,
		client:  a.client,
		name:    name,
		num:     num,
		ip:      ip.String(),
		podCIDR: cidr.String(),
		bootID:  string(uuid.NewUUID()),
		runtime: sim.New(a.cfg.Clock),
		metrics: a.metrics.forNode(name),
	}
	n.ipam = newIPAM(cidr)
	n.pleg = pleg.New(n.runtime, pleg.Options{
		RelistPeriod:    a.cfg.RelistPeriod,
		RelistThreshold: a.cfg.PLEGRelistThreshold,
		Clock:           a.cfg.Clock,
		Events:          a.plegEvents,
		Logger:          a.log.With("node", name),
		Metrics:         &n.metrics.pleg,
	})
	return n
}

// hostInfo is what every node reports of the machine: read once.
type hostInfo struct {
	kernelVersion string
	osImage       string
}

func readHostInfo() hostInfo {
	h := hostInfo{kernelVersion: "6.8.0", osImage: "Linux"}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			h.kernelVersion = s
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				h.osImage = strings.Trim(v, `"'`)
			}
		}
	}
	return h
}

// machineID is a stable 32-hex-digit ID derived from the node's name.
func machineID(name string) string {
	sum := sha256.Sum256([]byte("corekube-machine-id/" + name))
	return hex.EncodeToString(sum[:16])
}

func systemUUID(name string) string {
	sum := sha256.Sum256([]byte("corekube-system-uuid/" + name))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// labels are the kubelet's own node labels plus the configured ones.
func (n *node) labels() map[string]string {
	l := map[string]string{
		v1.LabelHostname:          n.name,
		v1.LabelOSStable:          "linux",
		v1.LabelArchStable:        goruntime.GOARCH,
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	// The topology labels come before --node-labels, which may override
	// them, as the kubelet's --node-labels override what it sets itself.
	if zones := n.a.cfg.Zones; len(zones) > 0 {
		l[v1.LabelTopologyZone] = zones[(n.num-1)%len(zones)]
	}
	if n.a.cfg.Region != "" {
		l[v1.LabelTopologyRegion] = n.a.cfg.Region
	}
	for k, v := range n.a.cfg.Labels {
		l[k] = v
	}
	return l
}

// initialNode is the Node the agent registers, status included, as the
// kubelet's initialNode + setNodeStatus.
func (n *node) initialNode(now time.Time) *v1.Node {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.name,
			Labels: n.labels(),
			Annotations: map[string]string{
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: v1.NodeSpec{
			PodCIDR:  n.podCIDR,
			PodCIDRs: []string{n.podCIDR},
			Taints:   append([]v1.Taint(nil), n.a.cfg.Taints...),
		},
	}
	node.Status = n.desiredStatus(now, nil)
	return node
}

func quantityList(l v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(l)+2)
	for k, v := range l {
		out[k] = v.DeepCopy()
	}
	for _, hp := range []v1.ResourceName{"hugepages-1Gi", "hugepages-2Mi"} {
		if _, ok := out[hp]; !ok {
			out[hp] = resource.MustParse("0")
		}
	}
	return out
}

// conditionSpec is one node condition as the agent computes it.
type conditionSpec struct {
	typ     v1.NodeConditionType
	status  v1.ConditionStatus
	reason  string
	message string
}

// conditions computes the node's conditions: MemoryPressure as the
// eviction manager last found it, no disk or PID pressure, and Ready as
// long as the PLEG is healthy.
func (n *node) conditions() []conditionSpec {
	ready := conditionSpec{v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"}
	if ok, err := n.pleg.Healthy(); !ok {
		ready = conditionSpec{v1.NodeReady, v1.ConditionFalse, "KubeletNotReady", fmt.Sprintf("PLEG is not healthy: %v", err)}
	}
	memory := conditionSpec{v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"}
	if n.eviction.underMemoryPressure() {
		memory = conditionSpec{v1.NodeMemoryPressure, v1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"}
	}
	return []conditionSpec{
		memory,
		{v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		{v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
		ready,
	}
}

// desiredStatus is the node status as of now; old (may be nil) provides
// the conditions' lastTransitionTime.
func (n *node) desiredStatus(now time.Time, old *v1.NodeStatus) v1.NodeStatus {
	cfg := n.a.cfg
	t := metav1.NewTime(now)
	st := v1.NodeStatus{
		Capacity:    quantityList(cfg.Capacity),
		Allocatable: quantityList(cfg.Allocatable),
		Phase:       "",
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: n.ip},
			// The machine the kubelet API is reached on (all the process's
			// nodes run on it), first in kube-apiserver's default
			// --kubelet-preferred-address-types.
			{Type: v1.NodeHostName, Address: cfg.KubeletAdvertiseHost},
		},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: n.a.kubeletPort()}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               machineID(n.name),
			SystemUUID:              systemUUID(n.name),
			BootID:                  n.bootID,
			KernelVersion:           n.a.host.kernelVersion,
			OSImage:                 n.a.host.osImage,
			ContainerRuntimeVersion: sim.Name + "://" + sim.Version,
			KubeletVersion:          cfg.KubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            goruntime.GOARCH,
		},
	}
	for _, c := range n.conditions() {
		cond := v1.NodeCondition{
			Type: c.typ, Status: c.status, Reason: c.reason, Message: c.message,
			LastHeartbeatTime: t, LastTransitionTime: t,
		}
		if old != nil {
			for _, oc := range old.Conditions {
				if oc.Type == c.typ && oc.Status == c.status {
					cond.LastTransitionTime = oc.LastTransitionTime
				}
			}
		}
		st.Conditions = append(st.Conditions, cond)
	}
	return st
}

// sameStatus reports whether two statuses differ only in heartbeat times.
func sameStatus(a, b *v1.NodeStatus) bool {
	if a == nil || b == nil || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return len(a.Addresses) == len(b.Addresses) && a.NodeInfo == b.NodeInfo && a.DaemonEndpoints == b.DaemonEndpoints &&
		resourceListsEqual(a.Capacity, b.Capacity) && resourceListsEqual(a.Allocatable, b.Allocatable)
}

func resourceListsEqual(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// register creates the Node, or adopts an existing one (as the kubelet
// does after a restart: default labels are reconciled).
func (n *node) register(ctx context.Context) error {
	now := n.a.clock.Now()
	want := n.initialNode(now)
	nodes := n.client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	switch {
	case err == nil:
		n.recordStartEvents()
		n.registeredAs(created, now, true)
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
	existing, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
	updated := existing.DeepCopy()
	changed := false
	// A restarted agent is a restarted kubelet, not a rebooted machine:
	// the boot ID stays (a new one would tell that the node rebooted, and
	// its containers with it).
	if id := existing.Status.NodeInfo.BootID; id != "" {
		n.bootID = id
	}
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range n.labels() {
		if updated.Labels[k] != v {
			updated.Labels[k], changed = v, true
		}
	}
	// Earlier agents recorded their kubelet API's URL here; nothing reads
	// it any more, so it goes (the status names the address and port).
	if _, ok := updated.Annotations[KubeletEndpointAnnotation]; ok {
		delete(updated.Annotations, KubeletEndpointAnnotation)
		changed = true
	}
	if changed {
		if updated, err = nodes.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reconcile node %s: %w", n.name, err)
		}
	}
	if updated.Spec.PodCIDR != "" && updated.Spec.PodCIDR != n.podCIDR {
		if p, err := netip.ParsePrefix(updated.Spec.PodCIDR); err == nil && p.Addr().Is4() && p.Bits() <= 30 {
			n.podCIDR = p.String()
			n.mu.Lock()
			n.ipam = newIPAM(p)
			n.mu.Unlock()
		}
	}
	n.recordStartEvents()
	n.registeredAs(updated, now, false)
	// As the kubelet's syncNodeStatus: the status follows registration at
	// once, so that the new bootID and kubelet port (a restarted process
	// listens elsewhere) do not wait for the next status update.
	if err := n.updateStatus(ctx); err != nil {
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
	return nil
}

// recordStartEvents records what the kubelet records each time it starts,
// whether its Node is new or not: Starting (its birth cry),
// NodeAllocatableEnforced (the container manager setting the pods' cgroup
// limits), then an event per pressure condition, as the status setters
// report them on the fresh Node the kubelet builds before registering
// (NodeHasSufficientMemory, ...). NodeReady follows when the Node turns
// Ready. RegisteredNode is the node lifecycle controller's, not the
// kubelet's.
func (n *node) recordStartEvents() {
	ev := n.a.events
	ev.nodeEvent(n, v1.EventTypeNormal, "Starting", "Starting kubelet.")
	ev.nodeEvent(n, v1.EventTypeNormal, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")
	for _, c := range n.conditions() {
		if e := pressureEvent(c.typ, c.status); e != "" {
			ev.nodeStatusEvent(n, e)
		}
	}
}

// pressureEvent is the event the kubelet's status setters record for a
// pressure condition's status ("" for other conditions).
func pressureEvent(t v1.NodeConditionType, status v1.ConditionStatus) string {
	pressure := status == v1.ConditionTrue
	switch t {
	case v1.NodeMemoryPressure:
		if pressure {
			return "NodeHasInsufficientMemory"
		}
		return "NodeHasSufficientMemory"
	case v1.NodeDiskPressure:
		if pressure {
			return "NodeHasDiskPressure"
		}
		return "NodeHasNoDiskPressure"
	case v1.NodePIDPressure:
		if pressure {
			return "NodeHasInsufficientPID"
		}
		return "NodeHasSufficientPID"
	}
	return ""
}

func (n *node) registeredAs(obj *v1.Node, now time.Time, created bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.uid, n.registered = obj.UID, true
	if created {
		n.lastReport = now
		n.lastStatus = obj.Status.DeepCopy()
		n.reportDelay = reportDelay(n.a.cfg.NodeStatusReportFrequency)
		if c := findNodeCondition(&obj.Status, v1.NodeReady); c != nil && c.Status == v1.ConditionTrue {
			n.a.events.nodeStatusEvent(n, "NodeReady")
		}
	}
	n.a.log.Debug("node registered", "node", n.name, "created", created)
}

func findNodeCondition(st *v1.NodeStatus, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// kubeletPort is the port the kubelet API listens on (0 before Run
// listens).
func (a *Agent) kubeletPort() int32 {
	if a.kubelet == nil {
		return 0
	}
	return a.kubelet.port
}

// addresses is the node's pod IP allocator.
func (n *node) addresses() *ipam {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ipam
}

func (n *node) isRegistered() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.registered
}
