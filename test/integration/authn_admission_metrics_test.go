package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
)

// scrape parses the shared server's /metrics (as the admin).
func scrape(t *testing.T) metricstest.Families {
	t.Helper()
	return metricstest.Scrape(t, testserver.HTTPClient(), srv.URL()+"/metrics")
}

// delta is how much the series of name with labels moved between two
// scrapes (a missing series counts as 0).
func delta(before, after metricstest.Families, name string, labels ...string) float64 {
	b, _ := before.Value(name, labels...)
	a, _ := after.Value(name, labels...)
	return a - b
}

// TestAuthenticationAndAdmissionMetrics sends a known sequence (a bad
// token, an anonymous /readyz, a create a validating webhook allows, one
// it denies) and checks kube's authentication, authorization and
// admission series move by it. The server is shared and its controllers
// send requests of their own, so the series every request moves are
// checked as "at least"; those only this test can move, exactly.
func TestAuthenticationAndAdmissionMetrics(t *testing.T) {
	ctx := context.Background()
	wh := newTestWebhook(t)
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"webhook-test":"`+ns+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	hook := ns + ".metrics.corekube.test"
	none := admissionregistrationv1.SideEffectClassNone
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: hook, ClientConfig: wh.clientConfig("/validate"),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": ns}},
			SideEffects:       &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{})
	})
	eventually(t, 10*time.Second, "the webhook to deny", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("probe", map[string]string{"deny": "yes"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), hook), nil
	})

	before := scrape(t)
	if r := doRaw(t, "GET", "/api", nil, "Authorization", "Bearer not-a-token"); r.Code != 401 {
		t.Fatalf("a bad token: %d %s", r.Code, r.Body)
	}
	resp, err := testserver.AnonymousHTTPClient().Get(srv.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("anonymous /readyz: %d", resp.StatusCode)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("allowed", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("denied", map[string]string{"deny": "yes"}), metav1.CreateOptions{}); err == nil {
		t.Fatal("the webhook admitted a pod labelled deny=yes")
	}
	after := scrape(t)

	for _, c := range []struct {
		name    string
		labels  []string
		want    float64
		atLeast bool
	}{
		// A token no authenticator knows is an error, as kube's.
		{"authentication_attempts", []string{"result", "error"}, 1, false},
		{"authentication_duration_seconds", []string{"result", "error"}, 1, false},
		// The anonymous /readyz, the creates and the scrape.
		{"authentication_attempts", []string{"result", "success"}, 4, true},
		{"authentication_duration_seconds", []string{"result", "success"}, 4, true},
		// kubernetes-admin and system:anonymous are "other".
		{"authenticated_user_requests", []string{"username", "other"}, 4, true},
		{"authorization_attempts_total", []string{"result", "allowed"}, 4, true},
		{"authorization_duration_seconds", []string{"result", "allowed"}, 4, true},
		// The admin is allowed as system:masters (not counted, as kube's);
		// anonymous /readyz by RBAC's system:public-info-viewer.
		{"apiserver_authorization_decisions_total", []string{"type", "RBAC", "name", "rbac", "decision", "allowed"}, 1, true},
		{"apiserver_admission_webhook_admission_duration_seconds", []string{"name", hook, "type", "validating", "operation", "CREATE", "rejected", "false"}, 1, false},
		{"apiserver_admission_webhook_admission_duration_seconds", []string{"name", hook, "type", "validating", "operation", "CREATE", "rejected", "true"}, 1, false},
		{"apiserver_admission_webhook_request_total", []string{"name", hook, "type", "validating", "operation", "CREATE", "code", "200", "rejected", "false"}, 1, false},
		{"apiserver_admission_webhook_request_total", []string{"name", hook, "type", "validating", "operation", "CREATE", "code", "403", "rejected", "true"}, 1, false},
		{"apiserver_admission_webhook_rejection_count", []string{"name", hook, "type", "validating", "operation", "CREATE", "error_type", "no_error", "rejection_code", "403"}, 1, false},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "ValidatingAdmissionWebhook", "type", "validate", "operation", "CREATE", "rejected", "true"}, 1, true},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "ServiceAccount", "type", "admit", "operation", "CREATE", "rejected", "false"}, 2, true},
		{"apiserver_admission_step_admission_duration_seconds", []string{"type", "admit", "operation", "CREATE", "rejected", "false"}, 2, true},
		{"apiserver_admission_step_admission_duration_seconds", []string{"type", "validate", "operation", "CREATE", "rejected", "true"}, 1, true},
	} {
		got := delta(before, after, c.name, c.labels...)
		if got != c.want && !(c.atLeast && got > c.want) {
			t.Errorf("%s%v moved by %v, want %v (at least: %v); series %q", c.name, c.labels, got, c.want, c.atLeast, after.Series(c.name))
		}
	}
	for name, help := range map[string]string{
		"authentication_attempts":                                   "[ALPHA] Counter of authenticated attempts.",
		"apiserver_authorization_decisions_total":                   "[ALPHA] Total number of terminal decisions made by an authorizer split by authorizer type, name, and decision.",
		"apiserver_admission_webhook_admission_duration_seconds":    "[STABLE] Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
		"apiserver_admission_controller_admission_duration_seconds": "[STABLE] Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
	} {
		if f := after[name]; f == nil || f.GetHelp() != help {
			t.Errorf("%s: help %q, want %q", name, f.GetHelp(), help)
		}
	}
}
