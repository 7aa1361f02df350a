package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corekube/corekube/controllers/scheduler/podresources"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// This file is the kubelet's pod admission (canAdmitPod with its predicate
// admit handler, lifecycle/predicate.go, and the scheduler's AdmissionCheck
// it calls): before it runs a pod for the first time, the agent checks it
// against its node and the pods it admitted before, and rejects it
// (phase Failed) when it does not fit. Pods bound by the scheduler fit;
// pods created with spec.nodeName set may not.

// Reasons of the kubelet's admission failures.
const (
	reasonOutOf              = "OutOf" // + resource name: OutOfcpu, OutOfpods, ...
	reasonOSSelectorMismatch = "PodOSSelectorNodeLabelDoesNotMatch"
	reasonOSNotSupported     = "PodOSNotSupported"
	predicateNodeAffinity    = "NodeAffinity"
	predicateNodeName        = "NodeName"
	predicateNodePorts       = "NodePorts"
	predicateTaintToleration = "TaintToleration"
)

// rejection is why the node does not admit a pod: the event's reason and
// message; the pod's status message is "Pod was rejected: " + message.
type rejection struct {
	reason, message string
}

// admitted is what an admitted pod holds of its node until it ends.
type admitted struct {
	requests podresources.Resources
	ports    []hostPort
}

// admissions are the pods a node admitted and that have not ended: what
// the kubelet's filterOutInactivePods leaves of its pods.
type admissions struct {
	mu   sync.Mutex
	pods map[types.UID]admitted
}

// admit checks pod against node and the pods admitted before it, and
// records it when it fits (nil rejection). Checks and record happen under
// one lock: two pods never both take the last room.
func (s *admissions) admit(pod *v1.Pod, node *v1.Node) *rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pods[pod.UID]; ok {
		return nil
	}
	rej := s.check(pod, node)
	if rej == nil {
		if s.pods == nil {
			s.pods = map[types.UID]admitted{}
		}
		s.pods[pod.UID] = admitted{requests: fitRequests(pod, node), ports: podHostPorts(pod)}
	}
	return rej
}

// adopt records a pod the node was running before the agent restarted,
// without checking it: it runs, so it holds its share of the node whatever
// was admitted meanwhile.
func (s *admissions) adopt(pod *v1.Pod, node *v1.Node) {
	if node == nil {
		node = &v1.Node{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods == nil {
		s.pods = map[types.UID]admitted{}
	}
	s.pods[pod.UID] = admitted{requests: fitRequests(pod, node), ports: podHostPorts(pod)}
}

// release forgets a pod that ended or is gone.
func (s *admissions) release(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

// check is the predicate admit handler's Admit: the OS checks, then the
// general predicates in the kubelet's order (resources, node affinity and
// selector, node name, host ports, NoExecute taints); the first failure is
// the rejection.
func (s *admissions) check(pod *v1.Pod, node *v1.Node) *rejection {
	// The kubelet compares the pod's kubernetes.io/os *label* (sic) with
	// its own OS.
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != "linux" {
		return &rejection{reasonOSSelectorMismatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name != v1.Linux {
		return &rejection{reasonOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS"}
	}

	// Resources: the pod count first, then cpu, memory, ephemeral storage
	// and the scalar resources, unless the pod requests nothing.
	var used podresources.Resources
	for _, p := range s.pods {
		used.Add(p.requests)
	}
	maxPods := node.Status.Allocatable[v1.ResourcePods]
	if int64(len(s.pods))+1 > maxPods.Value() {
		return insufficient(v1.ResourcePods, 1, int64(len(s.pods)), maxPods.Value())
	}
	req := fitRequests(pod, node)
	if !req.IsZero() {
		var alloc podresources.Resources
		alloc.AddList(node.Status.Allocatable, admissionScalar)
		switch {
		case alloc.MilliCPU < req.MilliCPU+used.MilliCPU:
			return insufficient(v1.ResourceCPU, req.MilliCPU, used.MilliCPU, alloc.MilliCPU)
		case alloc.Memory < req.Memory+used.Memory:
			return insufficient(v1.ResourceMemory, req.Memory, used.Memory, alloc.Memory)
		case alloc.EphemeralStorage < req.EphemeralStorage+used.EphemeralStorage:
			return insufficient(v1.ResourceEphemeralStorage, req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage)
		}
		names := make([]v1.ResourceName, 0, len(req.Scalar))
		for name := range req.Scalar {
			names = append(names, name)
		}
		slices.Sort(names) // the kubelet's order is a map's; ours is stable
		for _, name := range names {
			if alloc.Scalar[name] < req.Scalar[name]+used.Scalar[name] {
				return insufficient(name, req.Scalar[name], used.Scalar[name], alloc.Scalar[name])
			}
		}
	}

	if !requiredNodeAffinityMatches(pod, node) {
		return predicateFailure(predicateNodeAffinity, "node(s) didn't match Pod's node affinity/selector")
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return predicateFailure(predicateNodeName, "node(s) didn't match the requested node name")
	}
	for _, want := range podHostPorts(pod) {
		for _, p := range s.pods {
			for _, have := range p.ports {
				if want.conflicts(have) {
					return predicateFailure(predicateNodePorts, "node(s) didn't have free ports for the requested pod ports")
				}
			}
		}
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue // the kubelet only minds NoExecute taints
		}
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol v1.Toleration) bool { return tol.ToleratesTaint(t) }) {
			return predicateFailure(predicateTaintToleration, "node(s) had taints that the pod didn't tolerate")
		}
	}
	return nil
}

// insufficient is the kubelet's InsufficientResourceError as a rejection:
// reason OutOf<resource>.
func insufficient(name v1.ResourceName, requested, used, capacity int64) *rejection {
	return &rejection{
		reason: reasonOutOf + string(name),
		message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity),
	}
}

// predicateFailure is the kubelet's PredicateFailureError as a rejection:
// the predicate's name is the reason.
func predicateFailure(name, desc string) *rejection {
	return &rejection{reason: name, message: fmt.Sprintf("Predicate %s failed: %s", name, desc)}
}

// admissionScalar: the scalar resources admission accounts for, hugepages
// and extended resources (not attachable volumes, which the scheduler
// counts).
func admissionScalar(name v1.ResourceName) bool {
	return podresources.IsHugePages(name) || podresources.IsExtended(name)
}

// fitRequests is what the pod asks of the node, as the scheduler's
// PodRequests computes it (containers and sidecars add up, each ordinary
// init container runs beside the sidecars started before it, overhead on
// top), without the extended resources the node does not have in its
// containers' requests (the kubelet leaves those to cluster-level
// accounting).
func fitRequests(pod *v1.Pod, node *v1.Node) podresources.Resources {
	return podresources.PodRequests(pod, podresources.Options{
		Scalar: admissionScalar,
		SkipContainerRequest: func(name v1.ResourceName) bool {
			_, known := node.Status.Allocatable[name]
			return podresources.IsExtended(name) && !known
		},
	})
}

// requiredNodeAffinityMatches is the scheduler's GetRequiredNodeAffinity
// Match: spec.nodeSelector, and at least one term of the required node
// affinity.
func requiredNodeAffinityMatches(pod *v1.Pod, node *v1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	return slices.ContainsFunc(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		func(t v1.NodeSelectorTerm) bool { return termMatches(&t, node) })
}

// termMatches: every requirement of a term holds; an empty or invalid term
// matches nothing.
func termMatches(t *v1.NodeSelectorTerm, node *v1.Node) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for _, r := range t.MatchExpressions {
		val, ok := node.Labels[r.Key]
		if !requirementHolds(r, val, ok) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		if r.Key != "metadata.name" || len(r.Values) != 1 || !requirementHolds(r, node.Name, true) {
			return false
		}
	}
	return true
}

// requirementHolds: a node whose key has value val (present: it has the
// key) satisfies r, as a labels.Selector; malformed requirements fail.
func requirementHolds(r v1.NodeSelectorRequirement, val string, present bool) bool {
	switch r.Operator {
	case v1.NodeSelectorOpIn:
		return len(r.Values) > 0 && present && slices.Contains(r.Values, val)
	case v1.NodeSelectorOpNotIn:
		return len(r.Values) > 0 && (!present || !slices.Contains(r.Values, val))
	case v1.NodeSelectorOpExists:
		return len(r.Values) == 0 && present
	case v1.NodeSelectorOpDoesNotExist:
		return len(r.Values) == 0 && !present
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if len(r.Values) != 1 || !present {
			return false
		}
		want, err1 := strconv.ParseInt(r.Values[0], 10, 64)
		have, err2 := strconv.ParseInt(val, 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == v1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// hostPort is a port a pod takes on its node.
type hostPort struct {
	ip       string // "0.0.0.0": every address
	protocol v1.Protocol
	port     int32
}

// conflicts: the same port and protocol, on the same address or on every
// address.
func (p hostPort) conflicts(o hostPort) bool {
	return p.port == o.port && p.protocol == o.protocol && (p.ip == o.ip || p.ip == "0.0.0.0" || o.ip == "0.0.0.0")
}

// podHostPorts are the host ports of the pod's containers.
func podHostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = "0.0.0.0"
			}
			if hp.protocol == "" {
				hp.protocol = v1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	return out
}

// admitPod runs admission for a pod the agent syncs for the first time;
// it returns the rejection, if any, after recording the kubelet's Warning
// event. Pods that ended, or are being deleted, are not admitted (they
// will not run).
func (a *Agent) admitPod(ctx context.Context, w *podWorker, pod *v1.Pod) (*rejection, error) {
	n := w.node
	node, err := a.nodeObject(ctx, n, false)
	if err != nil {
		return nil, err
	}
	// The eviction manager's admission runs first, as the kubelet's
	// handlers are ordered.
	rej := n.evictionAdmit(pod)
	if rej == nil {
		rej = n.admissions.admit(pod, node)
	}
	if rej != nil && rej.reason == predicateNodeAffinity {
		// As the kubelet: when node affinity is the reason, the labels the
		// agent knows may be stale (a label added just before the pod was
		// created); read the node again and retry.
		if fresh, err := a.nodeObject(ctx, n, true); err == nil {
			rej = n.admissions.admit(pod, fresh)
		}
	}
	if rej != nil {
		a.log.Info("pod rejected", "pod", w.key(), "node", n.name, "reason", rej.reason, "message", rej.message)
		a.events.podEvent(pod, "", n, v1.EventTypeWarning, rej.reason, rej.message)
	}
	return rej, nil
}

// nodeObject is the node's Node as the node informer last saw it, or as
// the server has it now when fresh is set or the informer has not seen it
// yet.
func (a *Agent) nodeObject(ctx context.Context, n *node, fresh bool) (*v1.Node, error) {
	if !fresh && a.nodeLister != nil {
		if node, err := a.nodeLister.Get(n.name); err == nil {
			return node, nil
		}
	}
	node, err := a.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", n.name, err)
	}
	return node, nil
}

// syncRejected writes the status of a pod the node rejected, as the
// kubelet's rejectPod: phase Failed with the reason and message, the QoS
// class and start time, and no condition of the kubelet's; nothing runs.
func (a *Agent) syncRejected(ctx context.Context, w *podWorker, pod *v1.Pod, now time.Time) (time.Time, error) {
	rej := w.rejected
	st := v1.PodStatus{
		Phase:     v1.PodFailed,
		Reason:    rej.reason,
		Message:   "Pod was rejected: " + rej.message,
		QOSClass:  pod.Status.QOSClass,
		StartTime: pod.Status.StartTime,
	}
	if st.QOSClass == "" {
		st.QOSClass = podQOS(pod)
	}
	if st.StartTime == nil || st.StartTime.IsZero() {
		st.StartTime = ptr.To(metav1.NewTime(now))
	}
	for _, c := range pod.Status.Conditions {
		if !conditionByKubelet(c.Type) {
			st.Conditions = append(st.Conditions, c)
		}
	}
	pod, err := a.writeStatus(ctx, w, pod, st)
	if err != nil {
		return time.Time{}, err
	}
	if pod.DeletionTimestamp != nil && !w.deleteSent {
		// Deleted before the rejection was written (the server deletes
		// pods that ended at once): nothing runs, it can go.
		if err := a.deletePod(ctx, pod); err != nil {
			return time.Time{}, err
		}
		w.deleteSent = true
	}
	return time.Time{}, nil
}
