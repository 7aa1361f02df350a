package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/auth/user"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// hookServer is a real HTTPS webhook: answer decides each response.
type hookServer struct {
	*httptest.Server
	calls    atomic.Int32
	mu       sync.Mutex
	requests []*admissionv1.AdmissionRequest
}

func newHookServer(t *testing.T, answer func(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *hookServer {
	t.Helper()
	hs := &hookServer{}
	hs.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		hs.calls.Add(1)
		hs.mu.Lock()
		hs.requests = append(hs.requests, rev.Request)
		hs.mu.Unlock()
		resp := answer(r, rev.Request)
		if resp == nil {
			return // the handler gave up (the client went away)
		}
		resp.UID = rev.Request.UID
		rev.Request, rev.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&rev)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func (hs *hookServer) caBundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
}

func allow(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// labelPatch answers a JSONPatch that sets the label key=value.
func labelPatch(key, value string) func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var pod v1.Pod
		_ = json.Unmarshal(req.Object.Raw, &pod)
		var ops []map[string]any
		if pod.Labels == nil {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{}})
		}
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + key, "value": value})
		patch, _ := json.Marshal(ops)
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
	}
}

type hookOpt func(*admissionregistrationv1.MutatingWebhook)

func mhook(name string, hs *hookServer, opts ...hookOpt) admissionregistrationv1.MutatingWebhook {
	h := admissionregistrationv1.MutatingWebhook{
		Name:                    name,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(hs.URL + "/mutate"), CABundle: hs.caBundle()},
		Rules:                   []admissionregistrationv1.RuleWithOperations{rule([]string{"CREATE", "UPDATE"}, []string{""}, []string{"v1"}, []string{"pods"}, "")},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	for _, o := range opts {
		o(&h)
	}
	return h
}

// vhook is the validating form of mhook.
func vhook(name string, hs *hookServer, opts ...hookOpt) admissionregistrationv1.ValidatingWebhook {
	m := mhook(name, hs, opts...)
	return admissionregistrationv1.ValidatingWebhook{Name: m.Name, ClientConfig: m.ClientConfig, Rules: m.Rules, FailurePolicy: m.FailurePolicy,
		SideEffects: m.SideEffects, TimeoutSeconds: m.TimeoutSeconds, NamespaceSelector: m.NamespaceSelector, ObjectSelector: m.ObjectSelector,
		AdmissionReviewVersions: m.AdmissionReviewVersions}
}

func mutatingConfig(name string, hooks ...admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
}

func validatingConfig(name string, hooks ...admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
}

type warnings struct {
	mu          sync.Mutex
	msgs        []string
	annotations map[string]string
}

func newDispatcher(w *warnings) *Dispatcher {
	return New(Config{
		NamespaceLabels: func(context.Context, string) (map[string]string, error) { return map[string]string{"env": "test"}, nil },
		Warn: func(_ context.Context, msg string) {
			if w != nil {
				w.mu.Lock()
				w.msgs = append(w.msgs, msg)
				w.mu.Unlock()
			}
		},
		Annotate: func(_ context.Context, key, value string) {
			if w != nil {
				w.mu.Lock()
				if w.annotations == nil {
					w.annotations = map[string]string{}
				}
				w.annotations[key] = value
				w.mu.Unlock()
			}
		},
	})
}

func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	se, ok := err.(*apierrors.StatusError)
	if !ok {
		t.Fatalf("want a Status error, got %T %v", err, err)
	}
	return se.ErrStatus
}

var aliceCtx = user.WithUser(context.Background(), &user.Info{Name: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"},
	Extra: map[string][]string{"scopes": {"a"}}})

func TestMutationAddsLabelAndSendsTheRequest(t *testing.T) {
	hs := newHookServer(t, labelPatch("mutated", "yes"))
	var w warnings
	d := newDispatcher(&w)
	d.SetMutating(CompileMutating([]*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("c", mhook("label.example.com", hs))}))

	a := podAttrs(admission.Create, "")
	a.DryRun = true
	a.Options = &metav1.CreateOptions{DryRun: []string{"All"}}
	if err := d.Mutating().Admit(aliceCtx, a); err != nil {
		t.Fatal(err)
	}
	pod := a.Object.(*v1.Pod)
	if pod.Labels["mutated"] != "yes" || pod.Name != "p" {
		t.Errorf("pod after mutation: %+v", pod.ObjectMeta)
	}
	if !pod.GetObjectKind().GroupVersionKind().Empty() {
		t.Errorf("the object's kind changed: %v", pod.GetObjectKind().GroupVersionKind())
	}
	if len(hs.requests) != 1 {
		t.Fatalf("%d calls", len(hs.requests))
	}
	req := hs.requests[0]
	if req.UID == "" || req.Kind.Kind != "Pod" || req.Kind.Version != "v1" || req.Resource.Resource != "pods" || req.RequestKind == nil ||
		req.RequestResource == nil || req.Name != "p" || req.Namespace != "ns" || req.Operation != admissionv1.Create || req.DryRun == nil || !*req.DryRun {
		t.Errorf("request %+v", req)
	}
	if req.UserInfo.Username != "alice" || req.UserInfo.UID != "u-1" || len(req.UserInfo.Groups) != 2 || req.UserInfo.Extra["scopes"][0] != "a" {
		t.Errorf("userInfo %+v", req.UserInfo)
	}
	if !strings.Contains(string(req.Object.Raw), `"kind":"Pod"`) || req.OldObject.Raw != nil {
		t.Errorf("object %s old %s", req.Object.Raw, req.OldObject.Raw)
	}
	if string(req.Options.Raw) != `{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"]}` {
		t.Errorf("options %s", req.Options.Raw)
	}
	if got := w.annotations["mutation.webhook.admission.k8s.io/round_0_index_0"]; got != `{"configuration":"c","webhook":"label.example.com","mutated":true}` {
		t.Errorf("audit annotations %v", w.annotations)
	}
}

func TestDenial(t *testing.T) {
	hs := newHookServer(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, Warnings: []string{"think again"},
			Result: &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "pods must carry a team label"}}
	})
	var w warnings
	d := newDispatcher(&w)
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", vhook("deny.example.com", hs))}))
	st := statusOf(t, d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")))
	if st.Code != 403 || st.Reason != metav1.StatusReasonForbidden || st.Status != metav1.StatusFailure ||
		st.Message != `admission webhook "deny.example.com" denied the request: pods must carry a team label` {
		t.Errorf("status %+v", st)
	}
	if len(w.msgs) != 1 || w.msgs[0] != "think again" {
		t.Errorf("warnings %q", w.msgs)
	}

	// Without a code or a message: 400 and kube's words.
	hs2 := newHookServer(t, func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false}
	})
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", vhook("mute.example.com", hs2))}))
	st = statusOf(t, d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")))
	if st.Code != 400 || st.Message != `admission webhook "mute.example.com" denied the request without explanation` {
		t.Errorf("status %+v", st)
	}
}

// slow answers only when the client gives up or the test ends.
func slow(done <-chan struct{}) func(*http.Request, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return func(r *http.Request, _ *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		select {
		case <-r.Context().Done():
		case <-done:
		}
		return nil
	}
}

func TestTimeoutFailAndIgnore(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	hs := newHookServer(t, slow(done))
	for _, policy := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(policy), func(t *testing.T) {
			var w warnings
			d := newDispatcher(&w)
			d.SetMutating(CompileMutating([]*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("c", mhook("slow.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) {
				h.TimeoutSeconds = ptr.To[int32](1)
				h.FailurePolicy = ptr.To(policy)
			}))}))
			start := time.Now()
			err := d.Mutating().Admit(aliceCtx, podAttrs(admission.Create, ""))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the 1s timeout took %v", took)
			}
			if policy == admissionregistrationv1.Ignore {
				if err != nil {
					t.Errorf("Ignore: %v", err)
				}
				if w.annotations["failed-open.mutation.webhook.admission.k8s.io/round_0_index_0"] != "slow.example.com" {
					t.Errorf("audit annotations %v", w.annotations)
				}
				return
			}
			st := statusOf(t, err)
			want := `Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post "` + hs.URL + `/mutate?timeout=1s": context deadline exceeded`
			if st.Code != 500 || st.Reason != metav1.StatusReasonInternalError || st.Message != want {
				t.Errorf("status %d %s %q\nwant %q", st.Code, st.Reason, st.Message, want)
			}
		})
	}
}

func TestUnreachableAndBadCA(t *testing.T) {
	hs := newHookServer(t, allow)
	d := newDispatcher(nil)
	// Without the bundle (the system's roots) the test certificate does
	// not verify.
	bad := vhook("bad-ca.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) { h.ClientConfig.CABundle = nil })
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", bad)}))
	st := statusOf(t, d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")))
	if st.Code != 500 || !strings.Contains(st.Message, `failed calling webhook "bad-ca.example.com": failed to call webhook: Post`) ||
		!strings.Contains(st.Message, "certificate") {
		t.Errorf("bad CA: %q", st.Message)
	}
	// A bundle that is not PEM.
	garbage := vhook("garbage-ca.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) { h.ClientConfig.CABundle = []byte("not pem") })
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", garbage)}))
	st = statusOf(t, d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")))
	if st.Code != 500 || st.Message != `Internal error occurred: failed calling webhook "garbage-ca.example.com": could not get REST client: unable to load root certificates: unable to parse bytes as PEM block` {
		t.Errorf("garbage CA: %q", st.Message)
	}
	// A service reference is refused when called.
	svc := vhook("svc.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) {
		h.ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "hooks"}}
	})
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", svc)}))
	st = statusOf(t, d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")))
	if st.Code != 500 || !strings.Contains(st.Message, `failed calling webhook "svc.example.com": failed to call webhook: service ns/hooks:443: service references are not supported`) {
		t.Errorf("service: %q", st.Message)
	}
	svc.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", svc)}))
	if err := d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")); err != nil {
		t.Errorf("service with Ignore: %v", err)
	}
}

func TestReinvocation(t *testing.T) {
	// first (IfNeeded) is called before second changes the pod, so it is
	// called again, once; third (Never) is not.
	first := newHookServer(t, allow)
	second := newHookServer(t, labelPatch("second", "x"))
	third := newHookServer(t, allow)
	d := newDispatcher(nil)
	ifNeeded := func(h *admissionregistrationv1.MutatingWebhook) {
		h.ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
	}
	d.SetMutating(CompileMutating([]*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("b", mhook("second.example.com", second, ifNeeded)),
		mutatingConfig("a", mhook("first.example.com", first, ifNeeded), mhook("never.example.com", third)),
	}))
	a := podAttrs(admission.Create, "")
	if err := d.Mutating().Admit(aliceCtx, a); err != nil {
		t.Fatal(err)
	}
	if first.calls.Load() != 2 || second.calls.Load() != 1 || third.calls.Load() != 1 {
		t.Errorf("calls: first %d second %d never %d", first.calls.Load(), second.calls.Load(), third.calls.Load())
	}
	if !strings.Contains(string(first.requests[1].Object.Raw), `"second":"x"`) {
		t.Errorf("the reinvocation saw %s", first.requests[1].Object.Raw)
	}
	// Nothing changed: nobody is reinvoked.
	first.calls.Store(0)
	d.SetMutating(CompileMutating([]*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("a", mhook("first.example.com", first, ifNeeded))}))
	if err := d.Mutating().Admit(aliceCtx, podAttrs(admission.Create, "")); err != nil || first.calls.Load() != 1 {
		t.Errorf("unchanged: %v, %d calls", err, first.calls.Load())
	}
}

func TestDryRunSideEffects(t *testing.T) {
	hs := newHookServer(t, allow)
	d := newDispatcher(nil)
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", vhook("effects.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) {
		h.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
	}))}))
	a := podAttrs(admission.Create, "")
	a.DryRun = true
	st := statusOf(t, d.Validating().Validate(aliceCtx, a))
	if st.Code != 400 || st.Message != `admission webhook "effects.example.com" does not support dry run` {
		t.Errorf("%+v", st)
	}
	if hs.calls.Load() != 0 {
		t.Error("called on a dry run")
	}
	if err := d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")); err != nil || hs.calls.Load() != 1 {
		t.Errorf("not a dry run: %v, %d calls", err, hs.calls.Load())
	}
}

func TestValidatingInParallel(t *testing.T) {
	// Each webhook waits until both were called: in series the first would
	// time out.
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	barrier := func(r *http.Request, _ *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		arrived.Done()
		select {
		case <-both:
			return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{r.URL.Path}}
		case <-r.Context().Done():
			return nil
		}
	}
	one, two := newHookServer(t, barrier), newHookServer(t, barrier)
	var w warnings
	d := newDispatcher(&w)
	short := func(h *admissionregistrationv1.MutatingWebhook) { h.TimeoutSeconds = ptr.To[int32](5) }
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{
		validatingConfig("c", vhook("one.example.com", one, short), vhook("two.example.com", two, short)),
	}))
	if err := d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")); err != nil {
		t.Fatal(err)
	}
	if len(w.msgs) != 2 {
		t.Errorf("warnings %q", w.msgs)
	}
}

func TestSlowWebhookDoesNotStallOthers(t *testing.T) {
	done := make(chan struct{})
	slowServer := newHookServer(t, slow(done))
	fast := newHookServer(t, allow)
	d := newDispatcher(nil)
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c",
		vhook("slow.example.com", slowServer, func(h *admissionregistrationv1.MutatingWebhook) {
			h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"slow": "yes"}}
			h.TimeoutSeconds = ptr.To[int32](30)
		}),
		vhook("fast.example.com", fast),
	)}))
	stuck := make(chan error, 1)
	go func() {
		a := podAttrs(admission.Create, "")
		a.Object.(*v1.Pod).Labels = map[string]string{"slow": "yes"}
		stuck <- d.Validating().Validate(aliceCtx, a)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for slowServer.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if slowServer.calls.Load() == 0 {
		t.Fatal("the slow webhook was never called")
	}
	// While the slow call is in flight, requests it does not match pass,
	// and configuration changes take effect.
	for i := 0; i < 5; i++ {
		if err := d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")); err != nil {
			t.Fatal(err)
		}
	}
	d.SetValidating(nil)
	if err := d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stuck:
		t.Fatalf("the slow request ended early: %v", err)
	default:
	}
	close(done)
	if err := <-stuck; err == nil {
		t.Error("the slow webhook answered nothing, yet the request passed")
	}
}

func TestBadResponses(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, rev *admissionv1.AdmissionReview)
		want   string
	}{
		{"wrong uid", func(w http.ResponseWriter, rev *admissionv1.AdmissionReview) {
			rev.Response = &admissionv1.AdmissionResponse{UID: "other", Allowed: true}
			_ = json.NewEncoder(w).Encode(rev)
		}, `received invalid webhook response: expected response.uid=`},
		{"no response", func(w http.ResponseWriter, rev *admissionv1.AdmissionReview) {
			rev.Request = nil
			_ = json.NewEncoder(w).Encode(rev)
		}, `received invalid webhook response: webhook response was absent`},
		{"wrong kind", func(w http.ResponseWriter, _ *admissionv1.AdmissionReview) {
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Status"}`))
		}, `received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status`},
		{"server error", func(w http.ResponseWriter, _ *admissionv1.AdmissionReview) {
			w.WriteHeader(503)
		}, `failed to call webhook: the server responded with the status code 503 but did not return more information`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var rev admissionv1.AdmissionReview
				_ = json.NewDecoder(r.Body).Decode(&rev)
				tc.answer(w, &rev)
			}))
			defer ts.Close()
			hs := &hookServer{Server: ts}
			d := newDispatcher(nil)
			d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", vhook("odd.example.com", hs))}))
			st := statusOf(t, d.Validating().Validate(aliceCtx, podAttrs(admission.Create, "")))
			if st.Code != 500 || !strings.Contains(st.Message, `failed calling webhook "odd.example.com": `+tc.want) {
				t.Errorf("%d %q", st.Code, st.Message)
			}
		})
	}
}

func TestMatchConditions(t *testing.T) {
	hs := newHookServer(t, allow)
	d := newDispatcher(nil)
	set := func(policy admissionregistrationv1.FailurePolicyType, conds ...admissionregistrationv1.MatchCondition) {
		cfg := validatingConfig("c", vhook("cel.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) { h.FailurePolicy = ptr.To(policy) }))
		cfg.Webhooks[0].MatchConditions = conds
		d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{cfg}))
	}
	withTeam := func(team string) *admission.Attributes {
		a := podAttrs(admission.Create, "")
		if team != "" {
			a.Object.(*v1.Pod).Labels = map[string]string{"team": team}
		}
		return a
	}
	calls := func(a *admission.Attributes) (int32, error) {
		before := hs.calls.Load()
		err := d.Validating().Validate(aliceCtx, a)
		return hs.calls.Load() - before, err
	}

	set(admissionregistrationv1.Fail,
		admissionregistrationv1.MatchCondition{Name: "team-a", Expression: `object.metadata.labels["team"] == "a"`},
		admissionregistrationv1.MatchCondition{Name: "alice", Expression: `request.userInfo.username == "alice" && request.operation == "CREATE"`},
	)
	if n, err := calls(withTeam("a")); n != 1 || err != nil {
		t.Errorf("team a: %d calls, %v", n, err)
	}
	if n, err := calls(withTeam("b")); n != 0 || err != nil {
		t.Errorf("team b: %d calls, %v", n, err)
	}
	// No labels: the lookup fails; Fail refuses the request.
	n, err := calls(withTeam(""))
	st := statusOf(t, err)
	if n != 0 || st.Code != 500 || !strings.HasPrefix(st.Message, `Internal error occurred: failed calling webhook "cel.example.com": failed to evaluate match condition: expression 'team-a' resulted in error: `) {
		t.Errorf("no labels: %d calls, %q", n, st.Message)
	}
	// Ignore skips the webhook instead.
	set(admissionregistrationv1.Ignore, admissionregistrationv1.MatchCondition{Name: "team-a", Expression: `object.metadata.labels["team"] == "a"`})
	if n, err := calls(withTeam("")); n != 0 || err != nil {
		t.Errorf("no labels, Ignore: %d calls, %v", n, err)
	}
	// Numbers are ints, oldObject is null on CREATE.
	set(admissionregistrationv1.Fail, admissionregistrationv1.MatchCondition{Name: "n", Expression: `object.spec.containers[0].ports[0].containerPort == 80 && oldObject == null`})
	a := withTeam("a")
	a.Object.(*v1.Pod).Spec.Containers = []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{ContainerPort: 80}}}}
	if n, err := calls(a); n != 1 || err != nil {
		t.Errorf("int and null: %d calls, %v", n, err)
	}
}

func TestUpdateAndDeleteRequests(t *testing.T) {
	hs := newHookServer(t, allow)
	d := newDispatcher(nil)
	d.SetValidating(CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("c", vhook("all.example.com", hs, func(h *admissionregistrationv1.MutatingWebhook) {
		h.Rules[0].Operations = []admissionregistrationv1.OperationType{"*"}
	}))}))
	upd := podAttrs(admission.Update, "")
	upd.OldObject = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"old": "yes"}}}
	del := podAttrs(admission.Delete, "")
	del.Object, del.OldObject = nil, upd.OldObject
	upd.Options, del.Options = &metav1.UpdateOptions{}, &metav1.DeleteOptions{}
	for _, a := range []*admission.Attributes{upd, del} {
		if err := d.Validating().Validate(aliceCtx, a); err != nil {
			t.Fatal(err)
		}
	}
	if len(hs.requests) != 2 {
		t.Fatalf("%d calls", len(hs.requests))
	}
	u, dl := hs.requests[0], hs.requests[1]
	if u.Operation != admissionv1.Update || !strings.Contains(string(u.OldObject.Raw), `"old":"yes"`) || u.Object.Raw == nil ||
		string(u.Options.Raw) != `{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1"}` {
		t.Errorf("update request %s %s %s", u.Operation, u.OldObject.Raw, u.Options.Raw)
	}
	if dl.Operation != admissionv1.Delete || dl.Object.Raw != nil || !strings.Contains(string(dl.OldObject.Raw), `"old":"yes"`) ||
		!strings.Contains(string(dl.Options.Raw), `"kind":"DeleteOptions"`) {
		t.Errorf("delete request %s %s %s %s", dl.Operation, dl.Object.Raw, dl.OldObject.Raw, dl.Options.Raw)
	}
}

func TestWaitsForTheFirstConfiguration(t *testing.T) {
	d := newDispatcher(nil)
	// Nothing read yet: a request whose context ends first is refused.
	ctx, cancel := context.WithTimeout(aliceCtx, 50*time.Millisecond)
	defer cancel()
	st := statusOf(t, d.Validating().Validate(ctx, podAttrs(admission.Create, "")))
	if st.Code != 403 || st.Message != `pods "p" is forbidden: not yet ready to handle request` {
		t.Errorf("%d %q", st.Code, st.Message)
	}
	// A request waiting proceeds once the configurations arrive.
	done := make(chan error, 1)
	go func() { done <- d.Mutating().Admit(aliceCtx, podAttrs(admission.Create, "")) }()
	select {
	case err := <-done:
		t.Fatalf("admitted before any configuration was read: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	d.SetMutating(nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
