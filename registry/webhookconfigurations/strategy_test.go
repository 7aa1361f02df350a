package webhookconfigurations

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

func validHook() admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    "check.example.com",
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com/check")},
		Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func TestDefaults(t *testing.T) {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{
		Name:         "m.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "s", Namespace: "n"}},
		Rules:        validHook().Rules,
	}}}
	NewMutatingStrategy().PrepareForCreate(ctx, m)
	h := m.Webhooks[0]
	if *h.FailurePolicy != admissionregistrationv1.Fail || *h.MatchPolicy != admissionregistrationv1.Equivalent ||
		h.NamespaceSelector == nil || h.ObjectSelector == nil || *h.TimeoutSeconds != 10 ||
		*h.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || *h.Rules[0].Scope != "*" ||
		*h.ClientConfig.Service.Port != 443 || h.SideEffects != nil || h.AdmissionReviewVersions != nil {
		t.Errorf("defaults: %+v", h)
	}
}

func TestValidateMessages(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(c *admissionregistrationv1.ValidatingWebhookConfiguration)
		want  []string
	}{
		{"valid", func(*admissionregistrationv1.ValidatingWebhookConfiguration) {}, nil},
		{"duplicate names", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks = append(c.Webhooks, validHook())
		},
			[]string{`webhooks[1].name: Duplicate value: "check.example.com"`}},
		{"short name", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Webhooks[0].Name = "check" },
			[]string{`webhooks[0].name: Invalid value: "check": should be a domain with at least three segments separated by dots`}},
		{"no client", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Webhooks[0].ClientConfig.URL = nil },
			[]string{`webhooks[0].clientConfig: Required value: exactly one of url or service is required`}},
		{"both clients", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.Service = &admissionregistrationv1.ServiceReference{Name: "s", Namespace: "n"}
		}, []string{`webhooks[0].clientConfig: Required value: exactly one of url or service is required`}},
		{"http url", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.URL = ptr.To("http://h/x")
		},
			[]string{`webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`}},
		{"timeout", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].TimeoutSeconds = ptr.To[int32](31)
		},
			[]string{`webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds`}},
		{"side effects required", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Webhooks[0].SideEffects = nil },
			[]string{`webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun`}},
		{"side effects some", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, []string{`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`}},
		{"review versions", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].AdmissionReviewVersions = nil
		},
			[]string{`webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1`}},
		{"operations", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{"*", "CREATE"}
		}, []string{`webhooks[0].rules[0].operations: Invalid value: []v1.OperationType{"*", "CREATE"}: if '*' is present, must not specify other operations`}},
		{"resources", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].Rules[0].Resources = []string{"*/*", "pods"}
		},
			[]string{`webhooks[0].rules[0].resources: Invalid value: []string{"*/*", "pods"}: if '*/*' is present, must not specify other resources`}},
		{"scope", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].Rules[0].Scope = ptr.To[admissionregistrationv1.ScopeType]("Everywhere")
		}, []string{`webhooks[0].rules[0].scope: Unsupported value: "Everywhere": supported values: "*", "Cluster", "Namespaced"`}},
		{"match conditions", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{
				{Name: "not-leases", Expression: `request.resource.resource != "leases"`},
				{Name: "labelled", Expression: `has(object.metadata.labels) && "team" in object.metadata.labels`},
			}
		}, nil},
		{"bad match conditions", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{
				{Name: "a", Expression: "nope == 1"},
				{Name: "a", Expression: "'str'"},
				{Name: "-bad-", Expression: " "},
			}
		}, []string{
			"webhooks[0].matchConditions[0].expression: Invalid value: \"nope == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')\n | nope == 1\n | ^",
			`webhooks[0].matchConditions[1].expression: Invalid value: "'str'": must evaluate to bool`,
			`webhooks[0].matchConditions[1].name: Duplicate value: "a"`,
			`webhooks[0].matchConditions[2].expression: Required value`,
			`webhooks[0].matchConditions[2].name: Invalid value: "-bad-": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
	}
	s := NewValidatingStrategy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{validHook()}}
			tc.tweak(c)
			s.PrepareForCreate(ctx, c)
			var got []string
			for _, e := range s.Validate(ctx, c) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestUpdateKeepsLegacy(t *testing.T) {
	old := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{validHook(), validHook()}}
	old.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassUnknown)
	upd := old.DeepCopy()
	s := NewValidatingStrategy()
	s.PrepareForUpdate(ctx, upd, old)
	if errs := s.ValidateUpdate(ctx, upd, old); len(errs) != 0 {
		t.Errorf("update of a stored legacy configuration: %v", errs)
	}
	if errs := s.Validate(ctx, upd); len(errs) != 2 {
		t.Errorf("create of the same: %v", errs)
	}
}

func TestTable(t *testing.T) {
	now := time.Now()
	c := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{}, {}},
	}
	s := NewMutatingStrategy()
	row, err := s.TableRow(c, now)
	if err != nil || len(row.Cells) != 3 || row.Cells[0] != "c" || row.Cells[1] != int64(2) || row.Cells[2] != "2m" {
		t.Errorf("row %v, %v", row.Cells, err)
	}
	if cols := s.TableColumns(); cols[1].Name != "Webhooks" || cols[1].Type != "integer" {
		t.Errorf("columns %v", cols)
	}
}

func TestSpecChanged(t *testing.T) {
	s := NewValidatingStrategy()
	old := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{validHook()}}
	same := old.DeepCopy()
	same.Labels = map[string]string{"a": "b"}
	if s.SpecChanged(same, old) {
		t.Error("a label change is not a spec change")
	}
	changed := old.DeepCopy()
	changed.Webhooks[0].TimeoutSeconds = ptr.To[int32](3)
	if !s.SpecChanged(changed, old) {
		t.Error("a webhook change is a spec change")
	}
}
