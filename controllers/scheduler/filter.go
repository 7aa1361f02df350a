package scheduler

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kube's reasons, word for word.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonAffinity      = "node(s) didn't match Pod's node affinity/selector"
	reasonPorts         = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods   = "Too many pods"

	// msgNoNodes is kube-scheduler's ErrNoNodesAvailable.
	msgNoNodes = "no nodes available to schedule pods"
)

// entryState is where a waiting pod is in its scheduling life.
type entryState uint8

const (
	// stateQueued: in the workqueue (or about to be) for an attempt.
	stateQueued entryState = iota
	// stateGated: spec.schedulingGates is not empty; not attempted.
	stateGated
	// stateBinding: assumed on a node, binding in flight.
	stateBinding
	// stateFailing: the attempt failed; status and event in flight.
	stateFailing
	// stateParked: unschedulable, waiting for a cluster change.
	stateParked
)

// podEntry is a pod waiting to be placed, with what the filters need
// computed once.
type podEntry struct {
	key   string
	pod   *v1.Pod
	state entryState

	attempts    int
	lastFailure time.Time
	parkedAt    time.Time
	// readyAt is when the back-off of a queued pod ends (kube's backoffQ
	// until then, activeQ after).
	readyAt time.Time
	// firstAttempt is when the first attempt started (the start of
	// scheduler_pod_scheduling_sli_duration_seconds).
	firstAttempt time.Time
	// missed: a cluster change that may let the pod fit arrived while its
	// failure was being recorded, so it is not parked but retried.
	missed bool
	// queuedAt is when the pod entered the queue (PrioritySort's
	// tie-break after priority).
	queuedAt time.Time
	// priority is spec.priority (0 when unset).
	priority int32
	// nominated is the node preemption made room on ("" for none).
	nominated string

	req, nonZero           resources
	ports                  []hostPort
	matcher                nodeMatcher
	preferred              []preferredTerm
	toleratesUnschedulable bool

	// For InterPodAffinity and PodTopologySpread (podtopology.go).
	affinity *podAffinity       // nil: no terms
	spread   []spreadConstraint // the pod's own constraints
	owner    types.UID          // controller, for the default constraints
}

// usesPodTopology reports whether the pod's placement depends on where
// other pods are, so that a pod arriving on a node may let it fit.
func (e *podEntry) usesPodTopology() bool {
	return (e.affinity != nil && len(e.affinity.required) > 0) || len(e.spread) > 0
}

func newPodEntry(key string, pod *v1.Pod) *podEntry {
	e := &podEntry{key: key}
	e.setPod(pod)
	return e
}

// setPod records the pod's latest object and recomputes what depends on
// its spec.
func (e *podEntry) setPod(pod *v1.Pod) {
	e.pod = pod
	e.priority = podPriority(pod)
	e.req = podRequests(pod, false)
	e.nonZero = podRequests(pod, true)
	e.ports = podHostPorts(pod)
	e.matcher = newNodeMatcher(pod)
	e.preferred = preferredTerms(pod)
	e.affinity = parsePodAffinity(pod)
	e.spread = spreadConstraints(pod)
	e.owner = spreadOwner(pod)
	e.toleratesUnschedulable = tolerated(pod.Spec.Tolerations, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
}

// podPriority is kube's PodPriority: spec.priority, 0 when unset.
func podPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

func tolerated(tolerations []v1.Toleration, taint *v1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(taint) {
			return true
		}
	}
	return false
}

// failureKind says which filter rejected a node.
type failureKind uint8

const (
	fits failureKind = iota
	failUnschedulable
	failTaint
	failAffinity
	failPorts
	failResources
	failSpread
	failSpreadLabel
	failPodAffinity
	failPodAntiAffinity
	failExistingAntiAffinity
)

// failure is why one node cannot take the pod.
type failure struct {
	// node is the node rejected (set by decide, which preemption reads).
	node         *nodeInfo
	kind         failureKind
	taint        v1.Taint
	insufficient []string
}

// unresolvable reports kube's UnschedulableAndUnresolvable: removing
// pods from the node (preemption) would not help.
func (f *failure) unresolvable() bool {
	switch f.kind {
	case failUnschedulable, failTaint, failAffinity, failSpreadLabel, failPodAffinity:
		return true
	}
	return false
}

// reasons are the node's entries in kube's "0/N nodes are available" list.
func (f *failure) reasons() []string {
	switch f.kind {
	case failUnschedulable:
		return []string{reasonUnschedulable}
	case failTaint:
		return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", f.taint.Key, f.taint.Value)}
	case failAffinity:
		return []string{reasonAffinity}
	case failPorts:
		return []string{reasonPorts}
	case failResources:
		return f.insufficient
	case failSpread:
		return []string{reasonSpread}
	case failSpreadLabel:
		return []string{reasonSpreadMissingLabel}
	case failPodAffinity:
		return []string{reasonPodAffinity}
	case failPodAntiAffinity:
		return []string{reasonPodAntiAffinity}
	case failExistingAntiAffinity:
		return []string{reasonExistingAntiAffinity}
	}
	return nil
}

// topologyFilters are PodTopologySpread's and InterPodAffinity's
// PreFilter results for one attempt; nil ones (and a nil
// *topologyFilters) have nothing to check.
type topologyFilters struct {
	spread   *spreadFilter
	affinity *affinityFilter
}

// filter runs kube's filters in plugin order and stops at the first that
// rejects the node. PodTopologySpread and InterPodAffinity, last in
// kube's order, run when tf has them.
func filter(e *podEntry, ni *nodeInfo, tf *topologyFilters) failure {
	node := ni.node
	if node.Spec.Unschedulable && !e.toleratesUnschedulable {
		return failure{kind: failUnschedulable}
	}
	for i := range ni.taints {
		t := &ni.taints[i]
		if t.Effect != v1.TaintEffectNoSchedule && t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(e.pod.Spec.Tolerations, t) {
			return failure{kind: failTaint, taint: *t}
		}
	}
	if !e.matcher.matches(node) {
		return failure{kind: failAffinity}
	}
	for _, hp := range e.ports {
		if ni.portConflict(hp) {
			return failure{kind: failPorts}
		}
	}
	if insufficient := insufficientResources(e, ni); len(insufficient) > 0 {
		return failure{kind: failResources, insufficient: insufficient}
	}
	if tf != nil {
		if tf.spread != nil {
			if k := tf.spread.check(ni); k != fits {
				return failure{kind: k}
			}
		}
		if tf.affinity != nil {
			if k := tf.affinity.check(node); k != fits {
				return failure{kind: k}
			}
		}
	}
	return failure{kind: fits}
}

// insufficientResources is kube's NodeResourcesFit fitsRequest.
func insufficientResources(e *podEntry, ni *nodeInfo) []string {
	var out []string
	if int64(ni.pods)+1 > ni.allowedPods {
		out = append(out, reasonTooManyPods)
	}
	r := &e.req
	if r.IsZero() {
		return out
	}
	free := func(alloc, used int64) int64 { return alloc - used }
	if r.MilliCPU > 0 && r.MilliCPU > free(ni.allocatable.MilliCPU, ni.requested.MilliCPU) {
		out = append(out, "Insufficient cpu")
	}
	if r.Memory > 0 && r.Memory > free(ni.allocatable.Memory, ni.requested.Memory) {
		out = append(out, "Insufficient memory")
	}
	if r.EphemeralStorage > 0 && r.EphemeralStorage > free(ni.allocatable.EphemeralStorage, ni.requested.EphemeralStorage) {
		out = append(out, "Insufficient ephemeral-storage")
	}
	for name, v := range r.Scalar {
		if v > free(ni.allocatable.Scalar[name], ni.requested.Scalar[name]) {
			out = append(out, fmt.Sprintf("Insufficient %v", name))
		}
	}
	return out
}
