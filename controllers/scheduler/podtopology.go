package scheduler

import (
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"unique"

	"github.com/corekube/corekube/controllers/internal/intern"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds what the InterPodAffinity and PodTopologySpread plugins
// read of pods, parsed once when a pod is seen rather than per attempt.

// podSelector is a parsed label selector with an identity, under which
// labelSets remember whether it matched them.
type podSelector struct {
	sel labels.Selector
	id  uint64
}

// selectorIDs numbers podSelectors (0 is no selector).
var selectorIDs atomic.Uint64

func newPodSelector(ls *metav1.LabelSelector) podSelector {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		// Validation refuses these; match nothing.
		sel = labels.Nothing()
	}
	return podSelector{sel: sel, id: selectorIDs.Add(1)}
}

// matchesPod reports whether the selector selects an existing pod: the
// pods of a cluster share few distinct label sets, so the answer is
// remembered on the set and the pod's labels are not read again.
func (s *podSelector) matchesPod(p *assignedPod) bool {
	ls := p.lset
	if ls == nil {
		return s.sel.Matches(labels.Set(p.labels))
	}
	for i := range ls.memo {
		if ls.memo[i].id == s.id {
			return ls.memo[i].ok
		}
	}
	ok := s.sel.Matches(labels.Set(ls.labels))
	ls.memo[ls.next] = selectorMemo{id: s.id, ok: ok}
	ls.next = (ls.next + 1) % uint8(len(ls.memo))
	return ok
}

// labelSet is one distinct set of pod labels, shared by the cached pods
// that carry it (a replica set's pods do), with the latest selectors'
// verdicts on it.
type labelSet struct {
	labels map[string]string
	key    string
	refs   int
	memo   [2]selectorMemo
	next   uint8
}

type selectorMemo struct {
	id uint64
	ok bool
}

// labelsKey is a canonical spelling of a label set.
func labelsKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return b.String()
}

// podTerm is one PodAffinityTerm (or a weighted one) of a pod.
type podTerm struct {
	// namespaces are the term's namespaces, or the pod's own when it names
	// neither namespaces nor a namespaceSelector.
	namespaces []string
	// nsSelector matches namespaces by their labels; nil when the term
	// has none (it matches no namespace then).
	nsSelector  labels.Selector
	selector    podSelector
	topologyKey string
	weight      int64
}

// newPodTerm parses a term of a pod in namespace ns.
func newPodTerm(ns string, t *v1.PodAffinityTerm, weight int64) podTerm {
	out := podTerm{topologyKey: t.TopologyKey, weight: weight, selector: newPodSelector(t.LabelSelector)}
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		out.namespaces = []string{unique.Make(ns).Value()}
	} else {
		for _, n := range t.Namespaces {
			out.namespaces = append(out.namespaces, unique.Make(n).Value())
		}
	}
	if t.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		out.nsSelector = sel
	}
	return out
}

// selectsNamespace reports whether the term covers namespace ns.
func (t *podTerm) selectsNamespace(ns string, nsLabels map[string]map[string]string) bool {
	if slices.Contains(t.namespaces, ns) {
		return true
	}
	return t.nsSelector != nil && t.nsSelector.Matches(labels.Set(nsLabels[ns]))
}

// matches reports whether a pod in namespace ns (whose namespace has
// labels nsLabels) with labels podLabels is one the term selects.
func (t *podTerm) matches(ns string, podLabels map[string]string, nsLabels map[string]map[string]string) bool {
	return t.selectsNamespace(ns, nsLabels) && t.selector.sel.Matches(labels.Set(podLabels))
}

// matchesPod is matches for a cached pod.
func (t *podTerm) matchesPod(p *assignedPod, nsLabels map[string]map[string]string) bool {
	return t.selectsNamespace(p.ns, nsLabels) && t.selector.matchesPod(p)
}

// podAffinity is a pod's inter-pod affinity and anti-affinity terms.
type podAffinity struct {
	required, requiredAnti   []podTerm
	preferred, preferredAnti []podTerm

	// key spells the terms and the pod's namespace: the cache shares one
	// podAffinity among its pods with equal terms (a replica set's), so
	// that whether the terms select the pod being placed is worked out
	// once per attempt (memo), not once per pod.
	key  string
	refs int
	memo affinityMemo
}

// affinityMemo is whether each term of a podAffinity selects the pod of
// attempt epoch.
type affinityMemo struct {
	epoch                                     uint64
	required, requiredAnti, preferred, preAnt []bool
}

// selects returns the memo for the pod in namespace ns with labels
// podLabels, computing it for a new attempt.
func (a *podAffinity) selects(epoch uint64, ns string, podLabels map[string]string, nsLabels map[string]map[string]string) *affinityMemo {
	m := &a.memo
	if m.epoch == epoch && epoch != 0 {
		return m
	}
	fill := func(dst []bool, terms []podTerm) []bool {
		dst = dst[:0]
		for i := range terms {
			dst = append(dst, terms[i].matches(ns, podLabels, nsLabels))
		}
		return dst
	}
	m.required = fill(m.required, a.required)
	m.requiredAnti = fill(m.requiredAnti, a.requiredAnti)
	m.preferred = fill(m.preferred, a.preferred)
	m.preAnt = fill(m.preAnt, a.preferredAnti)
	m.epoch = epoch
	return m
}

// parsePodAffinity returns the pod's terms, nil when it has none.
func parsePodAffinity(pod *v1.Pod) *podAffinity {
	a := pod.Spec.Affinity
	if a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		return nil
	}
	out := &podAffinity{}
	required := func(terms []v1.PodAffinityTerm) []podTerm {
		var ts []podTerm
		for i := range terms {
			ts = append(ts, newPodTerm(pod.Namespace, &terms[i], 1))
		}
		return ts
	}
	preferred := func(terms []v1.WeightedPodAffinityTerm) []podTerm {
		var ts []podTerm
		for i := range terms {
			ts = append(ts, newPodTerm(pod.Namespace, &terms[i].PodAffinityTerm, int64(terms[i].Weight)))
		}
		return ts
	}
	if pa := a.PodAffinity; pa != nil {
		out.required = required(pa.RequiredDuringSchedulingIgnoredDuringExecution)
		out.preferred = preferred(pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		out.requiredAnti = required(pa.RequiredDuringSchedulingIgnoredDuringExecution)
		out.preferredAnti = preferred(pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if len(out.required)+len(out.requiredAnti)+len(out.preferred)+len(out.preferredAnti) == 0 {
		return nil
	}
	if spec, err := json.Marshal([]any{a.PodAffinity, a.PodAntiAffinity}); err == nil {
		out.key = pod.Namespace + "\x00" + string(spec)
	}
	return out
}

// spreadOwnerKinds are the controllers whose pods kube's system default
// spreading applies to (services aside: see defaultConstraints).
var spreadOwnerKinds = []string{"ReplicaSet", "StatefulSet", "ReplicationController"}

// spreadOwner is the UID of the pod's controller when it is one of
// spreadOwnerKinds.
func spreadOwner(pod *v1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && slices.Contains(spreadOwnerKinds, ref.Kind) {
		return ref.UID
	}
	return ""
}

// setTopology fills in what the pod-topology plugins read of a pod bound
// to a node.
func (p *assignedPod) setTopology(pod *v1.Pod) {
	p.ns = intern.String(pod.Namespace)
	p.labels = pod.Labels
	p.owner = types.UID(intern.String(string(spreadOwner(pod))))
	p.terminating = pod.DeletionTimestamp != nil
	p.affinity = parsePodAffinity(pod)
}

// topologyPair is one domain: a node label key and value.
type topologyPair struct{ key, value string }
