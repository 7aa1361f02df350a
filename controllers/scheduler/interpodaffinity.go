package scheduler

import (
	"math"

	v1 "k8s.io/api/core/v1"
)

// Kube's InterPodAffinity reasons, word for word.
const (
	reasonPodAffinity                = "node(s) didn't match pod affinity rules"
	reasonPodAntiAffinity            = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAntiAffinity       = "node(s) didn't satisfy existing pods anti-affinity rules"
	weightInterPodAffinity           = 2
	hardPodAffinityWeight      int64 = 1 // kube's default InterPodAffinityArgs
)

// affinityFilter is InterPodAffinity's PreFilter result for one attempt:
// per domain, how many term matches there are.
type affinityFilter struct {
	required     []podTerm
	requiredAnti []podTerm
	// existingAnti: existing pods' required anti-affinity terms that
	// select the pod, by the domain of the existing pod's node.
	existingAnti map[topologyPair]int
	// affinity: existing pods matching all of the pod's required affinity
	// terms, per term's domain; anti: those matching each anti term.
	affinity, anti map[topologyPair]int
	// selfMatch: the pod matches all of its own required affinity terms
	// (the first pod of a group may go anywhere its terms have a domain).
	selfMatch bool
}

// newAffinityFilter computes the filter's counts over every node, or
// returns nil when the plugin has nothing to check: neither the pod nor
// any existing pod has required terms.
func newAffinityFilter(e *podEntry, nodes []*nodeInfo, affinityPods int, nsLabels map[string]map[string]string, epoch uint64) *affinityFilter {
	var required, requiredAnti []podTerm
	if e.affinity != nil {
		required, requiredAnti = e.affinity.required, e.affinity.requiredAnti
	}
	if len(required) == 0 && len(requiredAnti) == 0 && affinityPods == 0 {
		return nil
	}
	pod := e.pod
	f := &affinityFilter{required: required, requiredAnti: requiredAnti}
	for _, ni := range nodes {
		node := ni.node
		for _, p := range ni.withAffinity {
			if len(p.affinity.requiredAnti) == 0 {
				continue
			}
			m := p.affinity.selects(epoch, pod.Namespace, pod.Labels, nsLabels)
			for i := range p.affinity.requiredAnti {
				t := &p.affinity.requiredAnti[i]
				if !m.requiredAnti[i] {
					continue
				}
				if v, ok := ni.label(t.topologyKey); ok {
					if f.existingAnti == nil {
						f.existingAnti = map[topologyPair]int{}
					}
					f.existingAnti[topologyPair{t.topologyKey, v}]++
				}
			}
		}
		if len(required) == 0 && len(requiredAnti) == 0 {
			continue
		}
		for _, p := range ni.podList {
			if len(required) > 0 && matchesAllPod(required, p, nsLabels) {
				for i := range required {
					if v, ok := node.Labels[required[i].topologyKey]; ok {
						if f.affinity == nil {
							f.affinity = map[topologyPair]int{}
						}
						f.affinity[topologyPair{required[i].topologyKey, v}]++
					}
				}
			}
			for i := range requiredAnti {
				t := &requiredAnti[i]
				if v, ok := node.Labels[t.topologyKey]; ok && t.matchesPod(p, nsLabels) {
					if f.anti == nil {
						f.anti = map[topologyPair]int{}
					}
					f.anti[topologyPair{t.topologyKey, v}]++
				}
			}
		}
	}
	f.selfMatch = len(required) > 0 && matchesAll(required, pod.Namespace, pod.Labels, nsLabels)
	return f
}

func matchesAll(terms []podTerm, ns string, podLabels map[string]string, nsLabels map[string]map[string]string) bool {
	for i := range terms {
		if !terms[i].matches(ns, podLabels, nsLabels) {
			return false
		}
	}
	return true
}

func matchesAllPod(terms []podTerm, p *assignedPod, nsLabels map[string]map[string]string) bool {
	for i := range terms {
		if !terms[i].matchesPod(p, nsLabels) {
			return false
		}
	}
	return true
}

// check is kube's Filter: affinity, then the pod's anti-affinity, then
// the existing pods' anti-affinity.
func (f *affinityFilter) check(node *v1.Node) failureKind {
	if len(f.required) > 0 {
		podsExist := true
		for i := range f.required {
			v, ok := node.Labels[f.required[i].topologyKey]
			if !ok {
				// Every term's topology label must be on the node.
				return failPodAffinity
			}
			if f.affinity[topologyPair{f.required[i].topologyKey, v}] <= 0 {
				podsExist = false
			}
		}
		// No pod anywhere matches: the pod may go first if it matches its
		// own terms.
		if !podsExist && !(len(f.affinity) == 0 && f.selfMatch) {
			return failPodAffinity
		}
	}
	if len(f.anti) > 0 {
		for i := range f.requiredAnti {
			if v, ok := node.Labels[f.requiredAnti[i].topologyKey]; ok && f.anti[topologyPair{f.requiredAnti[i].topologyKey, v}] > 0 {
				return failPodAntiAffinity
			}
		}
	}
	if len(f.existingAnti) > 0 {
		for k, v := range node.Labels {
			if f.existingAnti[topologyPair{k, v}] > 0 {
				return failExistingAntiAffinity
			}
		}
	}
	return fits
}

// affinityScores is InterPodAffinity's PreScore, Score and NormalizeScore:
// the weights of the terms that match, summed per domain over every node,
// then per feasible node, scaled to 0..100 between the lowest and highest.
// It returns nil when the plugin scores every node 0.
func affinityScores(e *podEntry, nodes, feasible []*nodeInfo, affinityPods int, nsLabels map[string]map[string]string, epoch uint64, out []int64) []int64 {
	var preferred, preferredAnti []podTerm
	if e.affinity != nil {
		preferred, preferredAnti = e.affinity.preferred, e.affinity.preferredAnti
	}
	own := len(preferred) > 0 || len(preferredAnti) > 0
	if !own && affinityPods == 0 {
		return nil
	}
	pod := e.pod
	var topo map[topologyPair]int64
	add := func(node *v1.Node, t *podTerm, w int64) {
		if v, ok := node.Labels[t.topologyKey]; ok {
			if topo == nil {
				topo = map[topologyPair]int64{}
			}
			topo[topologyPair{t.topologyKey, v}] += w
		}
	}
	for _, ni := range nodes {
		node := ni.node
		if len(node.Labels) == 0 {
			continue
		}
		pods := ni.withAffinity
		if own {
			pods = ni.podList
		}
		for _, p := range pods {
			for i := range preferred {
				if preferred[i].matchesPod(p, nsLabels) {
					add(node, &preferred[i], preferred[i].weight)
				}
			}
			for i := range preferredAnti {
				if preferredAnti[i].matchesPod(p, nsLabels) {
					add(node, &preferredAnti[i], -preferredAnti[i].weight)
				}
			}
			a := p.affinity
			if a == nil {
				continue
			}
			// Symmetry: the existing pod's terms about the incoming one.
			if len(a.required)+len(a.preferred)+len(a.preferredAnti) == 0 {
				continue
			}
			m := a.selects(epoch, pod.Namespace, pod.Labels, nsLabels)
			for i := range a.required {
				if m.required[i] {
					add(node, &a.required[i], hardPodAffinityWeight)
				}
			}
			for i := range a.preferred {
				if m.preferred[i] {
					add(node, &a.preferred[i], a.preferred[i].weight)
				}
			}
			for i := range a.preferredAnti {
				if m.preAnt[i] {
					add(node, &a.preferredAnti[i], -a.preferredAnti[i].weight)
				}
			}
		}
	}
	if len(topo) == 0 {
		return nil
	}
	out = out[:0]
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, ni := range feasible {
		var score int64
		for pair, w := range topo {
			if v, ok := ni.node.Labels[pair.key]; ok && v == pair.value {
				score += w
			}
		}
		out = append(out, score)
		lo, hi = min(lo, score), max(hi, score)
	}
	for i := range out {
		if hi > lo {
			out[i] = int64(float64(maxNodeScore) * (float64(out[i]-lo) / float64(hi-lo)))
		} else {
			out[i] = 0
		}
	}
	return out
}
