package scheduler

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// nodeFieldName is the one field node affinity's matchFields may name.
const nodeFieldName = "metadata.name"

// requirement is one parsed NodeSelectorRequirement.
type requirement struct {
	key    string
	op     v1.NodeSelectorOperator
	values []string
	num    int64 // Gt, Lt
}

// matches reports whether a node whose key has value val (present says
// whether it has the key at all) satisfies r, as labels.Selector does.
func (r *requirement) matches(val string, present bool) bool {
	switch r.op {
	case v1.NodeSelectorOpIn:
		return present && slices.Contains(r.values, val)
	case v1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.values, val)
	case v1.NodeSelectorOpExists:
		return present
	case v1.NodeSelectorOpDoesNotExist:
		return !present
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if !present {
			return false
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return false
		}
		if r.op == v1.NodeSelectorOpGt {
			return n > r.num
		}
		return n < r.num
	}
	return false
}

// nodeTerm is one NodeSelectorTerm: all of its requirements must hold.
type nodeTerm struct {
	labels []requirement
	fields []requirement
	// invalid terms match no node, as kube's lazy-error node selector.
	invalid bool
}

func parseTerm(t *v1.NodeSelectorTerm) nodeTerm {
	var out nodeTerm
	for _, e := range t.MatchExpressions {
		r := requirement{key: e.Key, op: e.Operator, values: e.Values}
		switch e.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			out.invalid = out.invalid || len(e.Values) == 0
		case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
			out.invalid = out.invalid || len(e.Values) != 0
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
			if len(e.Values) != 1 {
				out.invalid = true
				break
			}
			n, err := strconv.ParseInt(e.Values[0], 10, 64)
			out.invalid = out.invalid || err != nil
			r.num = n
		default:
			out.invalid = true
		}
		out.labels = append(out.labels, r)
	}
	for _, f := range t.MatchFields {
		if f.Key != nodeFieldName || len(f.Values) != 1 || (f.Operator != v1.NodeSelectorOpIn && f.Operator != v1.NodeSelectorOpNotIn) {
			out.invalid = true
		}
		out.fields = append(out.fields, requirement{key: f.Key, op: f.Operator, values: f.Values})
	}
	return out
}

func (t *nodeTerm) matches(node *v1.Node) bool {
	if t.invalid || (len(t.labels) == 0 && len(t.fields) == 0) {
		return false
	}
	for i := range t.labels {
		val, ok := node.Labels[t.labels[i].key]
		if !t.labels[i].matches(val, ok) {
			return false
		}
	}
	for i := range t.fields {
		if !t.fields[i].matches(node.Name, true) {
			return false
		}
	}
	return true
}

// nodeMatcher is a pod's required node selection: spec.nodeSelector and
// requiredDuringSchedulingIgnoredDuringExecution (terms ORed).
type nodeMatcher struct {
	selector    map[string]string
	hasAffinity bool
	terms       []nodeTerm
}

func newNodeMatcher(pod *v1.Pod) nodeMatcher {
	m := nodeMatcher{selector: pod.Spec.NodeSelector}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		m.hasAffinity = true
		for i := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			m.terms = append(m.terms, parseTerm(&a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i]))
		}
	}
	return m
}

func (m *nodeMatcher) matches(node *v1.Node) bool {
	for k, v := range m.selector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	if !m.hasAffinity {
		return true
	}
	for i := range m.terms {
		if m.terms[i].matches(node) {
			return true
		}
	}
	return false
}

// preferredTerm is one of preferredDuringSchedulingIgnoredDuringExecution.
type preferredTerm struct {
	weight int64
	term   nodeTerm
}

func preferredTerms(pod *v1.Pod) []preferredTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var out []preferredTerm
	for i := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		p := &a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
		if p.Weight == 0 {
			continue
		}
		out = append(out, preferredTerm{weight: int64(p.Weight), term: parseTerm(&p.Preference)})
	}
	return out
}
