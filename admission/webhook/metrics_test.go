package webhook

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestWebhookMetrics: each outcome of a webhook call (allowed, denied,
// failed closed, failed open, a mutation, a matchConditions exclusion)
// moves kube's webhook series by one, with kube's label values.
func TestWebhookMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := admission.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	d := newDispatcher(nil)
	d.cfg.Metrics = m

	gate := newHookServer(t, func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if strings.Contains(string(req.Object.Raw), `"deny":"yes"`) {
			return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 403, Message: "no"}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	broken := newHookServer(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil })
	broken.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })

	ignore := func(h *admissionregistrationv1.MutatingWebhook) {
		h.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	}
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c",
		vhook("gate.example.com", gate),
		vhook("open.example.com", broken, ignore),
	)}))
	allowed := podAttrs(admission.Create, "")
	if err := d.Validating().Validate(aliceCtx, allowed); err != nil {
		t.Fatal(err)
	}
	denied := podAttrs(admission.Create, "")
	denied.Object.(*v1.Pod).Labels = map[string]string{"deny": "yes"}
	if err := d.Validating().Validate(aliceCtx, denied); err == nil {
		t.Fatal("the denial was admitted")
	}
	// Failing closed, with the webhook's HTTP status.
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", vhook("closed.example.com", broken))}))
	if err := d.Validating().Validate(aliceCtx, podAttrs(admission.Update, "")); err == nil {
		t.Fatal("a failing webhook admitted the update")
	}
	// A mutation, and a webhook its matchConditions exclude.
	cfg := mutatingConfig("m", mhook("label.example.com", newHookServer(t, labelPatch("a", "b"))),
		mhook("cel.example.com", gate))
	cfg.Webhooks[1].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "false"}}
	d.SetMutating(CompileMutating([]*admissionregistrationv1.MutatingWebhookConfiguration{cfg}))
	if err := d.Mutating().Admit(aliceCtx, podAttrs(admission.Create, "")); err != nil {
		t.Fatal(err)
	}

	fs := metricstest.Gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"apiserver_admission_webhook_admission_duration_seconds", []string{"name", "gate.example.com", "type", "validating", "operation", "CREATE", "rejected", "false"}},
		{"apiserver_admission_webhook_admission_duration_seconds", []string{"name", "gate.example.com", "type", "validating", "operation", "CREATE", "rejected", "true"}},
		{"apiserver_admission_webhook_request_total", []string{"name", "gate.example.com", "type", "validating", "operation", "CREATE", "code", "200", "rejected", "false"}},
		{"apiserver_admission_webhook_request_total", []string{"name", "gate.example.com", "type", "validating", "operation", "CREATE", "code", "403", "rejected", "true"}},
		{"apiserver_admission_webhook_rejection_count", []string{"name", "gate.example.com", "type", "validating", "operation", "CREATE", "error_type", "no_error", "rejection_code", "403"}},
		// Failing open: not rejected, counted as failing open (twice: one
		// call per Validate above).
		{"apiserver_admission_webhook_request_total", []string{"name", "open.example.com", "code", "503", "rejected", "false"}},
		{"apiserver_admission_webhook_fail_open_count", []string{"name", "open.example.com", "type", "validating"}},
		{"apiserver_admission_webhook_rejection_count", []string{"name", "closed.example.com", "operation", "UPDATE", "error_type", "calling_webhook_error", "rejection_code", "503"}},
		{"apiserver_admission_webhook_request_total", []string{"name", "closed.example.com", "operation", "UPDATE", "code", "503", "rejected", "true"}},
		{"apiserver_admission_webhook_request_total", []string{"name", "label.example.com", "type", "admit", "operation", "CREATE", "code", "200", "rejected", "false"}},
		{"apiserver_admission_match_condition_exclusions_total", []string{"name", "cel.example.com", "kind", "webhook", "type", "admit", "operation", "CREATE"}},
		{"apiserver_admission_match_condition_evaluation_seconds", []string{"name", "cel.example.com", "kind", "webhook", "type", "admit"}},
	} {
		want := 1.0
		if c.labels[1] == "open.example.com" {
			want = 2
		}
		if got, ok := fs.Value(c.name, c.labels...); got != want {
			t.Errorf("%s%v = %v (found %v), want %v; series %q", c.name, c.labels, got, ok, want, fs.Series(c.name))
		}
	}
	if _, ok := fs.Value("apiserver_admission_webhook_request_total", "name", "cel.example.com"); ok {
		t.Error("the excluded webhook was counted as called")
	}
	if _, ok := fs.Value("apiserver_admission_webhook_rejection_count", "name", "open.example.com"); ok {
		t.Error("a webhook failing open was counted as rejecting")
	}
}
