package rbac

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ReconcileClusterRole returns existing with what expected has and it
// lacks (labels, annotations, rules, aggregation selectors), as kube's
// start-up reconciliation in its union mode, and whether that changed
// anything. A role annotated autoupdate "false" is left alone.
func ReconcileClusterRole(existing, expected *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	if existing.Annotations[AutoUpdateAnnotation] == "false" {
		return existing, false
	}
	out := existing.DeepCopy()
	out.Labels = mergeMaps(expected.Labels, out.Labels)
	out.Annotations = mergeMaps(expected.Annotations, out.Annotations)
	if expected.AggregationRule != nil {
		if out.AggregationRule == nil {
			out.AggregationRule = &rbacv1.AggregationRule{}
		}
		for _, sel := range expected.AggregationRule.ClusterRoleSelectors {
			found := false
			for _, have := range out.AggregationRule.ClusterRoleSelectors {
				if equality.Semantic.DeepEqual(sel, have) {
					found = true
					break
				}
			}
			if !found {
				out.AggregationRule.ClusterRoleSelectors = append(out.AggregationRule.ClusterRoleSelectors, sel)
			}
		}
	}
	if _, missing := Covers(out.Rules, expected.Rules); len(missing) > 0 {
		out.Rules = append(out.Rules, missing...)
	}
	return out, !equality.Semantic.DeepEqual(out, existing)
}

// ReconcileClusterRoleBinding returns existing with the subjects,
// labels and annotations of expected it lacks; recreate is true when the
// roleRef differs (immutable, so kube deletes and recreates the binding).
func ReconcileClusterRoleBinding(existing, expected *rbacv1.ClusterRoleBinding) (out *rbacv1.ClusterRoleBinding, changed, recreate bool) {
	if existing.Annotations[AutoUpdateAnnotation] == "false" {
		return existing, false, false
	}
	if existing.RoleRef != expected.RoleRef {
		out = expected.DeepCopy()
		out.Subjects = append(append([]rbacv1.Subject(nil), existing.Subjects...), missingSubjects(existing.Subjects, expected.Subjects)...)
		return out, true, true
	}
	out = existing.DeepCopy()
	out.Labels = mergeMaps(expected.Labels, out.Labels)
	out.Annotations = mergeMaps(expected.Annotations, out.Annotations)
	out.Subjects = append(out.Subjects, missingSubjects(existing.Subjects, expected.Subjects)...)
	return out, !equality.Semantic.DeepEqual(out, existing), false
}

func missingSubjects(have, want []rbacv1.Subject) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// mergeMaps returns base with over's entries on top (over wins).
func mergeMaps(base, over map[string]string) map[string]string {
	if len(base) == 0 {
		return over
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// AggregatedRules is what kube's ClusterRole aggregation controller gives
// role: the rules of every other ClusterRole matching one of its
// selectors, in name order, each once. ok is false when role has no
// aggregation rule or a selector does not parse.
func AggregatedRules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) (rules []rbacv1.PolicyRule, ok bool) {
	if role.AggregationRule == nil {
		return nil, false
	}
	var sels []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, false
		}
		sels = append(sels, sel)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	rules = []rbacv1.PolicyRule{}
	for _, sel := range sels {
		for _, other := range sorted {
			if other.Name == role.Name || !sel.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, r := range other.Rules {
				dup := false
				for _, have := range rules {
					if equality.Semantic.DeepEqual(have, r) {
						dup = true
						break
					}
				}
				if !dup {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, true
}
