package scheduler

import (
	"fmt"
	"sort"
	"strings"
)

// fitErrorMessage is kube's FitError.Error() without what the post-filter
// (preemption) adds:
//
//	0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu.
//
// Each reason is counted once per node that gave it; the "N reason"
// strings are sorted as strings, as kube sorts them.
func fitErrorMessage(numNodes int, failures []failure) string {
	reasons := map[string]int{}
	for i := range failures {
		for _, r := range failures[i].reasons() {
			reasons[r]++
		}
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", numNodes, histogram(reasons))
}

func histogram(counts map[string]int) string {
	out := make([]string, 0, len(counts))
	for reason, n := range counts {
		out = append(out, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
