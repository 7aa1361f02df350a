package poddisruptionbudgets

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

var ctx = context.Background()

func pdb(tweak func(*policyv1.PodDisruptionBudgetSpec)) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if tweak != nil {
		tweak(&p.Spec)
	}
	return p
}

func minAvail(v intstr.IntOrString) func(*policyv1.PodDisruptionBudgetSpec) {
	return func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = &v }
}

func maxUnavail(v intstr.IntOrString) func(*policyv1.PodDisruptionBudgetSpec) {
	return func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable, s.MaxUnavailable = nil, &v }
}

const invalid = "FieldValueInvalid"

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec func(*policyv1.PodDisruptionBudgetSpec)
		want []string
	}{
		{"reference", nil, nil},
		{"zero", minAvail(intstr.FromInt32(0)), nil},
		{"percent", minAvail(intstr.FromString("50%")), nil},
		{"100 percent", maxUnavail(intstr.FromString("100%")), nil},
		{"0 percent", maxUnavail(intstr.FromString("0%")), nil},
		// corekube requires what kube leaves optional (issue 2).
		{"neither set", func(s *policyv1.PodDisruptionBudgetSpec) { s.MinAvailable = nil }, []string{"FieldValueRequired spec.minAvailable"}},
		{"nil selector", func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector = nil }, []string{"FieldValueRequired spec.selector"}},
		{"empty selector", func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector = &metav1.LabelSelector{} }, nil},
		{"both set", func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(1)) }, []string{invalid + " spec"}},
		{"negative min", minAvail(intstr.FromInt32(-1)), []string{invalid + " spec.minAvailable"}},
		{"negative max", maxUnavail(intstr.FromInt32(-1)), []string{invalid + " spec.maxUnavailable"}},
		{"bad percent", minAvail(intstr.FromString("50")), []string{invalid + " spec.minAvailable"}},
		{"negative percent", minAvail(intstr.FromString("-5%")), []string{invalid + " spec.minAvailable"}},
		{"over 100 percent", maxUnavail(intstr.FromString("101%")), []string{invalid + " spec.maxUnavailable"}},
		{"bad selector label", func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector.MatchLabels = map[string]string{"bad key": "v"} },
			[]string{invalid + " spec.selector.matchLabels"}},
		{"bad selector operator", func(s *policyv1.PodDisruptionBudgetSpec) {
			s.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Foo"}}
		}, []string{invalid + " spec.selector.matchExpressions[0].operator"}},
		{"in without values", func(s *policyv1.PodDisruptionBudgetSpec) {
			s.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}
		}, []string{"FieldValueRequired spec.selector.matchExpressions[0].values"}},
		{"bad selector value", func(s *policyv1.PodDisruptionBudgetSpec) {
			s.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad value"}}}
		}, []string{invalid + " spec.selector.matchExpressions[0].values[0]"}},
		{"eviction policy", func(s *policyv1.PodDisruptionBudgetSpec) { s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow) }, nil},
		{"bad eviction policy", func(s *policyv1.PodDisruptionBudgetSpec) {
			s.UnhealthyPodEvictionPolicy = ptr.To[policyv1.UnhealthyPodEvictionPolicyType]("Never")
		}, []string{"FieldValueNotSupported spec.unhealthyPodEvictionPolicy"}},
	}
	s := NewStrategy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			strategytest.ExpectBoth(t, s, pdb(tc.spec), pdb(tc.spec), pdb(nil), tc.want)
		})
	}
}

func TestValidateMessages(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		spec func(*policyv1.PodDisruptionBudgetSpec)
		want string
	}{
		{maxUnavail(intstr.FromString("101%")),
			`spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"101%"}: must not be greater than 100%`},
		{minAvail(intstr.FromInt32(-1)), `spec.minAvailable: Invalid value: -1: must be greater than or equal to 0`},
		{minAvail(intstr.FromString("x")),
			`spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"x"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')`},
		{func(s *policyv1.PodDisruptionBudgetSpec) {
			s.UnhealthyPodEvictionPolicy = ptr.To[policyv1.UnhealthyPodEvictionPolicyType]("Never")
		},
			`spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"`},
	}
	for _, tc := range tests {
		if errs := s.Validate(ctx, pdb(tc.spec)); len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("got %v\nwant %s", errs, tc.want)
		}
	}
	errs := s.Validate(ctx, pdb(func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(1)) }))
	if len(errs) != 1 || errs[0].Detail != "minAvailable and maxUnavailable cannot be both set" {
		t.Errorf("got %v", errs)
	}
}

func TestValidateUpdateToleratesStoredInvalidLabelValue(t *testing.T) {
	bad := func(s *policyv1.PodDisruptionBudgetSpec) {
		s.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad value"}}}
	}
	s := NewStrategy()
	if errs := s.ValidateUpdate(ctx, pdb(bad), pdb(bad)); len(errs) != 0 {
		t.Errorf("stored invalid value should be tolerated: %v", errs)
	}
	if errs := s.ValidateUpdate(ctx, pdb(bad), pdb(nil)); len(errs) != 1 {
		t.Errorf("new invalid value should be rejected: %v", errs)
	}
}

func TestPrepareForCreate(t *testing.T) {
	p := pdb(nil)
	p.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 3, DisruptionsAllowed: 5, Conditions: []metav1.Condition{{Type: "x"}}}
	NewStrategy().PrepareForCreate(ctx, p)
	if !reflect.DeepEqual(p.Status, policyv1.PodDisruptionBudgetStatus{}) {
		t.Errorf("status %+v", p.Status)
	}
	// The cleared status serializes like the kube reference response.
	b, _ := json.Marshal(p.Status)
	if want := `{"disruptionsAllowed":0,"currentHealthy":0,"desiredHealthy":0,"expectedPods":0}`; string(b) != want {
		t.Errorf("status json %s", b)
	}
}

func TestPrepareForUpdate(t *testing.T) {
	old := pdb(nil)
	old.Status.CurrentHealthy = 3
	p := pdb(minAvail(intstr.FromInt32(1)))
	p.Status.CurrentHealthy = 9
	NewStrategy().PrepareForUpdate(ctx, p, old)
	if p.Status.CurrentHealthy != 3 || p.Spec.MinAvailable.IntVal != 1 {
		t.Errorf("got %+v", p)
	}
}

func TestNormalizeSelector(t *testing.T) {
	req := func(key string, op metav1.LabelSelectorOperator) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op}
	}
	tests := []struct {
		name     string
		in, want *metav1.LabelSelector
	}{
		{"nil", nil, nil},
		{"match all kept", &metav1.LabelSelector{}, &metav1.LabelSelector{}},
		{"match none kept", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(v1beta1SelectorLabel, metav1.LabelSelectorOpExists)}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(v1beta1SelectorLabel, metav1.LabelSelectorOpExists)}}},
		{"reserved key stripped", &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{req(v1beta1SelectorLabel, metav1.LabelSelectorOpExists), req("tier", metav1.LabelSelectorOpExists)},
		}, &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{req("tier", metav1.LabelSelectorOpExists)},
		}},
		{"match-all v1beta1 form stripped", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(v1beta1SelectorLabel, metav1.LabelSelectorOpDoesNotExist)}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pdb(func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector = tc.in })
			NewStrategy().PrepareForCreate(ctx, p)
			if !reflect.DeepEqual(p.Spec.Selector, tc.want) {
				t.Errorf("got %+v, want %+v", p.Spec.Selector, tc.want)
			}
		})
	}
}

func TestSpecChanged(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		name     string
		old, new *policyv1.PodDisruptionBudget
		want     bool
	}{
		{"same", pdb(nil), pdb(nil), false},
		{"status only", pdb(nil), func() *policyv1.PodDisruptionBudget { p := pdb(nil); p.Status.ExpectedPods = 3; return p }(), false},
		{"labels only", pdb(nil), func() *policyv1.PodDisruptionBudget { p := pdb(nil); p.Labels = map[string]string{"a": "b"}; return p }(), false},
		{"nil vs empty match labels", pdb(func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector.MatchLabels = nil }),
			pdb(func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector.MatchLabels = map[string]string{} }), false},
		{"minAvailable", pdb(nil), pdb(minAvail(intstr.FromInt32(3))), true},
		{"selector", pdb(nil), pdb(func(s *policyv1.PodDisruptionBudgetSpec) { s.Selector.MatchLabels["x"] = "y" }), true},
		{"eviction policy", pdb(nil), pdb(func(s *policyv1.PodDisruptionBudgetSpec) {
			s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
		}), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.SpecChanged(tc.new, tc.old); got != tc.want {
				t.Errorf("SpecChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStatusStrategy(t *testing.T) {
	s := NewStatusStrategy()
	old := pdb(nil)
	p := pdb(minAvail(intstr.FromString("90%")))
	p.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3}
	s.PrepareForUpdate(ctx, p, old)
	if !reflect.DeepEqual(p.Spec, old.Spec) || p.Status.CurrentHealthy != 3 {
		t.Errorf("got %+v", p)
	}

	cond := metav1.Condition{Type: "DisruptionAllowed", Status: metav1.ConditionTrue, Reason: "SufficientPods", LastTransitionTime: metav1.Now()}
	tests := []struct {
		name   string
		status policyv1.PodDisruptionBudgetStatus
		want   []string
	}{
		{"zero", policyv1.PodDisruptionBudgetStatus{}, nil},
		{"observed", policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3,
			DesiredHealthy: 2, ExpectedPods: 3, Conditions: []metav1.Condition{cond}}, nil},
		{"negative observedGeneration not checked", policyv1.PodDisruptionBudgetStatus{ObservedGeneration: -1}, nil},
		{"negatives", policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: -1, CurrentHealthy: -1, DesiredHealthy: -1, ExpectedPods: -1},
			[]string{invalid + " status.disruptionsAllowed", invalid + " status.currentHealthy", invalid + " status.desiredHealthy", invalid + " status.expectedPods"}},
		{"duplicate condition", policyv1.PodDisruptionBudgetStatus{Conditions: []metav1.Condition{cond, cond}},
			[]string{"FieldValueDuplicate status.conditions[1].type"}},
		{"bad condition", policyv1.PodDisruptionBudgetStatus{Conditions: []metav1.Condition{{Type: "x", Status: "Maybe", Reason: "R", LastTransitionTime: metav1.Now()}}},
			[]string{"FieldValueNotSupported status.conditions[0].status"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pdb(nil)
			p.Status = tc.status
			if tc.want == nil {
				tc.want = []string{}
			}
			if got := strategytest.ErrKeys(s.ValidateUpdate(ctx, p, old)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGetAttrsAndInfo(t *testing.T) {
	s := NewStrategy()
	p := pdb(nil)
	p.Labels = map[string]string{"a": "b"}
	l, f, err := s.GetAttrs(p)
	if err != nil || l["a"] != "b" {
		t.Fatalf("labels %v err %v", l, err)
	}
	if want := (fields.Set{"metadata.name": "web-pdb", "metadata.namespace": "default"}); !reflect.DeepEqual(f, want) {
		t.Errorf("fields %v", f)
	}
	if _, _, err := s.GetAttrs(&v1.Pod{}); err == nil {
		t.Error("expected error")
	}
	info := s.Info()
	if info.APIVersion() != "policy/v1" || info.Resource != "poddisruptionbudgets" || info.Singular != "poddisruptionbudget" ||
		info.Kind != "PodDisruptionBudget" || info.ListKind != "PodDisruptionBudgetList" || !info.Namespaced ||
		!reflect.DeepEqual(info.ShortNames, []string{"pdb"}) || info.Categories != nil || info.CustomFieldSelectors || s.AllowCreateOnUpdate() {
		t.Errorf("info %+v", info)
	}
	if _, ok := s.New().(*policyv1.PodDisruptionBudget); !ok {
		t.Error("New")
	}
	if _, ok := s.NewList().(*policyv1.PodDisruptionBudgetList); !ok {
		t.Error("NewList")
	}
}
