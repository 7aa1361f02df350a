package scheduler

import (
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corekube/corekube/controllers/internal/intern"
)

// bindAllHostIP is the host IP of a port that names none.
const bindAllHostIP = "0.0.0.0"

// hostPort is one host port a pod claims on its node.
type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

// podHostPorts lists the host ports of a pod's containers, as kube's
// NodePorts plugin does (init containers are not counted).
func podHostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = bindAllHostIP
			}
			if hp.protocol == "" {
				hp.protocol = v1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	return out
}

// nodeInfo is what the scheduler knows of one node: the node itself and
// the sums over the pods bound (or being bound) to it.
type nodeInfo struct {
	name string
	// node is nil while pods name a node the informer has not shown (or no
	// longer shows); such nodes are not candidates.
	node *v1.Node
	// taints are the node's taints plus, when its Ready condition is not
	// True and it lacks it, the NoSchedule taint the node lifecycle
	// controller gives such nodes.
	taints      []v1.Taint
	allocatable resources
	allowedPods int64

	requested resources // sum of the pods' requests
	nonZero   resources // the same with kube's scoring defaults
	pods      int
	ports     map[hostPort]int

	// What the pod-topology plugins read, apart: the filters and scores
	// every pod runs read the fields above, which stay in few cache lines.
	*nodeTopology
}

// nodeTopology is a node's share of the pod-topology plugins' data.
type nodeTopology struct {
	// podList is the node's pods, in no order (PodTopologySpread counts
	// them, InterPodAffinity matches them against a pod's terms);
	// withAffinity those of them with inter-pod affinity terms, the only
	// ones a pod without terms of its own must look at.
	podList      []*assignedPod
	withAffinity []*assignedPod
	// owners counts the node's pods (not terminating) by controller: the
	// system default spreading counts a controller's pods on every node
	// of the cluster, a lookup here rather than a pass over the pods.
	owners map[types.UID]int32
	// zone and hostname are the node's well-known topology labels, read
	// for every node by the spreading defaults without a map lookup.
	zone, hostname       string
	hasZone, hasHostname bool
}

// podsOn lists the node's pods (in no order); nil for a node the cache
// has neither the object nor any pod of.
func (ni *nodeInfo) podsOn() []*assignedPod {
	if ni.nodeTopology == nil {
		return nil
	}
	return ni.podList
}

// setNode records the node's latest object and reports whether anything
// the filters or scores read changed.
func (ni *nodeInfo) setNode(node *v1.Node) bool {
	old := ni.node
	ni.node = node
	ni.taints = effectiveTaints(node)
	if ni.nodeTopology == nil {
		ni.nodeTopology = &nodeTopology{}
	}
	ni.zone, ni.hasZone = node.Labels[v1.LabelTopologyZone]
	ni.hostname, ni.hasHostname = node.Labels[v1.LabelHostname]
	ni.allocatable, ni.allowedPods = nodeAllocatable(node)
	if old == nil {
		return true
	}
	return old.Spec.Unschedulable != node.Spec.Unschedulable ||
		!reflect.DeepEqual(old.Labels, node.Labels) ||
		!reflect.DeepEqual(effectiveTaints(old), ni.taints) ||
		!reflect.DeepEqual(old.Status.Allocatable, node.Status.Allocatable)
}

// label is the node's value of label key.
func (ni *nodeInfo) label(key string) (string, bool) {
	switch key {
	case v1.LabelTopologyZone:
		return ni.zone, ni.hasZone
	case v1.LabelHostname:
		return ni.hostname, ni.hasHostname
	}
	v, ok := ni.node.Labels[key]
	return v, ok
}

// effectiveTaints are the node's taints and the one its Ready condition
// stands for.
func effectiveTaints(node *v1.Node) []v1.Taint {
	key := ""
	status := v1.ConditionUnknown
	found := false
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			status, found = c.Status, true
			break
		}
	}
	switch {
	case !found || status == v1.ConditionFalse:
		key = v1.TaintNodeNotReady
	case status == v1.ConditionUnknown:
		key = v1.TaintNodeUnreachable
	default:
		return node.Spec.Taints
	}
	if slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == key && t.Effect == v1.TaintEffectNoSchedule }) {
		return node.Spec.Taints
	}
	out := make([]v1.Taint, 0, len(node.Spec.Taints)+1)
	out = append(out, node.Spec.Taints...)
	return append(out, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
}

func (ni *nodeInfo) addPod(p *assignedPod) {
	ni.requested.Add(p.req)
	ni.nonZero.Add(p.nonZero)
	ni.pods++
	for _, hp := range p.ports {
		if ni.ports == nil {
			ni.ports = map[hostPort]int{}
		}
		ni.ports[hp]++
	}
}

// addTopology records a cached pod in the node's pod-topology data. The
// nodeCache calls it, not addPod, so that a copy of a nodeInfo that
// simulates pods coming and going (preemption) never writes the shared
// nodeTopology.
func (ni *nodeInfo) addTopology(p *assignedPod) {
	if ni.nodeTopology == nil {
		ni.nodeTopology = &nodeTopology{}
	}
	ni.podList = append(ni.podList, p)
	if p.owner != "" && !p.terminating {
		if ni.owners == nil {
			ni.owners = map[types.UID]int32{}
		}
		ni.owners[p.owner]++
	}
	if p.affinity != nil {
		ni.withAffinity = append(ni.withAffinity, p)
	}
}

// without removes p from pods (order is not kept).
func without(pods []*assignedPod, p *assignedPod) []*assignedPod {
	for i, q := range pods {
		if q == p {
			last := len(pods) - 1
			pods[i] = pods[last]
			pods[last] = nil
			return pods[:last]
		}
	}
	return pods
}

func (ni *nodeInfo) removePod(p *assignedPod) {
	ni.requested.Sub(p.req)
	ni.nonZero.Sub(p.nonZero)
	ni.pods--
	for _, hp := range p.ports {
		if ni.ports[hp]--; ni.ports[hp] <= 0 {
			delete(ni.ports, hp)
		}
	}
}

// removeTopology undoes addTopology.
func (ni *nodeInfo) removeTopology(p *assignedPod) {
	ni.podList = without(ni.podList, p)
	if p.owner != "" && !p.terminating {
		if ni.owners[p.owner]--; ni.owners[p.owner] <= 0 {
			delete(ni.owners, p.owner)
		}
	}
	if p.affinity != nil {
		ni.withAffinity = without(ni.withAffinity, p)
	}
}

// portConflict is kube's HostPortInfo.CheckConflict: 0.0.0.0 conflicts
// with every IP for the same protocol and port.
func (ni *nodeInfo) portConflict(hp hostPort) bool {
	if len(ni.ports) == 0 {
		return false
	}
	if hp.ip == bindAllHostIP {
		for used := range ni.ports {
			if used.protocol == hp.protocol && used.port == hp.port {
				return true
			}
		}
		return false
	}
	if ni.ports[hp] > 0 {
		return true
	}
	return ni.ports[hostPort{ip: bindAllHostIP, protocol: hp.protocol, port: hp.port}] > 0
}

// assignedPod is a pod's share of its node. For a pod the informer shows
// bound, it is also the object the informer stores (transformPod): the
// scheduler keeps no *v1.Pod of the pods already placed, only what its
// plugins and preemption read of them, so that 150,000 bound pods cost a
// few hundred bytes each rather than a stripped v1.Pod (a 1,152-byte
// struct before any of its fields) and a copy of its sums.
type assignedPod struct {
	// Identity: the informer's key and resourceVersion (its handlers
	// tell updates from resyncs by it), and what preemption's victims are
	// patched, deleted and reported by (asPod).
	name            string
	uid             types.UID
	resourceVersion string
	// startTime (status.startTime): preemption spares the pods that
	// started first.
	startTime *metav1.Time
	// deletionTimestamp and disruption (the DisruptionTarget condition,
	// if any) tell a pod terminating because it was preempted.
	deletionTimestamp *metav1.Time
	disruption        *v1.PodCondition

	priority int32
	node     string
	req      resources
	nonZero  resources
	ports    []hostPort
	// assumed marks a pod the scheduler placed whose binding the informer
	// has not shown yet.
	assumed bool

	// What the pod-topology plugins read (podtopology.go).
	ns          string
	labels      map[string]string
	lset        *labelSet // labels, shared; set by nodeCache.setPod
	owner       types.UID // controller, for the default spreading
	terminating bool
	affinity    *podAffinity // nil: no inter-pod affinity terms
}

// newAssignedPod is what the scheduler keeps of pod, bound to
// pod.Spec.NodeName. The names and labels are shared with other pods that
// have equal ones (package intern): the result is read-only but for the
// fields nodeCache.setPod sets.
func newAssignedPod(pod *v1.Pod) *assignedPod {
	p := &assignedPod{
		name:              pod.Name,
		uid:               pod.UID,
		resourceVersion:   pod.ResourceVersion,
		startTime:         pod.Status.StartTime,
		deletionTimestamp: pod.DeletionTimestamp,
		priority:          podPriority(pod),
		node:              intern.String(pod.Spec.NodeName),
		req:               podRequests(pod, false),
		nonZero:           podRequests(pod, true),
		ports:             podHostPorts(pod),
	}
	p.disruption = disruptionOf(pod)
	p.setTopology(pod)
	p.labels = intern.Labels(p.labels)
	return p
}

// disruptionOf is a copy of pod's DisruptionTarget condition, nil if none.
func disruptionOf(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if c := pod.Status.Conditions[i]; c.Type == v1.DisruptionTarget {
			return &c
		}
	}
	return nil
}

// GetObjectMeta makes an assignedPod an object the informer can key and
// compare (meta.Accessor): namespace, name, uid and resourceVersion.
func (p *assignedPod) GetObjectMeta() metav1.Object {
	// Only fields nodeCache.setPod never writes: the informer reads them
	// from its goroutines while the handlers update the cache.
	return &metav1.ObjectMeta{Name: p.name, Namespace: p.ns, UID: p.uid, ResourceVersion: p.resourceVersion}
}

// asPod is the pod p stands for, with what preemption's writes and events
// read of a victim: name, namespace, uid, resourceVersion, labels, node,
// priority, start and deletion times and the DisruptionTarget condition.
func (p *assignedPod) asPod() *v1.Pod {
	prio := p.priority
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, UID: p.uid, ResourceVersion: p.resourceVersion,
			Labels: p.labels, DeletionTimestamp: p.deletionTimestamp},
		Spec:   v1.PodSpec{NodeName: p.node, Priority: &prio},
		Status: v1.PodStatus{StartTime: p.startTime},
	}
	if p.disruption != nil {
		pod.Status.Conditions = []v1.PodCondition{*p.disruption}
	}
	return pod
}

// nodeCache holds every node and every bound or assumed pod.
type nodeCache struct {
	nodes map[string]*nodeInfo
	// list is the nodes with a node object, sorted by name.
	list  []*nodeInfo
	pods  map[string]*assignedPod
	dirty bool // list needs rebuilding
	// affinityPods counts the pods with inter-pod affinity terms: while
	// it is 0, a pod without terms of its own skips InterPodAffinity.
	affinityPods int
	// labelSets are the distinct label sets of the cached pods.
	labelSets map[string]*labelSet
	// affinities are the distinct inter-pod affinity terms of the cached
	// pods, by podAffinity.key.
	affinities map[string]*podAffinity
	// epoch numbers the attempts, for podAffinity.memo.
	epoch uint64
}

// nextEpoch starts an attempt: memos of earlier ones are stale.
func (c *nodeCache) nextEpoch() uint64 {
	c.epoch++
	return c.epoch
}

func newNodeCache() *nodeCache {
	return &nodeCache{nodes: map[string]*nodeInfo{}, pods: map[string]*assignedPod{}, labelSets: map[string]*labelSet{}, affinities: map[string]*podAffinity{}}
}

func (c *nodeCache) info(name string) *nodeInfo {
	ni := c.nodes[name]
	if ni == nil {
		ni = &nodeInfo{name: name}
		c.nodes[name] = ni
	}
	return ni
}

// candidates returns the known nodes in name order.
func (c *nodeCache) candidates() []*nodeInfo {
	if c.dirty {
		c.list = c.list[:0]
		for _, ni := range c.nodes {
			if ni.node != nil {
				c.list = append(c.list, ni)
			}
		}
		slices.SortFunc(c.list, func(a, b *nodeInfo) int { return strings.Compare(a.name, b.name) })
		c.dirty = false
	}
	return c.list
}

// setNode records a node and reports whether it changed in a way that
// may let a waiting pod fit.
func (c *nodeCache) setNode(node *v1.Node) bool {
	ni := c.info(node.Name)
	if ni.node == nil {
		c.dirty = true
	}
	return ni.setNode(node)
}

func (c *nodeCache) deleteNode(name string) {
	ni := c.nodes[name]
	if ni == nil {
		return
	}
	c.dirty = true
	if ni.pods == 0 {
		delete(c.nodes, name)
		return
	}
	ni.node, ni.taints = nil, nil
}

// setPod records a pod bound (or assumed) to a node, replacing what was
// known of it, and returns the node it left, if it moved.
func (c *nodeCache) setPod(key string, p *assignedPod) (left string) {
	if old := c.pods[key]; old != nil {
		c.removePod(key)
		if old.node != p.node {
			left = old.node
		}
	}
	c.pods[key] = p
	// Shared label sets (and namespace strings, interned by whoever built
	// p) keep the pod-topology plugins' passes over every pod in few
	// cache lines. p may be the informer's stored object, whose identity
	// (name, namespace, uid, resourceVersion) the informer reads from its
	// own goroutines: those fields are not written here.
	if len(p.labels) > 0 {
		k := labelsKey(p.labels)
		ls := c.labelSets[k]
		if ls == nil {
			ls = &labelSet{labels: p.labels, key: k}
			c.labelSets[k] = ls
		}
		ls.refs++
		p.lset, p.labels = ls, ls.labels
	}
	if a := p.affinity; a != nil {
		c.affinityPods++
		if a.key != "" {
			if shared := c.affinities[a.key]; shared != nil {
				a = shared
			} else {
				// A pending pod's entry may still hold it: copy.
				cp := *a
				cp.memo = affinityMemo{}
				a = &cp
				c.affinities[a.key] = a
			}
			a.refs++
			p.affinity = a
		}
	}
	ni := c.info(p.node)
	ni.addPod(p)
	ni.addTopology(p)
	return left
}

// removePod forgets a pod and returns the node it was on ("" if none).
func (c *nodeCache) removePod(key string) string {
	p := c.pods[key]
	if p == nil {
		return ""
	}
	delete(c.pods, key)
	if ls := p.lset; ls != nil {
		if ls.refs--; ls.refs == 0 {
			delete(c.labelSets, ls.key)
		}
	}
	if a := p.affinity; a != nil {
		c.affinityPods--
		if a.key != "" && c.affinities[a.key] == a {
			if a.refs--; a.refs == 0 {
				delete(c.affinities, a.key)
			}
		}
	}
	ni := c.nodes[p.node]
	if ni == nil {
		return p.node
	}
	ni.removePod(p)
	ni.removeTopology(p)
	if ni.node == nil && ni.pods == 0 {
		delete(c.nodes, p.node)
	}
	return p.node
}
