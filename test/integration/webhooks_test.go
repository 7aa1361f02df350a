package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// testWebhook is a real HTTPS admission webhook: /mutate labels pods
// webhook=mutated, /validate denies pods labelled deny=yes and warns.
type testWebhook struct {
	*httptest.Server
	mu    sync.Mutex
	users []string
}

func newTestWebhook(t *testing.T) *testWebhook {
	wh := &testWebhook{}
	wh.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		wh.mu.Lock()
		wh.users = append(wh.users, rev.Request.UserInfo.Username)
		wh.mu.Unlock()
		var pod v1.Pod
		_ = json.Unmarshal(rev.Request.Object.Raw, &pod)
		resp := &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}
		switch r.URL.Path {
		case "/mutate":
			patch := `[{"op":"add","path":"/metadata/labels/webhook","value":"mutated"}]`
			if pod.Labels == nil {
				patch = `[{"op":"add","path":"/metadata/labels","value":{"webhook":"mutated"}}]`
			}
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(patch), &pt
		case "/validate":
			resp.Warnings = []string{"checked by the test webhook"}
			if pod.Labels["deny"] == "yes" {
				resp.Allowed = false
				resp.Result = &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "pods labelled deny=yes are refused"}
			}
		}
		rev.Request, rev.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&rev)
	}))
	t.Cleanup(wh.Close)
	return wh
}

func (wh *testWebhook) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	url := wh.URL + path
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: wh.Certificate().Raw})}
}

// TestAdmissionWebhooks registers webhooks through client-go, scoped by
// namespaceSelector to the test's own namespace (the server is shared),
// and checks that they take effect, mutate, deny and go away.
func TestAdmissionWebhooks(t *testing.T) {
	ctx := context.Background()
	wh := newTestWebhook(t)
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"webhook-test":"`+ns+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": ns}}
	none := admissionregistrationv1.SideEffectClassNone

	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "label.corekube.test", ClientConfig: wh.clientConfig("/mutate"), Rules: rules,
			NamespaceSelector: selector, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	// kube's defaults are stored.
	h := mwc.Webhooks[0]
	if *h.FailurePolicy != admissionregistrationv1.Fail || *h.MatchPolicy != admissionregistrationv1.Equivalent || *h.TimeoutSeconds != 10 ||
		*h.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || h.ObjectSelector == nil || *h.Rules[0].Scope != "*" || mwc.Generation != 1 {
		t.Errorf("defaults: %+v", h)
	}
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.corekube.test", ClientConfig: wh.clientConfig("/validate"), Rules: rules,
			NamespaceSelector: selector, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{})
	})

	warnings := &warningRecorder{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	// The configuration takes effect within a second or so (dry runs:
	// both webhooks have no side effects).
	start := time.Now()
	eventually(t, 5*time.Second, "the mutating webhook", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Create(ctx, newPod("probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return p.Labels["webhook"] == "mutated", nil
	})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the webhook took %v to take effect", took)
	}

	p, err := client.CoreV1().Pods(ns).Create(ctx, newPod("mutated", map[string]string{"app": "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil || stored.Labels["webhook"] != "mutated" || stored.Labels["app"] != "x" || stored.Spec.ServiceAccountName != "default" {
		t.Errorf("stored pod: %v %+v", err, stored.ObjectMeta)
	}
	if !slices.Contains(warnings.messages(), "checked by the test webhook") {
		t.Errorf("warnings %q", warnings.messages())
	}
	wh.mu.Lock()
	users := slices.Clone(wh.users)
	wh.mu.Unlock()
	if len(users) == 0 || users[0] == "" {
		t.Errorf("the webhook saw users %q", users)
	}

	_, err = client.CoreV1().Pods(ns).Create(ctx, newPod("denied", map[string]string{"deny": "yes"}), metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, `admission webhook "deny.corekube.test" denied the request: pods labelled deny=yes are refused`)

	// Another namespace is not selected: no label.
	other := newNamespace(t)
	eventually(t, 10*time.Second, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(other).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if p, err := cs.CoreV1().Pods(other).Create(ctx, newPod("plain", map[string]string{"deny": "yes"}), metav1.CreateOptions{}); err != nil || p.Labels["webhook"] != "" {
		t.Errorf("unselected namespace: %v %v", err, p.Labels)
	}

	// Gone: the denied pod passes again.
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the validating webhook to go", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("denied", map[string]string{"deny": "yes"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
}

// TestAdmissionWebhookFailurePolicy: a webhook nobody answers fails the
// request with kube's 500 under Fail, and lets it through under Ignore.
func TestAdmissionWebhookFailurePolicy(t *testing.T) {
	ctx := context.Background()
	wh := newTestWebhook(t)
	cc := wh.clientConfig("/validate")
	wh.Close() // nothing listens there any more
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"webhook-test":"`+ns+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "down.corekube.test", ClientConfig: cc, FailurePolicy: &fail,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": ns}},
			SideEffects:       &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{})
	})
	var last error
	eventually(t, 5*time.Second, "the failing webhook", func(ctx context.Context) (bool, error) {
		_, last = cs.CoreV1().Pods(ns).Create(ctx, newPod("p", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil, nil
	})
	st := checkStatusErr(t, last, 500, metav1.StatusReasonInternalError, "")
	if want := `Internal error occurred: failed calling webhook "down.corekube.test": failed to call webhook: Post "` + *cc.URL + `?timeout=10s": dial tcp`; !strings.HasPrefix(st.Message, want) {
		t.Errorf("message %q\nwant prefix %q", st.Message, want)
	}

	vwc.Webhooks[0].FailurePolicy = ptr(admissionregistrationv1.Ignore)
	updated, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation != 2 {
		t.Errorf("generation %d after a change of the webhooks, want 2", updated.Generation)
	}
	eventually(t, 5*time.Second, "the webhook to fail open", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("p", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
}

// TestWebhookConfigurationAPI: validation with kube's messages and the
// Table kubectl prints.
func TestWebhookConfigurationAPI(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t, "wh")
	url := "http://hooks.example.com/x"
	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "a.b.c", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	for _, want := range []string{
		`ValidatingWebhookConfiguration.admissionregistration.k8s.io "` + name + `" is invalid: [`,
		`webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun`,
		`webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`,
	} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("message %q lacks %q", st.Message, want)
		}
	}

	https := "https://hooks.example.com/x"
	none := admissionregistrationv1.SideEffectClassNone
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "a.b.c", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &https}, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "typo", Expression: "objekt.metadata.name == 'x'"}},
		}},
	}, metav1.CreateOptions{})
	st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	if want := `webhooks[0].matchConditions[0].expression: Invalid value: "objekt.metadata.name == 'x'": compilation failed: ERROR: <input>:1:1: undeclared reference to 'objekt'`; !strings.Contains(st.Message, want) {
		t.Errorf("message %q lacks %q", st.Message, want)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "a.b.c", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &https}, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "d.e.f", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &https}, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
	}()
	r := doRaw(t, "GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"+name, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(r.Body, &table); err != nil || r.Code != 200 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Webhooks,Age" || len(table.Rows) != 1 || table.Rows[0].Cells[0] != name || table.Rows[0].Cells[1] != float64(2) {
		t.Errorf("table %v %+v", cols, table.Rows)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "missing-"+name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
}

// TestSlowWebhookStallsNothingElse: while a webhook holds one create, the
// creates it does not match pass at once, on the same server.
func TestSlowWebhookStallsNothingElse(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	var called sync.Once
	calledCh := make(chan struct{})
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called.Do(func() { close(calledCh) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "too late", http.StatusServiceUnavailable)
	}))
	defer hook.Close()
	defer close(release)
	wh := &testWebhook{Server: hook}
	ns := newNamespace(t)
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	timeout := int32(30)
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "slow.corekube.test", ClientConfig: wh.clientConfig("/slow"), FailurePolicy: &ignore, TimeoutSeconds: &timeout,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"slow-" + ns: "yes"}},
			SideEffects:    &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{})
	})
	eventually(t, 10*time.Second, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})

	held := make(chan error, 1)
	go func() {
		// Retried until the configuration is in force and the webhook holds it.
		for {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("held", map[string]string{"slow-" + ns: "yes"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			select {
			case <-calledCh:
				held <- err
				return
			default:
			}
			if err != nil {
				held <- err
				return
			}
		}
	}()
	select {
	case <-calledCh:
	case err := <-held:
		t.Fatalf("the held create ended before the webhook was called: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the slow webhook was never called")
	}
	for i := 0; i < 5; i++ {
		start := time.Now()
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(fmt.Sprintf("free-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("an unmatched create took %v beside the slow webhook", took)
		}
	}
	select {
	case err := <-held:
		t.Fatalf("the held create ended early: %v", err)
	default:
	}
	release <- struct{}{} // the webhook answers 503: Ignore lets the create through
	if err := <-held; err != nil {
		t.Errorf("the held create after the webhook failed open: %v", err)
	}
}

// TestAdmissionWebhookPluginsDisabled: with both webhook plugins disabled
// (--disable-admission-plugins) the configurations are still served but
// nothing calls them, as in kube.
func TestAdmissionWebhookPluginsDisabled(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) {
		c.DisableAdmissionPlugins = []string{"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"}
	})
	ctx := context.Background()
	down := "https://127.0.0.1:1/never"
	none := admissionregistrationv1.SideEffectClassNone
	if _, err := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "everything"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "down.corekube.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &down},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
			}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := newNamespaceIn(t, s.Client)
	// A write the (failing, Fail) webhook would refuse passes.
	if _, err := s.Client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("a write with the webhook plugins disabled: %v", err)
	}
}
