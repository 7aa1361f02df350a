package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/storage/trace"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Config wires a Dispatcher to the rest of the server.
type Config struct {
	// NamespaceLabels looks up the labels of a namespace for
	// namespaceSelectors; the server reads its namespace cache.
	NamespaceLabels NamespaceLabels
	// Warn adds a Warning header to the response of ctx's request (the
	// registry's AddWarning); nil drops warnings.
	Warn func(ctx context.Context, msg string)
	// Annotate adds an audit annotation to ctx's request (kube's
	// mutation.webhook.admission.k8s.io/round_R_index_I, failed-open.*,
	// and the webhooks' own, as NAME/KEY); nil drops them.
	Annotate func(ctx context.Context, key, value string)
	// Logger receives failures of webhooks that fail open; nil is
	// slog.Default().
	Logger *slog.Logger
	// Metrics receives kube's apiserver_admission_webhook_* and
	// match_condition_* metrics of every call; nil records none.
	Metrics *admission.Metrics
}

// Dispatcher calls the admission webhooks of the current configurations.
type Dispatcher struct {
	cfg        Config
	mutating   hookSource
	validating hookSource
	clients    clients
}

// hookSource is the current set of one kind of webhook, nil until the
// first set arrives; ready is closed then.
type hookSource struct {
	set   atomic.Pointer[hookSet]
	once  sync.Once
	ready chan struct{}
}

func (s *hookSource) store(hooks []*Hook) {
	s.set.Store(&hookSet{hooks: hooks})
	s.once.Do(func() { close(s.ready) })
}

// readyTimeout is how long a request waits for the first set of webhooks
// (kube's WaitForReady: 10s) before it is refused.
const readyTimeout = 10 * time.Second

// load returns the current set, waiting for the first one: until the
// configurations have been read, admitting without them would let
// through what a webhook exists to stop.
func (s *hookSource) load(ctx context.Context, a *admission.Attributes) (*hookSet, error) {
	if set := s.set.Load(); set != nil {
		return set, nil
	}
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-s.ready:
		return s.set.Load(), nil
	case <-ctx.Done():
	case <-t.C:
	}
	return nil, apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("not yet ready to handle request"))
}

// New returns a Dispatcher that has no webhooks yet: requests wait (up to
// 10s, then 403) for the first SetMutating and SetValidating.
func New(cfg Config) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dispatcher{cfg: cfg}
	d.mutating.ready = make(chan struct{})
	d.validating.ready = make(chan struct{})
	return d
}

// SetMutating makes hooks (from CompileMutating) the mutating webhooks of
// every request that starts from now on.
func (d *Dispatcher) SetMutating(hooks []*Hook) { d.mutating.store(hooks) }

// SetValidating makes hooks (from CompileValidating) the validating
// webhooks of every request that starts from now on.
func (d *Dispatcher) SetValidating(hooks []*Hook) { d.validating.store(hooks) }

// Mutating is kube's MutatingAdmissionWebhook plugin.
func (d *Dispatcher) Mutating() admission.Mutator { return mutator{d} }

// Validating is kube's ValidatingAdmissionWebhook plugin.
func (d *Dispatcher) Validating() admission.Validator { return validator{d} }

// NewMutating and NewValidating are the constructors the admission plugin
// registry names MutatingAdmissionWebhook and ValidatingAdmissionWebhook;
// both plugins of one server share one Dispatcher.
func NewMutating(d *Dispatcher) admission.Mutator { return d.Mutating() }

// NewValidating: see NewMutating.
func NewValidating(d *Dispatcher) admission.Validator { return d.Validating() }

type mutator struct{ d *Dispatcher }
type validator struct{ d *Dispatcher }

// shouldCall decides whether h is called for a; a dry run reaches only
// webhooks without side effects (400 otherwise, as kube).
func (d *Dispatcher) shouldCall(ctx context.Context, h *Hook, a *admission.Attributes, step string) (bool, error) {
	ok, err := h.matches(ctx, a, d.cfg.NamespaceLabels)
	if err != nil || !ok {
		return false, err
	}
	if h.conditionsErr != nil || len(h.conditions) > 0 {
		if ok, err = d.matchConditions(ctx, h, a, step); err != nil || !ok {
			return false, err
		}
	}
	if a.DryRun && h.SideEffects != admissionregistrationv1.SideEffectClassNone && h.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
		return false, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.Name))
	}
	return true, nil
}

// matchConditions evaluates h's matchConditions; an error fails the
// request unless h fails open, which skips h.
func (d *Dispatcher) matchConditions(ctx context.Context, h *Hook, a *admission.Attributes, step string) (bool, error) {
	err := h.conditionsErr
	ok := false
	if err == nil {
		var rev *admissionv1.AdmissionReview
		if rev, err = review(ctx, a); err != nil {
			return false, apierrors.NewInternalError(err)
		}
		start := time.Now()
		ok, err = evalConditions(h.conditions, rev)
		// A webhook is excluded when a condition is false, or one failed
		// and it fails open.
		d.cfg.Metrics.ObserveMatchConditions(h.Name, step, a.Operation, time.Since(start), err != nil,
			!ok && (err == nil || h.FailurePolicy == admissionregistrationv1.Ignore))
	}
	if err == nil {
		return ok, nil
	}
	if h.FailurePolicy == admissionregistrationv1.Ignore {
		d.cfg.Logger.Warn("webhook matchConditions failed, skipping the webhook", "webhook", h.Name, "err", err)
		return false, nil
	}
	return false, apierrors.NewInternalError(&callError{hook: h.Name, reason: fmt.Errorf("failed to evaluate match condition: %w", err)})
}

// Admit calls the matching mutating webhooks in order, applying each
// patch before the next call; then, once, the IfNeeded webhooks that saw
// an object a later webhook changed.
func (m mutator) Admit(ctx context.Context, a *admission.Attributes) error {
	if exempt(a) {
		return nil
	}
	set, err := m.d.mutating.load(ctx, a)
	if err != nil || len(set.hooks) == 0 {
		return err
	}
	// version counts the changes webhooks made; seen[i] is the version
	// webhook i last saw (after its own change).
	version := 0
	seen := map[int]int{}
	for i, h := range set.hooks {
		ok, err := m.d.shouldCall(ctx, h, a, admission.StepAdmit)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		changed, err := m.d.mutate(ctx, h, a, 0, i)
		if err != nil {
			return err
		}
		if changed {
			version++
		}
		seen[i] = version
	}
	if version == 0 {
		return nil
	}
	for i, h := range set.hooks {
		v, called := seen[i]
		if !called || h.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy || v == version {
			continue
		}
		changed, err := m.d.mutate(ctx, h, a, 1, i)
		if err != nil {
			return err
		}
		if changed {
			version++
		}
	}
	return nil
}

// mutate calls one mutating webhook and applies its patch to a.Object;
// round and index name it in the audit annotations, as kube does.
func (d *Dispatcher) mutate(ctx context.Context, h *Hook, a *admission.Attributes, round, index int) (changed bool, err error) {
	var out effects
	defer d.flush(ctx, &out)
	rev, err := review(ctx, a)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	suffix := fmt.Sprintf("round_%d_index_%d", round, index)
	start := time.Now()
	resp, result, err := d.ask(ctx, h, rev, &out, "failed-open.mutation.webhook.admission.k8s.io/"+suffix)
	if resp != nil && err == nil && len(resp.Patch) > 0 && a.Object != nil {
		if changed, err = applyPatch(a, rev.Request.Object.Raw, resp.Patch); err != nil {
			// The patch is part of the call for kube's metrics: an
			// API server error, with no status code.
			result = callResult{rejected: true, errorType: admission.WebhookInternalError}
		}
	}
	d.record(h, admission.WebhookMutating, a, start, result)
	if resp == nil || err != nil {
		return false, err
	}
	note, _ := json.Marshal(struct {
		Configuration string `json:"configuration"`
		Webhook       string `json:"webhook"`
		Mutated       bool   `json:"mutated"`
	}{h.Config, h.Name, changed})
	out.annotate("mutation.webhook.admission.k8s.io/"+suffix, string(note))
	return changed, nil
}

// applyPatch applies a JSONPatch to doc, a.Object's JSON, and stores the
// result in a.Object in place (the registry holds pointers into it); it
// reports whether anything changed.
func applyPatch(a *admission.Attributes, doc, patch []byte) (bool, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if len(p) == 0 {
		return false, nil // "[]": many webhooks answer it rather than no patch
	}
	patched, err := p.Apply(doc)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	gvk := a.Object.GetObjectKind().GroupVersionKind()
	out := reflect.New(reflect.TypeOf(a.Object).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(patched, out); err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("decode the patched object: %w", err))
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	if apiequality.Semantic.DeepEqual(a.Object, out) {
		return false, nil
	}
	reflect.ValueOf(a.Object).Elem().Set(reflect.ValueOf(out).Elem())
	return true, nil
}

// effects are what calling webhooks adds to the response and the audit
// event. Neither is safe for concurrent use, so parallel calls gather
// them apart and flush them in webhook order.
type effects struct {
	warnings    []string
	annotations [][2]string
}

func (e *effects) annotate(key, value string) {
	e.annotations = append(e.annotations, [2]string{key, value})
}

func (d *Dispatcher) flush(ctx context.Context, e *effects) {
	if d.cfg.Warn != nil {
		for _, w := range e.warnings {
			d.cfg.Warn(ctx, w)
		}
	}
	if d.cfg.Annotate != nil {
		for _, kv := range e.annotations {
			d.cfg.Annotate(ctx, kv[0], kv[1])
		}
	}
	*e = effects{}
}

// ask calls h and turns its answer into kube's errors: a denial is the
// webhook's Status, a failed call is a 500 unless h fails open (then the
// response is nil and so is the error). The webhook's warnings and audit
// annotations go to out, denied or not; failOpenKey is the annotation
// that records failing open. rev is the review to send (its object
// encoded once per object version by the caller). The result is what
// the metrics record of the call.
func (d *Dispatcher) ask(ctx context.Context, h *Hook, rev *admissionv1.AdmissionReview, out *effects, failOpenKey string) (*admissionv1.AdmissionResponse, callResult, error) {
	rev.Request.UID = newUID()
	resp, err := d.call(ctx, h, rev)
	if err != nil {
		result := callResult{rejected: true, errorType: admission.WebhookInternalError}
		var ce *callError
		if errors.As(err, &ce) {
			// A call given up because the request was cancelled is not
			// the webhook's failure: kube counts neither a rejection nor
			// failing open for it.
			canceled := errors.Is(ce.reason, context.Canceled)
			result = callResult{code: ce.code, rejected: true}
			if !canceled {
				result.errorType = admission.WebhookCallingError
			}
			if h.FailurePolicy == admissionregistrationv1.Ignore {
				result = callResult{code: ce.code, failOpen: !canceled}
				d.cfg.Logger.Warn("failed calling webhook, failing open", "webhook", h.Name, "err", err)
				out.annotate(failOpenKey, h.Name)
				return nil, result, nil
			}
		}
		return nil, result, apierrors.NewInternalError(err)
	}
	out.warnings = append(out.warnings, resp.Warnings...)
	for k, v := range resp.AuditAnnotations {
		out.annotate(h.Name+"/"+k, v)
	}
	if !resp.Allowed {
		err := denied(h.Name, resp.Result)
		return nil, callResult{code: int(err.ErrStatus.Code), rejected: true, errorType: admission.WebhookNoError}, err
	}
	return resp, callResult{code: http.StatusOK}, nil
}

// callResult is what kube's metrics record of one webhook call: the
// status code (200 answered, the failed call's code, 0 for the API
// server's own failure), whether the write was refused by it, the error
// type of a refusal ("" when none is counted) and whether it failed open.
type callResult struct {
	code      int
	rejected  bool
	errorType admission.WebhookRejectionErrorType
	failOpen  bool
}

// record sends one call's result to the metrics; typ is the webhook's
// kind (admission.WebhookMutating or WebhookValidating).
func (d *Dispatcher) record(h *Hook, typ string, a *admission.Attributes, start time.Time, r callResult) {
	m := d.cfg.Metrics
	if m == nil {
		return
	}
	if r.errorType != "" {
		m.ObserveWebhookRejection(h.Name, typ, a.Operation, r.errorType, r.code)
	}
	m.ObserveWebhook(h.Name, typ, a.Operation, time.Since(start), r.rejected, r.code)
	if r.failOpen {
		m.ObserveWebhookFailOpen(h.Name, typ)
	}
}

// denied is kube's ToStatusErr: the webhook's Status, never below 400,
// its message prefixed with who denied the request.
func denied(name string, result *metav1.Status) *apierrors.StatusError {
	st := metav1.Status{}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	by := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = by + ": " + st.Message
	case st.Reason != "":
		st.Message = by + ": " + string(st.Reason)
	default:
		st.Message = by + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// Validate calls the matching validating webhooks in parallel and
// returns the first refusal in webhook order.
func (v validator) Validate(ctx context.Context, a *admission.Attributes) error {
	if exempt(a) {
		return nil
	}
	set, err := v.d.validating.load(ctx, a)
	if err != nil || len(set.hooks) == 0 {
		return err
	}
	var call []*Hook
	for _, h := range set.hooks {
		ok, err := v.d.shouldCall(ctx, h, a, admission.StepValidate)
		if err != nil {
			return err
		}
		if ok {
			call = append(call, h)
		}
	}
	// One review for all: the calls differ only in their uid, set on a
	// shallow copy each.
	rev, err := review(ctx, a)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	errs := make([]error, len(call))
	outs := make([]effects, len(call))
	// The webhooks run in parallel: the request's SLI latency leaves out
	// the time they took together, not each one's (call's own count).
	start, callCtx := time.Now(), trace.WithTrace(ctx, nil)
	defer func() { trace.From(ctx).Exclude(time.Since(start)) }()
	one := func(i int) {
		r := *rev
		req := *rev.Request
		r.Request = &req
		callStart := time.Now()
		var result callResult
		_, result, errs[i] = v.d.ask(callCtx, call[i], &r, &outs[i], fmt.Sprintf("failed-open.validating.webhook.admission.k8s.io/round_0_index_%d", i))
		v.d.record(call[i], admission.WebhookValidating, a, callStart, result)
	}
	if len(call) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range call {
			wg.Add(1)
			go func() {
				defer wg.Done()
				one(i)
			}()
		}
		wg.Wait()
	}
	for i := range outs {
		v.d.flush(ctx, &outs[i])
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
