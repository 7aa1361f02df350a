package scheduler

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// fitErrorMessage is kube's FitError.Error() followed by what the
// DefaultPreemption post-filter says when it finds nothing to preempt:
//
//	0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.
//
// Each reason is counted once per node that gave it; the "N reason"
// strings are sorted as strings, as kube sorts them. Nodes where only
// removing pods could help (ports, resources) are reported as having no
// victims: corekube does not preempt.
func fitErrorMessage(pod *v1.Pod, numNodes int, failures []failure) string {
	reasons := map[string]int{}
	preemption := map[string]int{}
	for i := range failures {
		for _, r := range failures[i].reasons() {
			reasons[r]++
		}
		if failures[i].unresolvable() {
			preemption[preemptionNotHelpful]++
		} else {
			preemption[preemptionNoVictims]++
		}
	}
	msg := fmt.Sprintf("0/%d nodes are available: %s.", numNodes, histogram(reasons))
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return msg + " preemption: not eligible due to preemptionPolicy=Never."
	}
	return msg + fmt.Sprintf(" preemption: 0/%d nodes are available: %s.", numNodes, histogram(preemption))
}

func histogram(counts map[string]int) string {
	out := make([]string, 0, len(counts))
	for reason, n := range counts {
		out = append(out, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
