package scheduler

import (
	v1 "k8s.io/api/core/v1"
)

// maxNodeScore is kube's framework.MaxNodeScore.
const maxNodeScore int64 = 100

// Weights of kube's default profile for the score plugins done here.
const (
	weightTaintToleration  = 3
	weightNodeAffinity     = 2
	weightLeastAllocated   = 1
	weightBalancedAllocate = 1
)

// scoreBuf is scratch space reused across attempts.
type scoreBuf struct {
	counts []int64
	best   []int
	// the pod-topology plugins' scores (topologyScores)
	affinity, spread, extra []int64
}

// scoreNodes scores the feasible nodes as kube's default profile does and
// returns the indices of those with the best total. extra, when not nil,
// holds the weighted scores of the plugins scored elsewhere.
func scoreNodes(e *podEntry, feasible []*nodeInfo, extra []int64, buf *scoreBuf) []int {
	n := len(feasible)
	if cap(buf.counts) < 2*n {
		buf.counts = make([]int64, 2*n)
	}
	buf.counts = buf.counts[:2*n]
	clear(buf.counts)
	taints, affinity := buf.counts[:n], buf.counts[n:]
	best := buf.best[:0]
	var maxTaints, maxAffinity int64
	preferTolerations := preferNoScheduleTolerations(e.pod.Spec.Tolerations)
	for i, ni := range feasible {
		for j := range ni.taints {
			t := &ni.taints[j]
			if t.Effect == v1.TaintEffectPreferNoSchedule && !tolerated(preferTolerations, t) {
				taints[i]++
			}
		}
		maxTaints = max(maxTaints, taints[i])
		for j := range e.preferred {
			if e.preferred[j].term.matches(ni.node) {
				affinity[i] += e.preferred[j].weight
			}
		}
		maxAffinity = max(maxAffinity, affinity[i])
	}
	var top int64 = -1
	for i, ni := range feasible {
		// DefaultNormalizeScore: taints reversed (fewer is better).
		taintScore := maxNodeScore
		if maxTaints > 0 {
			taintScore = maxNodeScore - taints[i]*maxNodeScore/maxTaints
		}
		var affinityScore int64
		if maxAffinity > 0 {
			affinityScore = affinity[i] * maxNodeScore / maxAffinity
		}
		total := weightTaintToleration*taintScore +
			weightNodeAffinity*affinityScore +
			weightLeastAllocated*leastAllocated(e, ni) +
			weightBalancedAllocate*balancedAllocation(e, ni)
		if extra != nil {
			total += extra[i]
		}
		switch {
		case total > top:
			top = total
			best = append(best[:0], i)
		case total == top:
			best = append(best, i)
		}
	}
	buf.best = best
	return best
}

// preferNoScheduleTolerations are the tolerations kube's TaintToleration
// score considers: those for PreferNoSchedule or any effect.
func preferNoScheduleTolerations(tolerations []v1.Toleration) []v1.Toleration {
	var out []v1.Toleration
	for _, t := range tolerations {
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			out = append(out, t)
		}
	}
	return out
}

// leastAllocated is kube's LeastAllocated strategy over cpu and memory
// (weight 1 each) with the scoring defaults for pods without requests.
func leastAllocated(e *podEntry, ni *nodeInfo) int64 {
	cpu := leastRequested(ni.nonZero.MilliCPU+e.nonZero.MilliCPU, ni.allocatable.MilliCPU)
	mem := leastRequested(ni.nonZero.Memory+e.nonZero.Memory, ni.allocatable.Memory)
	return (cpu + mem) / 2
}

func leastRequested(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxNodeScore / capacity
}

// balancedAllocation is kube's NodeResourcesBalancedAllocation over cpu
// and memory: the closer their used fractions, the higher.
func balancedAllocation(e *podEntry, ni *nodeInfo) int64 {
	fraction := func(requested, capacity int64) float64 {
		if capacity == 0 {
			return 1
		}
		return min(float64(requested)/float64(capacity), 1)
	}
	cpu := fraction(ni.requested.MilliCPU+e.req.MilliCPU, ni.allocatable.MilliCPU)
	mem := fraction(ni.requested.Memory+e.req.Memory, ni.allocatable.Memory)
	std := cpu - mem
	if std < 0 {
		std = -std
	}
	std /= 2
	return int64((1 - std) * float64(maxNodeScore))
}
