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

	"github.com/corekube/corekube/admission"
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
	// Logger receives failures of webhooks that fail open; nil is
	// slog.Default().
	Logger *slog.Logger
}

// Dispatcher calls the admission webhooks of the current configurations.
type Dispatcher struct {
	cfg        Config
	mutating   atomic.Pointer[hookSet]
	validating atomic.Pointer[hookSet]
	clients    clients
}

// New returns a Dispatcher with no webhooks.
func New(cfg Config) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{cfg: cfg}
}

// SetMutating makes hooks (from CompileMutating) the mutating webhooks of
// every request that starts from now on.
func (d *Dispatcher) SetMutating(hooks []*Hook) { d.mutating.Store(&hookSet{hooks: hooks}) }

// SetValidating makes hooks (from CompileValidating) the validating
// webhooks of every request that starts from now on.
func (d *Dispatcher) SetValidating(hooks []*Hook) { d.validating.Store(&hookSet{hooks: hooks}) }

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
func (d *Dispatcher) shouldCall(ctx context.Context, h *Hook, a *admission.Attributes) (bool, error) {
	ok, err := h.matches(ctx, a, d.cfg.NamespaceLabels)
	if err != nil || !ok {
		return false, err
	}
	if a.DryRun && h.SideEffects != admissionregistrationv1.SideEffectClassNone && h.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
		return false, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.Name))
	}
	return true, nil
}

// Admit calls the matching mutating webhooks in order, applying each
// patch before the next call; then, once, the IfNeeded webhooks that saw
// an object a later webhook changed.
func (m mutator) Admit(ctx context.Context, a *admission.Attributes) error {
	set := m.d.mutating.Load()
	if set == nil || len(set.hooks) == 0 || exempt(a) {
		return nil
	}
	// version counts the changes webhooks made; seen[i] is the version
	// webhook i last saw (after its own change).
	version := 0
	seen := map[int]int{}
	for i, h := range set.hooks {
		ok, err := m.d.shouldCall(ctx, h, a)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		changed, err := m.d.mutate(ctx, h, a)
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
		changed, err := m.d.mutate(ctx, h, a)
		if err != nil {
			return err
		}
		if changed {
			version++
		}
	}
	return nil
}

// mutate calls one mutating webhook and applies its patch to a.Object.
func (d *Dispatcher) mutate(ctx context.Context, h *Hook, a *admission.Attributes) (changed bool, err error) {
	resp, err := d.ask(ctx, h, a, func(w string) { d.warn(ctx, w) })
	if resp == nil || err != nil {
		return false, err
	}
	if len(resp.Patch) == 0 || a.Object == nil {
		return false, nil
	}
	return applyPatch(a, resp.Patch)
}

// applyPatch applies a JSONPatch to a.Object in place (the registry holds
// pointers into it) and reports whether it changed anything.
func applyPatch(a *admission.Attributes, patch []byte) (bool, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	doc, err := encodeObject(a.Object, a)
	if err != nil {
		return false, apierrors.NewInternalError(err)
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

func (d *Dispatcher) warn(ctx context.Context, msg string) {
	if d.cfg.Warn != nil {
		d.cfg.Warn(ctx, msg)
	}
}

// ask calls h and turns its answer into kube's errors: a denial is the
// webhook's Status, a failed call is a 500 unless h fails open (then the
// response is nil and so is the error). The webhook's warnings go to
// warn, denied or not.
func (d *Dispatcher) ask(ctx context.Context, h *Hook, a *admission.Attributes, warn func(string)) (*admissionv1.AdmissionResponse, error) {
	rev, err := review(ctx, a, newUID())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	resp, err := d.call(ctx, h, rev)
	if err != nil {
		var ce *callError
		if errors.As(err, &ce) && h.FailurePolicy == admissionregistrationv1.Ignore {
			d.cfg.Logger.Warn("failed calling webhook, failing open", "webhook", h.Name, "err", err)
			return nil, nil
		}
		return nil, apierrors.NewInternalError(err)
	}
	for _, w := range resp.Warnings {
		warn(w)
	}
	if !resp.Allowed {
		return nil, denied(h.Name, resp.Result)
	}
	return resp, nil
}

// denied is kube's ToStatusErr: the webhook's Status, never below 400,
// its message prefixed with who denied the request.
func denied(name string, result *metav1.Status) error {
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
	set := v.d.validating.Load()
	if set == nil || len(set.hooks) == 0 || exempt(a) {
		return nil
	}
	var call []*Hook
	for _, h := range set.hooks {
		ok, err := v.d.shouldCall(ctx, h, a)
		if err != nil {
			return err
		}
		if ok {
			call = append(call, h)
		}
	}
	switch len(call) {
	case 0:
		return nil
	case 1:
		_, err := v.d.ask(ctx, call[0], a, func(w string) { v.d.warn(ctx, w) })
		return err
	}
	// The response's headers are not safe for concurrent use: warnings
	// are gathered per webhook and added once all have answered.
	errs := make([]error, len(call))
	warnings := make([][]string, len(call))
	var wg sync.WaitGroup
	for i, h := range call {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = v.d.ask(ctx, h, a, func(w string) { warnings[i] = append(warnings[i], w) })
		}()
	}
	wg.Wait()
	for _, ws := range warnings {
		for _, w := range ws {
			v.d.warn(ctx, w)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
