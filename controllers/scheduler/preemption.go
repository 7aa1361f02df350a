package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Kube's DefaultPreemptionArgs defaults: the dry run stops once it has
// this share of the potential nodes (or this many) as candidates.
const (
	minCandidateNodesPercentage = 10
	minCandidateNodesAbsolute   = 100
)

// Kube's post-filter messages, word for word.
const (
	preemptionNotHelpful  = "Preemption is not helpful for scheduling"
	preemptionNoVictims   = "No preemption victims found for incoming pod"
	preemptionNever       = "not eligible due to preemptionPolicy=Never."
	preemptionTerminating = "not eligible due to a terminating pod on the nominated node."
)

// preemption is the outcome of kube's DefaultPreemption post-filter for
// one unschedulable pod.
type preemption struct {
	// node is where room is made: the pod's new nominated node ("" when
	// preemption does not help).
	node    string
	victims []*v1.Pod
	// msg is what the post-filter adds to the FitError ("preemption: ..."),
	// empty when victims were chosen.
	msg string
	// clearNomination: no node helps, so the pod's nominatedNodeName is
	// cleared (kube's ModeOverride with no node); otherwise it is kept.
	clearNomination bool
	// unnominated are the lower-priority pods nominated to node, whose
	// nomination is cleared.
	unnominated []*v1.Pod
}

// candidate is a node where evicting victims lets the pod fit.
type candidate struct {
	node *nodeInfo
	// victims are sorted most important first (kube's MoreImportantPod).
	victims    []*assignedPod
	violations int // victims whose eviction violates a PodDisruptionBudget
}

// pdbInfo is a PodDisruptionBudget as preemption reads it.
type pdbInfo struct {
	namespace string
	selector  labels.Selector
	allowed   int32
	disrupted map[string]metav1.Time
}

// compilePDBs parses the budgets' selectors once per preemption; budgets
// with an invalid selector match nothing, as in kube.
func compilePDBs(pdbs []*policyv1.PodDisruptionBudget) []pdbInfo {
	out := make([]pdbInfo, 0, len(pdbs))
	for _, p := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || sel.Empty() {
			// An empty selector matches no pod for preemption.
			continue
		}
		out = append(out, pdbInfo{namespace: p.Namespace, selector: sel, allowed: p.Status.DisruptionsAllowed, disrupted: p.Status.DisruptedPods})
	}
	return out
}

// splitByPDBViolation is kube's filterPodsWithPDBViolation: it walks pods
// in order, spending each matching budget's allowed disruptions; a pod
// that drives one below zero would violate it. Pods the budget already
// lists as disrupted spend nothing. Both results keep pods' order.
func splitByPDBViolation(pods []*assignedPod, pdbs []pdbInfo) (violating, nonViolating []*assignedPod) {
	if len(pdbs) == 0 {
		return nil, pods
	}
	allowed := make([]int32, len(pdbs))
	for i := range pdbs {
		allowed[i] = pdbs[i].allowed
	}
	for _, p := range pods {
		violates := false
		if len(p.labels) > 0 {
			set := labels.Set(p.labels)
			for i := range pdbs {
				b := &pdbs[i]
				if b.namespace != p.ns || !b.selector.Matches(set) {
					continue
				}
				if _, ok := b.disrupted[p.name]; ok {
					continue
				}
				allowed[i]--
				if allowed[i] < 0 {
					violates = true
				}
			}
		}
		if violates {
			violating = append(violating, p)
		} else {
			nonViolating = append(nonViolating, p)
		}
	}
	return violating, nonViolating
}

// startTime is kube's GetPodStartTime: status.startTime, or now for a pod
// not started yet.
func startTime(p *assignedPod, now time.Time) time.Time {
	if p.startTime != nil {
		return p.startTime.Time
	}
	return now
}

// moreImportant is kube's MoreImportantPod: higher priority, then the pod
// that started first.
func moreImportant(a, b *assignedPod, now time.Time) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return startTime(a, now).Before(startTime(b, now))
}

// simNode copies what the filters read of ni into sim, with requests and
// ports of its own so pods can be added and removed.
func simNode(sim, ni *nodeInfo) {
	*sim = nodeInfo{
		name: ni.name, node: ni.node, taints: ni.taints,
		allocatable: ni.allocatable, allowedPods: ni.allowedPods,
		requested: ni.requested.Clone(), pods: ni.pods,
		// Shared, read only: the topology filters read the node's labels.
		nodeTopology: ni.nodeTopology,
	}
	if len(ni.ports) > 0 {
		sim.ports = make(map[hostPort]int, len(ni.ports))
		for k, v := range ni.ports {
			sim.ports[k] = v
		}
	}
}

// selectVictims is kube's SelectVictimsOnNode: on a copy of ni (with the
// pods nominated there that are at least as important as e), remove every
// lower-priority pod; if e then fits, add back as many as still let it
// fit, those whose eviction would violate a budget first, each group most
// important first. It returns the victims (most important first) and how
// many violate a budget, or why e cannot fit there (fail.kind != fits;
// noVictims when no pod has a lower priority).
func selectVictims(e *podEntry, ni *nodeInfo, nominated []*podEntry, lower []*assignedPod, pdbs []pdbInfo, now time.Time) (victims []*assignedPod, violations int, fail failure, noVictims bool) {
	if len(lower) == 0 {
		return nil, 0, failure{kind: failResources}, true
	}
	var sim nodeInfo
	simNode(&sim, ni)
	for _, n := range nominated {
		if n != e && n.priority >= e.priority {
			sim.addPod(&assignedPod{req: n.req, nonZero: n.nonZero, ports: n.ports})
		}
	}
	for _, p := range lower {
		sim.removePod(p)
	}
	// Resources and ports only: the pod-topology filters are not run
	// again with the victims gone, as kube's are (the nodes tried failed
	// on resources or ports; see doc.go).
	if f := filter(e, &sim, nil); f.kind != fits {
		return nil, 0, f, false
	}
	potential := slices.Clone(lower)
	slices.SortStableFunc(potential, func(a, b *assignedPod) int {
		switch {
		case moreImportant(a, b, now):
			return -1
		case moreImportant(b, a, now):
			return 1
		}
		return 0
	})
	violating, nonViolating := splitByPDBViolation(potential, pdbs)
	reprieve := func(p *assignedPod) bool {
		sim.addPod(p)
		if filter(e, &sim, nil).kind == fits {
			return true
		}
		sim.removePod(p)
		victims = append(victims, p)
		return false
	}
	for _, p := range violating {
		if !reprieve(p) {
			violations++
		}
	}
	for _, p := range nonViolating {
		reprieve(p)
	}
	if len(violating) > 0 && len(nonViolating) > 0 {
		slices.SortStableFunc(victims, func(a, b *assignedPod) int {
			switch {
			case moreImportant(a, b, now):
				return -1
			case moreImportant(b, a, now):
				return 1
			}
			return 0
		})
	}
	return victims, violations, failure{kind: fits}, false
}

// candidateScore is what kube's pickOneNodeForPreemption compares, in its
// order: PDB violations, the highest victim priority, the sum of the
// victims' priorities (each shifted to be non-negative), the number of
// victims (all the smaller the better), then the earliest start among the
// highest-priority victims (the later the better).
type candidateScore struct {
	violations  int
	highest     int32
	sum         int64
	count       int
	earliestTop time.Time
}

func scoreCandidate(c *candidate, now time.Time) candidateScore {
	s := candidateScore{violations: c.violations, count: len(c.victims)}
	if len(c.victims) == 0 {
		return s
	}
	s.highest = c.victims[0].priority
	for _, v := range c.victims {
		s.highest = max(s.highest, v.priority)
		s.sum += int64(v.priority) + int64(math.MaxInt32) + 1
	}
	for _, v := range c.victims {
		if v.priority != s.highest {
			continue
		}
		if t := startTime(v, now); s.earliestTop.IsZero() || t.Before(s.earliestTop) {
			s.earliestTop = t
		}
	}
	return s
}

// compareScores orders a before b when a is the better candidate.
func compareScores(a, b candidateScore) int {
	if c := cmp.Compare(a.violations, b.violations); c != 0 {
		return c
	}
	if c := cmp.Compare(a.highest, b.highest); c != 0 {
		return c
	}
	if c := cmp.Compare(a.sum, b.sum); c != 0 {
		return c
	}
	if c := cmp.Compare(a.count, b.count); c != 0 {
		return c
	}
	return b.earliestTop.Compare(a.earliestTop)
}

// pickCandidate is kube's pickOneNodeForPreemption: the best candidate by
// compareScores, the first of equals.
func pickCandidate(cands []candidate, now time.Time) int {
	if len(cands) == 0 {
		return -1
	}
	best, bestScore := 0, scoreCandidate(&cands[0], now)
	for i := 1; i < len(cands); i++ {
		if s := scoreCandidate(&cands[i], now); compareScores(s, bestScore) < 0 {
			best, bestScore = i, s
		}
	}
	return best
}

// terminatingByPreemption is kube's podTerminatingByPreemption: the pod is
// being deleted and says it was preempted.
func terminatingByPreemption(p *assignedPod) bool {
	if p.deletionTimestamp == nil || p.disruption == nil {
		return false
	}
	return p.disruption.Status == v1.ConditionTrue && p.disruption.Reason == v1.PodReasonPreemptionByScheduler
}

// numCandidates is kube's calculateNumCandidates.
func numCandidates(potential int) int {
	return min(max(potential*minCandidateNodesPercentage/100, minCandidateNodesAbsolute), potential)
}

// preempt is kube's DefaultPreemption post-filter for e, which fits no
// node for the reasons in failures (one per node, all nodes); s.mu is held.
func (s *Scheduler) preempt(e *podEntry, failures []failure) preemption {
	s.metrics.preemptionAttempt()
	if p := e.pod.Spec.PreemptionPolicy; p != nil && *p == v1.PreemptNever {
		return preemption{msg: "preemption: " + preemptionNever}
	}
	// lower lists the pods on ni of lower priority: the possible victims.
	lower := func(ni *nodeInfo) []*assignedPod {
		var out []*assignedPod
		for _, p := range ni.podsOn() {
			if p.priority < e.priority && p.name != "" {
				out = append(out, p)
			}
		}
		return out
	}
	if e.nominated != "" {
		eligible := true
		for i := range failures {
			if f := &failures[i]; f.node.name == e.nominated {
				if !f.unresolvable() {
					// A lower-priority pod still terminating there: the
					// room made for e is on its way.
					for _, p := range lower(f.node) {
						if terminatingByPreemption(p) {
							eligible = false
							break
						}
					}
				}
				break
			}
		}
		if !eligible {
			return preemption{msg: "preemption: " + preemptionTerminating}
		}
	}

	numNodes := len(failures)
	potential := 0
	for i := range failures {
		if !failures[i].unresolvable() {
			potential++
		}
	}
	// reasons is the post-filter's message by node, should no node do:
	// kube's "not helpful" for the nodes no eviction can cure, and for
	// the others what the dry run found.
	reasons := map[string]int{}
	if n := numNodes - potential; n > 0 {
		reasons[preemptionNotHelpful] = n
	}
	if potential == 0 {
		return preemption{clearNomination: true, msg: fmt.Sprintf("preemption: 0/%d nodes are available: %s.", numNodes, histogram(reasons))}
	}

	var pdbs []pdbInfo
	if s.pdbs != nil {
		if list, err := s.pdbs.List(labels.Everything()); err == nil {
			pdbs = compilePDBs(list)
		}
	}
	now := s.cfg.Clock.Now()
	want := numCandidates(potential)
	var nonViolating, violating []candidate
	// The dry run starts at a rotating node (kube's at a random one).
	offset := s.preemptOffset % numNodes
	s.preemptOffset++
	for i := range numNodes {
		f := &failures[(offset+i)%numNodes]
		if f.unresolvable() {
			continue
		}
		ni := f.node
		low := lower(ni)
		if len(low) == 0 {
			reasons[preemptionNoVictims]++
			continue
		}
		victims, violations, fail, none := selectVictims(e, ni, s.nominated[ni.name], low, pdbs, now)
		if fail.kind == fits && len(victims) > 0 {
			c := candidate{node: ni, victims: victims, violations: violations}
			if violations == 0 {
				nonViolating = append(nonViolating, c)
			} else {
				violating = append(violating, c)
			}
			if len(nonViolating) > 0 && len(nonViolating)+len(violating) >= want {
				break
			}
			continue
		}
		if none || fail.kind == fits {
			// (kube treats a node needing no victims as an error there)
			reasons[preemptionNoVictims]++
			continue
		}
		for _, r := range fail.reasons() {
			reasons[r]++
		}
	}
	cands := append(nonViolating, violating...)
	if len(cands) == 0 {
		return preemption{clearNomination: true, msg: fmt.Sprintf("preemption: 0/%d nodes are available: %s.", numNodes, histogram(reasons))}
	}
	best := &cands[pickCandidate(cands, now)]
	out := preemption{node: best.node.name, victims: make([]*v1.Pod, len(best.victims))}
	for i, v := range best.victims {
		out.victims[i] = v.asPod()
	}
	// Pods of lower priority nominated there may no longer fit: their
	// nomination goes (a status change, which does not requeue them, as
	// in kube's queue).
	for _, n := range slices.Clone(s.nominated[out.node]) {
		if n != e && n.priority < e.priority {
			s.nominate(n, "")
			out.unnominated = append(out.unnominated, n.pod)
		}
	}
	s.nominate(e, out.node)
	return out
}
