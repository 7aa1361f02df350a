package flowcontrol

import (
	"context"
	"reflect"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

var ctx = context.Background()

func flowSchema(tweak func(*flowcontrolv1.FlowSchemaSpec)) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "fs"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "pl"},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{
					{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}},
					{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "ns", Name: "*"}},
				},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}, Namespaces: []string{"a"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/apis/*"}}},
			}},
		},
	}
	if tweak != nil {
		tweak(&fs.Spec)
	}
	return fs
}

func TestValidateFlowSchema(t *testing.T) {
	rule := func(f func(*flowcontrolv1.PolicyRulesWithSubjects)) func(*flowcontrolv1.FlowSchemaSpec) {
		return func(s *flowcontrolv1.FlowSchemaSpec) { f(&s.Rules[0]) }
	}
	tests := []struct {
		name  string
		tweak func(*flowcontrolv1.FlowSchemaSpec)
		want  []string
	}{
		{"valid", nil, nil},
		{"precedence 0", func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 0 }, []string{"FieldValueInvalid spec.matchingPrecedence"}},
		{"precedence too big", func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 10001 }, []string{"FieldValueInvalid spec.matchingPrecedence"}},
		{"distinguisher", func(s *flowcontrolv1.FlowSchemaSpec) { s.DistinguisherMethod.Type = "ByGroup" }, []string{"FieldValueNotSupported spec.distinguisherMethod.type"}},
		{"no level", func(s *flowcontrolv1.FlowSchemaSpec) { s.PriorityLevelConfiguration.Name = "" }, []string{"FieldValueRequired spec.priorityLevelConfiguration.name"}},
		{"bad level", func(s *flowcontrolv1.FlowSchemaSpec) { s.PriorityLevelConfiguration.Name = "A_B" }, []string{"FieldValueInvalid spec.priorityLevelConfiguration.name"}},
		{"no subjects", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.Subjects = nil }), []string{"FieldValueRequired spec.rules[0].subjects"}},
		{"no rules", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules, r.NonResourceRules = nil, nil }), []string{"FieldValueRequired spec.rules[0]"}},
		{"user without name", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.Subjects[0].User.Name = "" }), []string{"FieldValueRequired spec.rules[0].subjects[0].user.name"}},
		{"user with group", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) {
			r.Subjects[0].Group = &flowcontrolv1.GroupSubject{Name: "g"}
		}),
			[]string{"FieldValueForbidden spec.rules[0].subjects[0].group"}},
		{"group missing", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.Subjects[0].Kind = flowcontrolv1.SubjectKindGroup }),
			[]string{"FieldValueRequired spec.rules[0].subjects[0].group", "FieldValueForbidden spec.rules[0].subjects[0].user"}},
		{"bad kind", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.Subjects[0].Kind = "Robot" }), []string{"FieldValueNotSupported spec.rules[0].subjects[0].kind"}},
		{"SA namespace", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.Subjects[1].ServiceAccount.Namespace = "" }),
			[]string{"FieldValueRequired spec.rules[0].subjects[1].serviceAccount.namespace"}},
		{"SA name", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.Subjects[1].ServiceAccount.Name = "Bad Name" }),
			[]string{"FieldValueInvalid spec.rules[0].subjects[1].serviceAccount.name"}},
		{"no verbs", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].Verbs = nil }), []string{"FieldValueRequired spec.rules[0].resourceRules[0].verbs"}},
		{"unknown verb", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].Verbs = []string{"get", "fly"} }),
			[]string{"FieldValueNotSupported spec.rules[0].resourceRules[0].verbs"}},
		{"wildcard verb and more", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].Verbs = []string{"*", "get"} }),
			[]string{"FieldValueInvalid spec.rules[0].resourceRules[0].verbs"}},
		{"wildcard group and more", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].APIGroups = []string{"*", ""} }),
			[]string{"FieldValueInvalid spec.rules[0].resourceRules[0].apiGroups"}},
		{"no resources", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].Resources = nil }),
			[]string{"FieldValueRequired spec.rules[0].resourceRules[0].resources"}},
		{"no namespaces", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].Namespaces = nil }),
			[]string{"FieldValueRequired spec.rules[0].resourceRules[0].namespaces"}},
		{"cluster scope only", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) {
			r.ResourceRules[0].Namespaces, r.ResourceRules[0].ClusterScope = nil, true
		}), nil},
		{"bad namespace", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) { r.ResourceRules[0].Namespaces = []string{"A"} }),
			[]string{"FieldValueInvalid spec.rules[0].resourceRules[0].namespaces[0]"}},
		{"url without slash", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) {
			r.NonResourceRules[0].NonResourceURLs = []string{"healthz"}
		}),
			[]string{"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[0]"}},
		{"inner wildcard", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) {
			r.NonResourceRules[0].NonResourceURLs = []string{"/a/*/b"}
		}),
			[]string{"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[0]"}},
		{"wildcard url and more", rule(func(r *flowcontrolv1.PolicyRulesWithSubjects) {
			r.NonResourceRules[0].NonResourceURLs = []string{"*", "/x"}
		}),
			[]string{"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs"}},
	}
	s := NewFlowSchemaStrategy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				tc.want = []string{}
			}
			if got := strategytest.ErrKeys(s.Validate(ctx, flowSchema(tc.tweak))); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	errs := s.Validate(ctx, flowSchema(func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 10001 }))
	if want := "spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("got %v, want %s", errs, want)
	}
}

func level(name string, tweak func(*flowcontrolv1.PriorityLevelConfigurationSpec)) *flowcontrolv1.PriorityLevelConfiguration {
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To[int32](10),
			LendablePercent:          ptr.To[int32](50),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 6, QueueLengthLimit: 50}},
		}},
	}
	if tweak != nil {
		tweak(&pl.Spec)
	}
	return pl
}

func TestValidatePriorityLevel(t *testing.T) {
	q := func(f func(*flowcontrolv1.QueuingConfiguration)) func(*flowcontrolv1.PriorityLevelConfigurationSpec) {
		return func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { f(s.Limited.LimitResponse.Queuing) }
	}
	tests := []struct {
		name  string
		pl    string
		tweak func(*flowcontrolv1.PriorityLevelConfigurationSpec)
		want  []string
	}{
		{"valid", "pl", nil, nil},
		{"zero shares", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.NominalConcurrencyShares = ptr.To[int32](0)
		}, nil},
		{"negative shares", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.NominalConcurrencyShares = ptr.To[int32](-1)
		},
			[]string{"FieldValueInvalid spec.limited.nominalConcurrencyShares"}},
		{"lendable", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited.LendablePercent = ptr.To[int32](101) },
			[]string{"FieldValueInvalid spec.limited.lendablePercent"}},
		{"borrowing", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.BorrowingLimitPercent = ptr.To[int32](-1)
		},
			[]string{"FieldValueInvalid spec.limited.borrowingLimitPercent"}},
		{"no limited", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited = nil }, []string{"FieldValueRequired spec.limited"}},
		{"exempt named otherwise", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Type, s.Limited = flowcontrolv1.PriorityLevelEnablementExempt, nil
		}, []string{"FieldValueInvalid spec.type"}},
		{"exempt limited", "exempt", nil, []string{"FieldValueInvalid spec.type"}},
		{"exempt with limited", "exempt", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Type = flowcontrolv1.PriorityLevelEnablementExempt
		},
			[]string{"FieldValueForbidden spec.limited"}},
		{"exempt", "exempt", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Type, s.Limited = flowcontrolv1.PriorityLevelEnablementExempt, nil
			s.Exempt = &flowcontrolv1.ExemptPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](-1)}
		}, []string{"FieldValueInvalid spec.exempt.nominalConcurrencyShares"}},
		{"limited with exempt", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Exempt = &flowcontrolv1.ExemptPriorityLevelConfiguration{}
		},
			[]string{"FieldValueForbidden spec.exempt"}},
		{"bad type", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Type = "Unlimited" }, []string{"FieldValueNotSupported spec.type"}},
		{"reject with queuing", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) {
			s.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeReject
		},
			[]string{"FieldValueForbidden spec.limited.limitResponse.queuing"}},
		{"queue without queuing", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited.LimitResponse.Queuing = nil },
			[]string{"FieldValueRequired spec.limited.limitResponse.queuing"}},
		{"bad response", "pl", func(s *flowcontrolv1.PriorityLevelConfigurationSpec) { s.Limited.LimitResponse.Type = "Drop" },
			[]string{"FieldValueNotSupported spec.limited.limitResponse.type"}},
		{"queues", "pl", q(func(q *flowcontrolv1.QueuingConfiguration) { q.Queues = 0 }),
			[]string{"FieldValueInvalid spec.limited.limitResponse.queuing.queues", "FieldValueInvalid spec.limited.limitResponse.queuing.handSize"}},
		{"queue length", "pl", q(func(q *flowcontrolv1.QueuingConfiguration) { q.QueueLengthLimit = 0 }),
			[]string{"FieldValueInvalid spec.limited.limitResponse.queuing.queueLengthLimit"}},
		{"hand bigger than deck", "pl", q(func(q *flowcontrolv1.QueuingConfiguration) { q.HandSize = 65 }),
			[]string{"FieldValueInvalid spec.limited.limitResponse.queuing.handSize"}},
		{"entropy", "pl", q(func(q *flowcontrolv1.QueuingConfiguration) { q.Queues, q.HandSize = 1000, 10 }),
			[]string{"FieldValueInvalid spec.limited.limitResponse.queuing.handSize"}},
	}
	s := NewPriorityLevelStrategy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				tc.want = []string{}
			}
			if got := strategytest.ErrKeys(s.Validate(ctx, level(tc.pl, tc.tweak))); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	errs := s.Validate(ctx, level("pl", q(func(q *flowcontrolv1.QueuingConfiguration) { q.Queues, q.HandSize = 1000, 10 })))
	if want := "spec.limited.limitResponse.queuing.handSize: Invalid value: 10: required entropy bits of deckSize 1000 and handSize 10 should not be greater than 60"; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("got %v\nwant %s", errs, want)
	}
}

func TestDefaultsAndGeneration(t *testing.T) {
	s := NewPriorityLevelStrategy()
	pl := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
			Queuing: &flowcontrolv1.QueuingConfiguration{}}}},
		Status: flowcontrolv1.PriorityLevelConfigurationStatus{Conditions: []flowcontrolv1.PriorityLevelConfigurationCondition{{Type: "x"}}}}
	s.PrepareForCreate(ctx, pl)
	l := pl.Spec.Limited
	if *l.NominalConcurrencyShares != 30 || *l.LendablePercent != 0 || *l.LimitResponse.Queuing != (flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 8, QueueLengthLimit: 50}) {
		t.Errorf("defaults %+v %+v", l, l.LimitResponse.Queuing)
	}
	if len(pl.Status.Conditions) != 0 {
		t.Error("status kept on create")
	}
	fs := &flowcontrolv1.FlowSchema{}
	NewFlowSchemaStrategy().PrepareForCreate(ctx, fs)
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("matchingPrecedence %d", fs.Spec.MatchingPrecedence)
	}
	old := flowSchema(nil)
	changed := flowSchema(func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 501 })
	if !NewFlowSchemaStrategy().SpecChanged(changed, old) || NewFlowSchemaStrategy().SpecChanged(flowSchema(nil), old) {
		t.Error("SpecChanged")
	}
	// The status subresource keeps the spec.
	NewFlowSchemaStatusStrategy().PrepareForUpdate(ctx, changed, old)
	if changed.Spec.MatchingPrecedence != 500 {
		t.Error("status update changed the spec")
	}
}

func TestTables(t *testing.T) {
	now := time.Now()
	fs := flowSchema(nil)
	fs.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	row, err := NewFlowSchemaStrategy().TableRow(fs, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{"fs", "pl", int64(500), "ByUser", "60m", "?"}; !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("flowschema row %v, want %v", row.Cells, want)
	}
	fs.Spec.DistinguisherMethod = nil
	fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue}}
	row, _ = NewFlowSchemaStrategy().TableRow(fs, now)
	if row.Cells[3] != "<none>" || row.Cells[5] != "True" {
		t.Errorf("row %v", row.Cells)
	}
	pl := level("pl", nil)
	pl.CreationTimestamp = fs.CreationTimestamp
	row, _ = NewPriorityLevelStrategy().TableRow(pl, now)
	if want := []any{"pl", "Limited", int64(10), int64(64), int64(6), int64(50), "60m"}; !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("level row %v, want %v", row.Cells, want)
	}
	pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}
	row, _ = NewPriorityLevelStrategy().TableRow(pl, now)
	if want := []any{"pl", "Limited", int64(10), "<none>", "<none>", "<none>", "60m"}; !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("reject level row %v, want %v", row.Cells, want)
	}
}

// TestStatusConditionTypes: a status write needs a type on every condition,
// for both resources (kube's ValidateFlowSchemaStatus and
// ValidatePriorityLevelConfigurationStatus).
func TestStatusConditionTypes(t *testing.T) {
	fs := flowSchema(nil)
	fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {}}
	if got, want := strategytest.ErrKeys(NewFlowSchemaStatusStrategy().ValidateUpdate(ctx, fs, fs)), []string{"FieldValueRequired status.conditions[1].type"}; !reflect.DeepEqual(got, want) {
		t.Errorf("flowschema status: %v, want %v", got, want)
	}
	pl := &flowcontrolv1.PriorityLevelConfiguration{Status: flowcontrolv1.PriorityLevelConfigurationStatus{
		Conditions: []flowcontrolv1.PriorityLevelConfigurationCondition{{}}}}
	if got, want := strategytest.ErrKeys(NewPriorityLevelStatusStrategy().ValidateUpdate(ctx, pl, pl)), []string{"FieldValueRequired status.conditions[0].type"}; !reflect.DeepEqual(got, want) {
		t.Errorf("prioritylevel status: %v, want %v", got, want)
	}
	fs.Status.Conditions = fs.Status.Conditions[:1]
	if errs := NewFlowSchemaStatusStrategy().ValidateUpdate(ctx, fs, fs); len(errs) != 0 {
		t.Errorf("typed conditions refused: %v", errs)
	}
}
