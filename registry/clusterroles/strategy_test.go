package clusterroles

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidate(t *testing.T) {
	s := NewStrategy()
	ctx := context.Background()
	tests := []struct {
		name string
		role rbacv1.ClusterRole
		want string
	}{
		{"urls", rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/api/*"}}}}, ""},
		{"resources", rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}}}, ""},
		{"no verbs", rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}},
			"rules[0].verbs: Required value: verbs must contain at least one value"},
		{"no groups", rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}},
			"rules[0].apiGroups: Required value: resource rules must supply at least one api group"},
		{"no resources", rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}}}},
			"rules[0].resources: Required value: resource rules must supply at least one resource"},
		{"both", rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}, ResourceNames: []string{"n"}}}},
			`rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both regular resources and non-resource URLs`},
		{"empty aggregation", rbacv1.ClusterRole{AggregationRule: &rbacv1.AggregationRule{}},
			"aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"},
		{"aggregation", rbacv1.ClusterRole{AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "true"}}}}}, ""},
		{"bad selector", rbacv1.ClusterRole{AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a b": "true"}}}}},
			"aggregationRule.clusterRoleSelectors[0].matchLabels: Invalid value: \"a b\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msgs []string
			for _, e := range s.Validate(ctx, &tt.role) {
				msgs = append(msgs, e.Error())
			}
			got := strings.Join(msgs, "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("errors %q, want %q", got, tt.want)
			}
		})
	}
	if info := s.Info(); info.Namespaced || len(info.ShortNames) != 0 || info.Group != rbacv1.GroupName {
		t.Errorf("info %+v", info)
	}
}
