package scheduler

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const zoneKey = v1.LabelTopologyZone

// topoNode is a ready node with room for many pods and the given labels
// (key=value pairs); its hostname label is its name.
func topoNode(name string, kv ...string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

// zoned is three nodes a1, b1, c1 in zones a, b, c.
func zoned() []*v1.Node {
	return []*v1.Node{topoNode("a1", zoneKey, "a"), topoNode("b1", zoneKey, "b"), topoNode("c1", zoneKey, "c")}
}

// topoPod is a pod in namespace "ns" with labels (key=value pairs),
// bound to node unless node is "".
func topoPod(name, node string, kv ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{}, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c"}}}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

// placed puts n pods labelled kv on node.
func placed(node string, n int, kv ...string) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, topoPod(fmt.Sprintf("%s-%d-%v", node, i, kv), node, kv...))
	}
	return out
}

// testCluster is a scheduler's cache filled with nodes and bound pods.
func testCluster(nodes []*v1.Node, pods []*v1.Pod) *nodeCache {
	c := newNodeCache()
	for _, n := range nodes {
		c.setNode(n)
	}
	for _, pod := range pods {
		p := &assignedPod{node: pod.Spec.NodeName, req: podRequests(pod, false), nonZero: podRequests(pod, true)}
		p.setTopology(pod)
		c.setPod(pod.Namespace+"/"+pod.Name, p)
	}
	return c
}

func selector(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func spreadOn(key string, maxSkew int32, when v1.UnsatisfiableConstraintAction, sel *metav1.LabelSelector) v1.TopologySpreadConstraint {
	return v1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: sel}
}

// filterAll runs every filter for pod on every node, PreFilter first, and
// returns each node's reason ("" when it fits), by node name.
func filterAll(c *nodeCache, pod *v1.Pod, nsLabels map[string]map[string]string) map[string]string {
	e := newPodEntry(pod.Namespace+"/"+pod.Name, pod)
	nodes := c.candidates()
	tf := &topologyFilters{spread: newSpreadFilter(e, nodes), affinity: newAffinityFilter(e, nodes, c.affinityPods, nsLabels, c.nextEpoch())}
	out := map[string]string{}
	for _, ni := range nodes {
		f := filter(e, ni, tf)
		if f.kind == fits {
			out[ni.name] = ""
		} else {
			out[ni.name] = f.reasons()[0]
		}
	}
	return out
}

func TestSpreadFilter(t *testing.T) {
	web := func(cs ...v1.TopologySpreadConstraint) *v1.Pod {
		p := topoPod("new", "", "app", "web")
		p.Spec.TopologySpreadConstraints = cs
		return p
	}
	hard := spreadOn(zoneKey, 1, v1.DoNotSchedule, selector("app", "web"))
	ok, skew := "", reasonSpread
	tests := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		pod   *v1.Pod
		want  map[string]string
	}{
		{"only the emptiest zone within maxSkew 1", zoned(),
			slices.Concat(placed("a1", 2, "app", "web"), placed("b1", 1, "app", "web")),
			web(hard), map[string]string{"a1": skew, "b1": skew, "c1": ok}},
		{"maxSkew 2", zoned(),
			slices.Concat(placed("a1", 2, "app", "web"), placed("b1", 1, "app", "web")),
			web(spreadOn(zoneKey, 2, v1.DoNotSchedule, selector("app", "web"))), map[string]string{"a1": skew, "b1": ok, "c1": ok}},
		{"other labels, namespaces and terminating pods are not counted", zoned(),
			slices.Concat(placed("a1", 2, "app", "db"), func() []*v1.Pod {
				p := topoPod("other-ns", "a1", "app", "web")
				p.Namespace = "other"
				q := topoPod("terminating", "b1", "app", "web")
				q.DeletionTimestamp = &metav1.Time{}
				return []*v1.Pod{p, q}
			}()),
			web(hard), map[string]string{"a1": ok, "b1": ok, "c1": ok}},
		{"a node without the key", append(zoned(), topoNode("x1")), nil,
			web(hard), map[string]string{"a1": ok, "b1": ok, "c1": ok, "x1": reasonSpreadMissingLabel}},
		{"a pod its selector does not match adds no skew", zoned(),
			slices.Concat(placed("a1", 1, "app", "web")),
			web(spreadOn(zoneKey, 1, v1.DoNotSchedule, selector("app", "db"))), map[string]string{"a1": ok, "b1": ok, "c1": ok}},
		{"minDomains above the domains makes the minimum 0", zoned(),
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 1, "app", "web"), placed("c1", 1, "app", "web")),
			web(func() v1.TopologySpreadConstraint { c := hard; c.MinDomains = ptr.To[int32](4); return c }()),
			map[string]string{"a1": skew, "b1": skew, "c1": skew}},
		{"minDomains met", zoned(),
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 1, "app", "web"), placed("c1", 1, "app", "web")),
			web(func() v1.TopologySpreadConstraint { c := hard; c.MinDomains = ptr.To[int32](3); return c }()),
			map[string]string{"a1": ok, "b1": ok, "c1": ok}},
		{"nodeAffinityPolicy Honor: zones the pod cannot go to are no domain", zoned(),
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 2, "app", "web")),
			func() *v1.Pod { p := web(hard); p.Spec.NodeSelector = map[string]string{"pool": "x"}; return p }(),
			map[string]string{"a1": reasonAffinity, "b1": reasonAffinity, "c1": reasonAffinity}},
		{"nodeAffinityPolicy Honor counts only the selected zones", []*v1.Node{
			topoNode("a1", zoneKey, "a", "pool", "x"), topoNode("b1", zoneKey, "b", "pool", "x"), topoNode("c1", zoneKey, "c")},
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 2, "app", "web")),
			func() *v1.Pod { p := web(hard); p.Spec.NodeSelector = map[string]string{"pool": "x"}; return p }(),
			map[string]string{"a1": ok, "b1": skew, "c1": reasonAffinity}},
		{"nodeAffinityPolicy Ignore counts every zone", []*v1.Node{
			topoNode("a1", zoneKey, "a", "pool", "x"), topoNode("b1", zoneKey, "b", "pool", "x"), topoNode("c1", zoneKey, "c")},
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 2, "app", "web")),
			func() *v1.Pod {
				c := hard
				c.NodeAffinityPolicy = ptr.To(v1.NodeInclusionPolicyIgnore)
				p := web(c)
				p.Spec.NodeSelector = map[string]string{"pool": "x"}
				return p
			}(),
			map[string]string{"a1": skew, "b1": skew, "c1": reasonAffinity}},
		{"nodeTaintsPolicy Honor leaves the tainted zone out", func() []*v1.Node {
			ns := zoned()
			ns[2].Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}
			return ns
		}(),
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 2, "app", "web")),
			web(func() v1.TopologySpreadConstraint {
				c := hard
				c.NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
				return c
			}()),
			map[string]string{"a1": ok, "b1": skew, "c1": "node(s) had untolerated taint {k: }"}},
		{"nodeTaintsPolicy Ignore (default) counts the tainted zone", func() []*v1.Node {
			ns := zoned()
			ns[2].Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}
			return ns
		}(),
			slices.Concat(placed("a1", 1, "app", "web"), placed("b1", 2, "app", "web")),
			web(hard),
			map[string]string{"a1": skew, "b1": skew, "c1": "node(s) had untolerated taint {k: }"}},
		{"matchLabelKeys counts only the same revision", zoned(),
			slices.Concat(placed("a1", 3, "app", "web", "rev", "1"), placed("b1", 1, "app", "web", "rev", "2")),
			func() *v1.Pod {
				c := hard
				c.MatchLabelKeys = []string{"rev"}
				p := web(c)
				p.Labels["rev"] = "2"
				return p
			}(),
			map[string]string{"a1": ok, "b1": skew, "c1": ok}},
		{"hostname domains past the short list", func() []*v1.Node {
			var ns []*v1.Node
			for i := range 12 {
				ns = append(ns, topoNode(fmt.Sprintf("h%02d", i)))
			}
			return ns
		}(), func() []*v1.Pod {
			var ps []*v1.Pod
			for i := range 11 {
				ps = append(ps, placed(fmt.Sprintf("h%02d", i), 1, "app", "web")...)
			}
			return ps
		}(), web(spreadOn(v1.LabelHostname, 1, v1.DoNotSchedule, selector("app", "web"))),
			map[string]string{"h00": skew, "h05": skew, "h10": skew, "h11": ok}},
		{"ScheduleAnyway is no filter", zoned(), placed("a1", 5, "app", "web"),
			web(spreadOn(zoneKey, 1, v1.ScheduleAnyway, selector("app", "web"))), map[string]string{"a1": ok, "b1": ok, "c1": ok}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := filterAll(testCluster(tc.nodes, tc.pods), tc.pod, nil)
			for node, want := range tc.want {
				if got[node] != want {
					t.Errorf("%s: %q, want %q", node, got[node], want)
				}
			}
		})
	}
}

func affinityTerm(key string, sel *metav1.LabelSelector) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel}
}

func withPodAffinity(p *v1.Pod, required, anti []v1.PodAffinityTerm) *v1.Pod {
	p.Spec.Affinity = &v1.Affinity{}
	if len(required) > 0 {
		p.Spec.Affinity.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}
	}
	if len(anti) > 0 {
		p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: anti}
	}
	return p
}

func TestAffinityFilter(t *testing.T) {
	ok := ""
	nodes := func() []*v1.Node {
		return []*v1.Node{topoNode("a1", zoneKey, "a"), topoNode("a2", zoneKey, "a"), topoNode("b1", zoneKey, "b"), topoNode("x1")}
	}
	tests := []struct {
		name     string
		pods     []*v1.Pod
		pod      *v1.Pod
		nsLabels map[string]map[string]string
		want     map[string]string
	}{
		{"affinity: the zone of the db pod", placed("a1", 1, "app", "db"),
			withPodAffinity(topoPod("new", "", "app", "web"), []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "db"))}, nil),
			nil, map[string]string{"a1": ok, "a2": ok, "b1": reasonPodAffinity, "x1": reasonPodAffinity}},
		{"affinity: the first of a group goes where its key is", nil,
			withPodAffinity(topoPod("new", "", "app", "web"), []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "web"))}, nil),
			nil, map[string]string{"a1": ok, "a2": ok, "b1": ok, "x1": reasonPodAffinity}},
		{"affinity: nothing matches and neither does the pod", nil,
			withPodAffinity(topoPod("new", "", "app", "web"), []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "db"))}, nil),
			nil, map[string]string{"a1": reasonPodAffinity, "b1": reasonPodAffinity}},
		{"affinity: a pod of another namespace does not count", func() []*v1.Pod {
			p := topoPod("db", "a1", "app", "db")
			p.Namespace = "other"
			return []*v1.Pod{p}
		}(),
			withPodAffinity(topoPod("new", "", "app", "web"), []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "db"))}, nil),
			nil, map[string]string{"a1": reasonPodAffinity, "b1": reasonPodAffinity}},
		{"affinity: namespaceSelector selects the other namespace", func() []*v1.Pod {
			p := topoPod("db", "a1", "app", "db")
			p.Namespace = "other"
			return []*v1.Pod{p}
		}(),
			withPodAffinity(topoPod("new", "", "app", "web"), []v1.PodAffinityTerm{{TopologyKey: zoneKey, LabelSelector: selector("app", "db"), NamespaceSelector: selector("team", "data")}}, nil),
			map[string]map[string]string{"other": {"team": "data"}}, map[string]string{"a1": ok, "a2": ok, "b1": reasonPodAffinity}},
		{"affinity: namespaces lists the other namespace", func() []*v1.Pod {
			p := topoPod("db", "b1", "app", "db")
			p.Namespace = "other"
			return []*v1.Pod{p}
		}(),
			withPodAffinity(topoPod("new", "", "app", "web"), []v1.PodAffinityTerm{{TopologyKey: zoneKey, LabelSelector: selector("app", "db"), Namespaces: []string{"other"}}}, nil),
			nil, map[string]string{"a1": reasonPodAffinity, "b1": ok}},
		{"anti-affinity by hostname", placed("a1", 1, "app", "web"),
			withPodAffinity(topoPod("new", "", "app", "web"), nil, []v1.PodAffinityTerm{affinityTerm(v1.LabelHostname, selector("app", "web"))}),
			nil, map[string]string{"a1": reasonPodAntiAffinity, "a2": ok, "b1": ok, "x1": ok}},
		{"anti-affinity by zone", placed("a1", 1, "app", "web"),
			withPodAffinity(topoPod("new", "", "app", "web"), nil, []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "web"))}),
			nil, map[string]string{"a1": reasonPodAntiAffinity, "a2": reasonPodAntiAffinity, "b1": ok, "x1": ok}},
		{"existing pods' anti-affinity (symmetry)", []*v1.Pod{
			withPodAffinity(topoPod("db", "a1", "app", "db"), nil, []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "web"))})},
			topoPod("new", "", "app", "web"),
			nil, map[string]string{"a1": reasonExistingAntiAffinity, "a2": reasonExistingAntiAffinity, "b1": ok, "x1": ok}},
		{"existing anti-affinity that does not select the pod", []*v1.Pod{
			withPodAffinity(topoPod("db", "a1", "app", "db"), nil, []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "cache"))})},
			topoPod("new", "", "app", "web"),
			nil, map[string]string{"a1": ok, "a2": ok, "b1": ok}},
		{"affinity is checked before anti-affinity", placed("a1", 1, "app", "web"),
			withPodAffinity(topoPod("new", "", "app", "web"),
				[]v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "web"))},
				[]v1.PodAffinityTerm{affinityTerm(v1.LabelHostname, selector("app", "web"))}),
			nil, map[string]string{"a1": reasonPodAntiAffinity, "a2": ok, "b1": reasonPodAffinity, "x1": reasonPodAffinity}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := filterAll(testCluster(nodes(), tc.pods), tc.pod, tc.nsLabels)
			for node, want := range tc.want {
				if got[node] != want {
					t.Errorf("%s: %q, want %q", node, got[node], want)
				}
			}
		})
	}
}

// scores runs the pod-topology scores over every node of c, as feasible.
func scores(c *nodeCache, pod *v1.Pod) (affinity, spread map[string]int64) {
	e := newPodEntry(pod.Namespace+"/"+pod.Name, pod)
	nodes := c.candidates()
	a := affinityScores(e, nodes, nodes, c.affinityPods, nil, c.nextEpoch(), nil)
	s := spreadScores(e, nodes, nodes, nil)
	affinity, spread = map[string]int64{}, map[string]int64{}
	for i, ni := range nodes {
		if a != nil {
			affinity[ni.name] = a[i]
		}
		if s != nil {
			spread[ni.name] = s[i]
		}
	}
	return affinity, spread
}

func TestSpreadScore(t *testing.T) {
	rsPod := func(name, node string) *v1.Pod {
		p := topoPod(name, node, "app", "web")
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", UID: "rs-1", Controller: ptr.To(true)}}
		return p
	}
	tests := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		pod   *v1.Pod
		want  map[string]int64
	}{
		// Zone counts 2/1/0, 3 domains: each pod weighs log(5) = 1.61;
		// raw scores 3, 2, 0 normalised as 100*(3+0-s)/3.
		{"fewer matching pods score higher", zoned(),
			slices.Concat(placed("a1", 2, "app", "web"), placed("b1", 1, "app", "web")),
			func() *v1.Pod {
				p := topoPod("new", "", "app", "web")
				p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spreadOn(zoneKey, 1, v1.ScheduleAnyway, selector("app", "web"))}
				return p
			}(),
			map[string]int64{"a1": 0, "b1": 33, "c1": 100}},
		{"a node without the key scores 0", append(zoned(), topoNode("x1")),
			placed("a1", 1, "app", "web"),
			func() *v1.Pod {
				p := topoPod("new", "", "app", "web")
				p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spreadOn(zoneKey, 1, v1.ScheduleAnyway, selector("app", "web"))}
				return p
			}(),
			map[string]int64{"a1": 0, "b1": 100, "c1": 100, "x1": 0}},
		{"all equal: all 100", zoned(), nil,
			func() *v1.Pod {
				p := topoPod("new", "", "app", "web")
				p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spreadOn(zoneKey, 1, v1.ScheduleAnyway, selector("app", "web"))}
				return p
			}(),
			map[string]int64{"a1": 100, "b1": 100, "c1": 100}},
		// System defaults: hostname maxSkew 3 (weight log(3+2)) and zone
		// maxSkew 5 (log(3+2)) over the replica set's pods: a1 has 2 of
		// them: 2*1.61+2 + 2*1.61+4 = 12.4 -> 12; b1, c1: 2+4 = 6.
		{"system defaults for a replica set's pods", zoned(),
			[]*v1.Pod{rsPod("w1", "a1"), rsPod("w2", "a1"), topoPod("other", "b1", "app", "web")},
			rsPod("new", ""),
			map[string]int64{"a1": 50, "b1": 100, "c1": 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := scores(testCluster(tc.nodes, tc.pods), tc.pod)
			for node, want := range tc.want {
				if got[node] != want {
					t.Errorf("%s: %d, want %d (all %v)", node, got[node], want, got)
				}
			}
		})
	}
	t.Run("a pod without constraints or controller is not scored", func(t *testing.T) {
		_, got := scores(testCluster(zoned(), nil), topoPod("new", "", "app", "web"))
		if len(got) != 0 {
			t.Errorf("scores %v, want none", got)
		}
	})
}

func TestAffinityScore(t *testing.T) {
	preferred := func(p *v1.Pod, w int32, anti bool, term v1.PodAffinityTerm) *v1.Pod {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &v1.Affinity{}
		}
		wt := []v1.WeightedPodAffinityTerm{{Weight: w, PodAffinityTerm: term}}
		if anti {
			p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: wt}
		} else {
			p.Spec.Affinity.PodAffinity = &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: wt}
		}
		return p
	}
	tests := []struct {
		name string
		pods []*v1.Pod
		pod  *v1.Pod
		want map[string]int64
	}{
		{"preferred affinity", placed("a1", 1, "app", "db"),
			preferred(topoPod("new", "", "app", "web"), 10, false, affinityTerm(zoneKey, selector("app", "db"))),
			map[string]int64{"a1": 100, "b1": 0, "c1": 0}},
		{"preferred anti-affinity", placed("a1", 1, "app", "db"),
			preferred(topoPod("new", "", "app", "web"), 10, true, affinityTerm(zoneKey, selector("app", "db"))),
			map[string]int64{"a1": 0, "b1": 100, "c1": 100}},
		// a1: +5 (affinity to 1 db pod), b1: +5*2 db pods - 8 cache = 2:
		// scaled between 0 (c1) and 5 (a1).
		{"affinity and anti-affinity summed per domain", slices.Concat(placed("a1", 1, "app", "db"), placed("b1", 2, "app", "db"), placed("b1", 1, "app", "cache")),
			func() *v1.Pod {
				p := preferred(topoPod("new", "", "app", "web"), 5, false, affinityTerm(zoneKey, selector("app", "db")))
				p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
					{Weight: 8, PodAffinityTerm: affinityTerm(zoneKey, selector("app", "cache"))}}}
				return p
			}(),
			map[string]int64{"a1": 100, "b1": 40, "c1": 0}},
		{"existing pods' required affinity counts with weight 1", []*v1.Pod{
			withPodAffinity(topoPod("db", "b1", "app", "db"), []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "web"))}, nil)},
			topoPod("new", "", "app", "web"),
			map[string]int64{"a1": 0, "b1": 100, "c1": 0}},
		{"existing pods' preferred anti-affinity", []*v1.Pod{
			preferred(topoPod("db", "b1", "app", "db"), 3, true, affinityTerm(zoneKey, selector("app", "web")))},
			topoPod("new", "", "app", "web"),
			map[string]int64{"a1": 100, "b1": 0, "c1": 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := scores(testCluster(zoned(), tc.pods), tc.pod)
			for node, want := range tc.want {
				if got[node] != want {
					t.Errorf("%s: %d, want %d (all %v)", node, got[node], want, got)
				}
			}
		})
	}
	t.Run("nothing to score", func(t *testing.T) {
		got, _ := scores(testCluster(zoned(), placed("a1", 3, "app", "db")), topoPod("new", "", "app", "web"))
		if len(got) != 0 {
			t.Errorf("scores %v, want none", got)
		}
	})
}

// TestStripPodKeepsTopology: the informer's transform keeps what the
// pod-topology plugins read: inter-pod affinity, spread constraints and
// the controller reference (not the other owners).
func TestStripPodKeepsTopology(t *testing.T) {
	pod := withPodAffinity(topoPod("p", "n", "app", "web"), []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "db"))}, nil)
	pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spreadOn(zoneKey, 1, v1.DoNotSchedule, selector("app", "web"))}
	pod.OwnerReferences = []metav1.OwnerReference{
		{Kind: "ConfigMap", Name: "x", UID: "cm"},
		{Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)},
	}
	obj, err := stripPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*v1.Pod)
	if got.Spec.Affinity == nil || got.Spec.Affinity.PodAffinity == nil || len(got.Spec.TopologySpreadConstraints) != 1 {
		t.Errorf("affinity %+v, constraints %+v", got.Spec.Affinity, got.Spec.TopologySpreadConstraints)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "rs" || spreadOwner(got) != "rs" {
		t.Errorf("owner references %+v", got.OwnerReferences)
	}
}

// TestCacheSharesLabelsAndTerms: pods with equal labels and equal terms
// share one label set and one podAffinity, dropped with the last pod.
func TestCacheSharesLabelsAndTerms(t *testing.T) {
	anti := []v1.PodAffinityTerm{affinityTerm(v1.LabelHostname, selector("app", "web"))}
	pods := []*v1.Pod{
		withPodAffinity(topoPod("w1", "a1", "app", "web"), nil, anti),
		withPodAffinity(topoPod("w2", "b1", "app", "web"), nil, anti),
		withPodAffinity(topoPod("d1", "c1", "app", "db"), nil, []v1.PodAffinityTerm{affinityTerm(zoneKey, selector("app", "web"))}),
	}
	c := testCluster(zoned(), pods)
	if len(c.labelSets) != 2 || len(c.affinities) != 2 || c.affinityPods != 3 {
		t.Fatalf("%d label sets, %d affinities, %d pods with terms; want 2, 2, 3", len(c.labelSets), len(c.affinities), c.affinityPods)
	}
	if w1, w2 := c.pods["ns/w1"], c.pods["ns/w2"]; w1.lset != w2.lset || w1.affinity != w2.affinity {
		t.Error("w1 and w2 share neither labels nor terms")
	}
	for _, k := range []string{"ns/w1", "ns/w2", "ns/d1"} {
		c.removePod(k)
	}
	if len(c.labelSets) != 0 || len(c.affinities) != 0 || c.affinityPods != 0 {
		t.Errorf("after removal: %d label sets, %d affinities, %d pods with terms", len(c.labelSets), len(c.affinities), c.affinityPods)
	}
}
