package scheduler

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds what the InterPodAffinity and PodTopologySpread plugins
// read of pods, parsed once when a pod is seen rather than per attempt.

// podTerm is one PodAffinityTerm (or a weighted one) of a pod.
type podTerm struct {
	// namespaces are the term's namespaces, or the pod's own when it names
	// neither namespaces nor a namespaceSelector.
	namespaces []string
	// nsSelector matches namespaces by their labels: labels.Nothing() when
	// the term has none, everything when it is {}.
	nsSelector  labels.Selector
	selector    labels.Selector
	topologyKey string
	weight      int64
}

// newPodTerm parses a term of a pod in namespace ns. A selector that does
// not parse (validation refuses those) matches nothing.
func newPodTerm(ns string, t *v1.PodAffinityTerm, weight int64) podTerm {
	out := podTerm{topologyKey: t.TopologyKey, weight: weight}
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		out.namespaces = []string{ns}
	} else {
		out.namespaces = t.Namespaces
	}
	var err error
	if out.selector, err = metav1.LabelSelectorAsSelector(t.LabelSelector); err != nil {
		out.selector = labels.Nothing()
	}
	if out.nsSelector, err = metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
		out.nsSelector = labels.Nothing()
	}
	return out
}

// matches reports whether a pod in namespace ns (whose namespace has
// labels nsLabels) with labels podLabels is one the term selects.
func (t *podTerm) matches(ns string, podLabels, nsLabels map[string]string) bool {
	if !slices.Contains(t.namespaces, ns) && !t.nsSelector.Matches(labels.Set(nsLabels)) {
		return false
	}
	return t.selector.Matches(labels.Set(podLabels))
}

// podAffinity is a pod's inter-pod affinity and anti-affinity terms.
type podAffinity struct {
	required, requiredAnti   []podTerm
	preferred, preferredAnti []podTerm
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

// topologyOf fills in what the pod-topology plugins read of a pod bound
// to a node.
func (p *assignedPod) setTopology(pod *v1.Pod) {
	p.ns = pod.Namespace
	p.labels = pod.Labels
	p.owner = spreadOwner(pod)
	p.terminating = pod.DeletionTimestamp != nil
	p.affinity = parsePodAffinity(pod)
}

// topologyPair is one domain: a node label key and value.
type topologyPair struct{ key, value string }
