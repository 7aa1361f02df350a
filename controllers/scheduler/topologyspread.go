package scheduler

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
)

// Kube's PodTopologySpread reasons, word for word.
const (
	reasonSpread             = "node(s) didn't match pod topology spread constraints"
	reasonSpreadMissingLabel = reasonSpread + " (missing required label)"
	weightTopologySpread     = 2
)

// spreadConstraint is one topology spread constraint of a pod.
type spreadConstraint struct {
	maxSkew     int64
	topologyKey string
	hard        bool // DoNotSchedule
	minDomains  int
	// selector selects the pods counted; none (sel nil) for a system
	// default constraint, which counts the pods of owner.
	selector podSelector
	owner    types.UID
	// Node inclusion policies: nodes that fail them are no domain.
	honorAffinity, honorTaints bool
}

// spreadConstraints parses the pod's constraints, kube's
// filterTopologySpreadConstraints: matchLabelKeys become requirements
// on the pod's values of those labels.
func spreadConstraints(pod *v1.Pod) []spreadConstraint {
	var out []spreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		sel := newPodSelector(c.LabelSelector)
		for _, key := range c.MatchLabelKeys {
			if v, ok := pod.Labels[key]; ok {
				if r, err := labels.NewRequirement(key, selection.Equals, []string{v}); err == nil {
					sel.sel = sel.sel.Add(*r)
				}
			}
		}
		sc := spreadConstraint{
			maxSkew:       int64(c.MaxSkew),
			topologyKey:   c.TopologyKey,
			hard:          c.WhenUnsatisfiable != v1.ScheduleAnyway,
			minDomains:    1,
			selector:      sel,
			honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == v1.NodeInclusionPolicyHonor,
			honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor,
		}
		if c.MinDomains != nil {
			sc.minDomains = int(*c.MinDomains)
		}
		out = append(out, sc)
	}
	return out
}

// defaultConstraints are kube's system default constraints (hostname
// maxSkew 3, zone maxSkew 5, ScheduleAnyway) for a pod without
// constraints of its own. Kube applies them when services, replication
// controllers, replica sets or stateful sets select the pod, counting
// the pods all of them select; corekube, which keeps no informers on
// those, applies them to pods whose controller is a ReplicaSet,
// StatefulSet or ReplicationController and counts the pods of the same
// controller (what the controller's selector selects, unless selectors
// overlap). Pods only a Service selects are not spread.
func defaultConstraints(owner types.UID) []spreadConstraint {
	if owner == "" {
		return nil
	}
	return []spreadConstraint{
		{maxSkew: 3, topologyKey: v1.LabelHostname, minDomains: 1, owner: owner, honorAffinity: true},
		{maxSkew: 5, topologyKey: v1.LabelTopologyZone, minDomains: 1, owner: owner, honorAffinity: true},
	}
}

// counts reports whether p is one of the pods c counts for a pod in ns:
// kube's countPodsMatchSelector (terminating pods are not counted).
func (c *spreadConstraint) counts(p *assignedPod, ns string) bool {
	if p.terminating || p.ns != ns {
		return false
	}
	if c.selector.sel == nil {
		return p.owner == c.owner
	}
	return c.selector.matchesPod(p)
}

func (c *spreadConstraint) countOn(ni *nodeInfo, ns string) int64 {
	if c.selector.sel == nil {
		return int64(ni.owners[c.owner])
	}
	var n int64
	for _, p := range ni.podList {
		if c.counts(p, ns) {
			n++
		}
	}
	return n
}

// includes is kube's matchNodeInclusionPolicies.
func (c *spreadConstraint) includes(e *podEntry, node *v1.Node) bool {
	if c.honorAffinity && !e.matcher.matches(node) {
		return false
	}
	if c.honorTaints {
		for i := range node.Spec.Taints {
			t := &node.Spec.Taints[i]
			if (t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute) && !tolerated(e.pod.Spec.Tolerations, t) {
				return false
			}
		}
	}
	return true
}

func hasAllKeys(ni *nodeInfo, cs []spreadConstraint) bool {
	for i := range cs {
		if _, ok := ni.label(cs[i].topologyKey); !ok {
			return false
		}
	}
	return true
}

// spreadFilter is PodTopologySpread's PreFilter result for one attempt:
// per DoNotSchedule constraint, the matching pods of every domain and the
// global minimum.
type spreadFilter struct {
	constraints []spreadConstraint
	domains     []domainCounts
	minMatch    []int64
	selfMatch   []int64
}

// newSpreadFilter counts over every node, or returns nil when the pod has
// no DoNotSchedule constraint.
func newSpreadFilter(e *podEntry, nodes []*nodeInfo) *spreadFilter {
	var hard []spreadConstraint
	for _, c := range e.spread {
		if c.hard {
			hard = append(hard, c)
		}
	}
	if len(hard) == 0 {
		return nil
	}
	f := &spreadFilter{constraints: hard, domains: make([]domainCounts, len(hard)), minMatch: make([]int64, len(hard)), selfMatch: make([]int64, len(hard))}
	for i := range hard {
		if hard[i].selector.sel.Matches(labels.Set(e.pod.Labels)) {
			f.selfMatch[i] = 1
		}
	}
	ns := e.pod.Namespace
	for _, ni := range nodes {
		if !hasAllKeys(ni, hard) {
			continue
		}
		for i := range hard {
			c := &hard[i]
			if !c.includes(e, ni.node) {
				continue
			}
			v, _ := ni.label(c.topologyKey)
			f.domains[i].counts[f.domains[i].add(v)] += c.countOn(ni, ns)
		}
	}
	for i := range hard {
		if len(f.domains[i].vals) < hard[i].minDomains {
			// Fewer eligible domains than minDomains: the minimum is 0.
			continue
		}
		lo := int64(math.MaxInt32)
		for _, n := range f.domains[i].counts {
			lo = min(lo, n)
		}
		f.minMatch[i] = lo
	}
	return f
}

// check is kube's Filter: placing the pod on node must not make its
// domain more than maxSkew above the global minimum.
func (f *spreadFilter) check(ni *nodeInfo) failureKind {
	for i := range f.constraints {
		c := &f.constraints[i]
		v, ok := ni.label(c.topologyKey)
		if !ok {
			return failSpreadLabel
		}
		if f.domains[i].count(v)+f.selfMatch[i]-f.minMatch[i] > c.maxSkew {
			return failSpread
		}
	}
	return fits
}

// spreadScores is PodTopologySpread's PreScore, Score and NormalizeScore
// for the ScheduleAnyway constraints (the pod's own, or the system
// defaults): fewer matching pods in a node's domains scores higher. It
// returns nil when there is nothing to score.
func spreadScores(e *podEntry, nodes, feasible []*nodeInfo, out []int64) []int64 {
	var cs []spreadConstraint
	requireAll := len(e.spread) > 0
	if requireAll {
		for _, c := range e.spread {
			if !c.hard {
				cs = append(cs, c)
			}
		}
	} else {
		cs = defaultConstraints(e.owner)
	}
	if len(cs) == 0 || len(feasible) == 0 {
		return nil
	}
	ns := e.pod.Namespace
	// Domains of the feasible nodes (hostname domains are counted per node
	// when scoring).
	domains := make([]domainCounts, len(cs))
	out = out[:0]
	const ignored = -1
	numIgnored := 0
	for _, ni := range feasible {
		if requireAll && !hasAllKeys(ni, cs) {
			out = append(out, ignored)
			numIgnored++
			continue
		}
		out = append(out, 0)
		for i := range cs {
			if cs[i].topologyKey == v1.LabelHostname {
				continue
			}
			v, _ := ni.label(cs[i].topologyKey)
			domains[i].add(v)
		}
	}
	weights := make([]float64, len(cs))
	for i := range cs {
		size := len(domains[i].vals)
		if cs[i].topologyKey == v1.LabelHostname {
			size = len(feasible) - numIgnored
		}
		weights[i] = math.Log(float64(size + 2))
	}
	for _, ni := range nodes {
		if requireAll && !hasAllKeys(ni, cs) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if c.topologyKey == v1.LabelHostname || !c.includes(e, ni.node) {
				continue
			}
			v, _ := ni.label(c.topologyKey)
			if j := domains[i].find(v); j >= 0 {
				domains[i].counts[j] += c.countOn(ni, ns)
			}
		}
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for j, ni := range feasible {
		if out[j] == ignored {
			continue
		}
		var score float64
		for i := range cs {
			c := &cs[i]
			v, ok := ni.label(c.topologyKey)
			if !ok {
				continue
			}
			var n int64
			if c.topologyKey == v1.LabelHostname {
				n = c.countOn(ni, ns)
			} else {
				n = domains[i].count(v)
			}
			score += float64(n)*weights[i] + float64(c.maxSkew-1)
		}
		s := int64(math.Round(score))
		out[j] = s
		lo, hi = min(lo, s), max(hi, s)
	}
	for j := range out {
		switch {
		case out[j] == ignored:
			out[j] = 0
		case hi == 0:
			out[j] = maxNodeScore
		default:
			out[j] = maxNodeScore * (hi + lo - out[j]) / hi
		}
	}
	return out
}

// domainCounts counts pods per domain (value of a topology key): a short
// list searched in order, as keys other than the hostname have few
// values, with an index once it grows.
type domainCounts struct {
	vals   []string
	counts []int64
	index  map[string]int
}

const domainListMax = 8

func (d *domainCounts) find(v string) int {
	if d.index != nil {
		if j, ok := d.index[v]; ok {
			return j
		}
		return -1
	}
	for j := range d.vals {
		if d.vals[j] == v {
			return j
		}
	}
	return -1
}

// add registers domain v (count 0) unless known and returns its index.
func (d *domainCounts) add(v string) int {
	if j := d.find(v); j >= 0 {
		return j
	}
	d.vals = append(d.vals, v)
	d.counts = append(d.counts, 0)
	j := len(d.vals) - 1
	if d.index != nil {
		d.index[v] = j
	} else if len(d.vals) > domainListMax {
		d.index = make(map[string]int, 2*len(d.vals))
		for k, val := range d.vals {
			d.index[val] = k
		}
	}
	return j
}

func (d *domainCounts) count(v string) int64 {
	if j := d.find(v); j >= 0 {
		return d.counts[j]
	}
	return 0
}
