package bench

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const webhookNamespaceName = "bench-webhook"

// webhookServer hosts BenchmarkPodCreateWebhook: its configurations are
// cluster-wide, so it has a server of its own.
var webhookServer = &lazyServer{setup: func(srv *server.Server) error {
	c := newClient()
	defer c.CloseIdleConnections()
	return createNamespace(c, srv.URL(), webhookNamespaceName)
}}

// benchWebhook is an HTTPS admission webhook that allows everything;
// mutating, it adds a label with a JSONPatch. It runs in the benchmark
// process, on the same 2 CPUs as the server and the clients.
type benchWebhook struct {
	*httptest.Server
	calls atomic.Int64
}

var labelPatch = []byte(`[{"op":"add","path":"/metadata/labels/webhook","value":"seen"}]`)

func newBenchWebhook() *benchWebhook {
	wh := &benchWebhook{}
	wh.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		wh.calls.Add(1)
		resp := &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}
		if r.URL.Path == "/mutate" {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = labelPatch, &pt
		}
		rev.Request, rev.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&rev)
	}))
	return wh
}

// BenchmarkPodCreateWebhook measures what one admission webhook adds to a
// pod create over HTTP (16 clients, as BenchmarkPodCreate/http): none,
// one validating webhook, one mutating webhook (a JSONPatch adding a
// label). One op is one create.
func BenchmarkPodCreateWebhook(b *testing.B) {
	skipShort(b)
	wh := newBenchWebhook()
	defer wh.Close()
	b.Run("none", func(b *testing.B) { benchCreateWithWebhook(b, wh, "") })
	b.Run("validating", func(b *testing.B) { benchCreateWithWebhook(b, wh, "/validate") })
	b.Run("mutating", func(b *testing.B) { benchCreateWithWebhook(b, wh, "/mutate") })
}

func benchCreateWithWebhook(b *testing.B, wh *benchWebhook, path string) {
	srv := webhookServer.get(b)
	client := newClient()
	defer client.CloseIdleConnections()
	ctx := context.Background()
	base := srv.URL() + "/apis/admissionregistration.k8s.io/v1/"
	// Start from no webhooks, then register the one asked for.
	for _, r := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+r, nil)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	if path != "" {
		if err := registerBenchWebhook(ctx, client, base, wh, path); err != nil {
			b.Fatal(err)
		}
	}
	url := srv.URL() + "/api/v1/namespaces/" + webhookNamespaceName + "/pods"
	// Wait until the configuration is in force: dry runs call the webhook
	// (its side effects are None) or, without one, stop calling it.
	probe := podBody(newPodName("probe"), "web")
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := wh.calls.Load()
		if err := post(ctx, client, url+"?dryRun=All", probe, http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		if called := wh.calls.Load() > before; called == (path != "") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the webhook configuration %q is not in force after 10s", path)
		}
		time.Sleep(20 * time.Millisecond) // polling the server's watch, with a deadline
	}
	calls := wh.calls.Load()
	timedCreates(b, srv, client, webhookNamespaceName, "wh")
	if path != "" && wh.calls.Load()-calls != int64(b.N) {
		b.Fatalf("%d webhook calls for %d creates", wh.calls.Load()-calls, b.N)
	}
}

func registerBenchWebhook(ctx context.Context, c *http.Client, base string, wh *benchWebhook, path string) error {
	url := wh.URL + path
	none := admissionregistrationv1.SideEffectClassNone
	cc := admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: wh.Certificate().Raw})}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	var obj any
	resource := "validatingwebhookconfigurations"
	switch path {
	case "/mutate":
		resource = "mutatingwebhookconfigurations"
		obj = &admissionregistrationv1.MutatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mutate.bench.corekube", ClientConfig: cc, Rules: rules,
				SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
		}
	case "/validate":
		obj = &admissionregistrationv1.ValidatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "validate.bench.corekube", ClientConfig: cc, Rules: rules,
				SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
		}
	default:
		return fmt.Errorf("no webhook at %q", path)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return post(ctx, c, base+resource, body, http.StatusCreated)
}
