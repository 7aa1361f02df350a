package e2e

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAdmissionWebhookWithKubectl: a ValidatingWebhookConfiguration
// applied with kubectl, pointing at a real HTTPS webhook this test runs,
// makes `kubectl run` fail with the webhook's message and print its
// warning, as against kube; `kubectl get` prints the configuration.
func TestAdmissionWebhookWithKubectl(t *testing.T) {
	bin := kubectlPath(t)
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		rev.Response = &admissionv1.AdmissionResponse{
			UID: rev.Request.UID, Allowed: false, Warnings: []string{"pods in this namespace are checked"},
			Result: &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "no pods here"},
		}
		rev.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&rev)
	}))
	defer hook.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}))

	p := startUp(t, t.TempDir())
	k := p.kc(t, bin)
	k.expect("namespace/hooked created", "create", "namespace", "hooked")
	k.expect("namespace/hooked labeled", "label", "namespace", "hooked", "e2e-webhook=on")
	manifest := k.file("webhook.yaml", `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: deny-pods
webhooks:
- name: deny.e2e.corekube.test
  clientConfig:
    url: `+hook.URL+`/validate
    caBundle: `+ca+`
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
  namespaceSelector:
    matchLabels:
      e2e-webhook: "on"
  sideEffects: None
  admissionReviewVersions: ["v1"]
`)
	// The OpenAPI documents describe the resources.
	if out := k.ok("explain", "validatingwebhookconfigurations.webhooks.sideEffects"); !strings.Contains(out, "KIND:       ValidatingWebhookConfiguration") ||
		!strings.Contains(out, "FIELD: sideEffects <string>") {
		t.Errorf("kubectl explain printed\n%s", out)
	}
	k.expect("validatingwebhookconfiguration.admissionregistration.k8s.io/deny-pods created", "apply", "-f", manifest)
	k.expect(lines("NAME        WEBHOOKS   AGE", "deny-pods   1          0s"), "get", "validatingwebhookconfigurations")

	want := lines("Warning: pods in this namespace are checked",
		`Error from server (Forbidden): admission webhook "deny.e2e.corekube.test" denied the request: no pods here`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stdout, stderr, err := k.run("run", "p", "-n", "hooked", "--image=busybox", "--restart=Never")
		if err != nil && stderr == want && stdout == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl run: %v\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", err, stdout, stderr, want)
		}
		if err == nil {
			// Created before the webhook took effect: out of the way.
			k.ok("delete", "pod", "p", "-n", "hooked", "--wait=false")
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state, with a deadline
	}
	// Elsewhere pods pass.
	k.expect("pod/p created", "run", "p", "--image=busybox", "--restart=Never")
	k.expect(`validatingwebhookconfiguration.admissionregistration.k8s.io "deny-pods" deleted`, "delete", "validatingwebhookconfiguration", "deny-pods")
	if out := k.ok("get", "validatingwebhookconfigurations", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("still listed: %s", out)
	}
}
