// Package webhook is corekube's dynamic admission: the webhooks of
// admissionregistration.k8s.io/v1 MutatingWebhookConfigurations and
// ValidatingWebhookConfigurations, called over HTTPS with an
// admission.k8s.io/v1 AdmissionReview on every write they match, as
// kube-apiserver v1.32's MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins do.
//
// A Dispatcher holds the current webhooks; whoever watches the
// configurations (server) hands it every new set with SetMutating and
// SetValidating, which swap it atomically: a request uses the set it
// started with, never half of two. Mutating returns the admission.Mutator
// (webhooks called in order, JSONPatch responses applied, IfNeeded
// webhooks reinvoked once), Validating the admission.Validator (webhooks
// called in parallel).
//
// matchConditions are CEL expressions (github.com/google/cel-go) over
// kube's variables object, oldObject and request.
//
// Differences from kube: every resource is served in one version, so
// matchPolicy Equivalent matches what Exact does; matchConditions have no
// authorizer variable (there is no authorizer to ask yet) and only the
// strings extension library; service references are stored but refused
// at call time (Services are not served), subject to the failure policy.
package webhook

import (
	"fmt"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Hook is one webhook of a configuration, compiled for matching.
type Hook struct {
	// Name is the webhook's name; Config the configuration's.
	Name, Config       string
	ClientConfig       admissionregistrationv1.WebhookClientConfig
	Rules              []admissionregistrationv1.RuleWithOperations
	FailurePolicy      admissionregistrationv1.FailurePolicyType
	MatchPolicy        admissionregistrationv1.MatchPolicyType
	SideEffects        admissionregistrationv1.SideEffectClass
	Timeout            time.Duration
	ReinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
	// namespaceSelector and objectSelector are parsed once; a selector
	// that does not parse (only possible for a configuration stored
	// before validation tightened) is kept as the error kube reports.
	namespaceSelector labels.Selector
	objectSelector    labels.Selector
	selectorErr       error
	// conditions are the compiled matchConditions; conditionsErr an
	// expression that did not compile (the registry refuses those, so
	// only a configuration stored by another server can have one).
	conditions    []condition
	conditionsErr error
}

// common gathers what both kinds of webhook share, defaults applied as
// the registry applies them (objects built by tests may lack them).
func newHook(config, name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, se *admissionregistrationv1.SideEffectClass,
	timeout *int32, nsSel, objSel *metav1.LabelSelector, mcs []admissionregistrationv1.MatchCondition) *Hook {
	h := &Hook{
		Name: name, Config: config, ClientConfig: cc, Rules: rules,
		FailurePolicy: admissionregistrationv1.Fail, MatchPolicy: admissionregistrationv1.Equivalent,
		SideEffects: admissionregistrationv1.SideEffectClassUnknown, Timeout: 10 * time.Second,
		ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
	}
	if fp != nil {
		h.FailurePolicy = *fp
	}
	if mp != nil {
		h.MatchPolicy = *mp
	}
	if se != nil {
		h.SideEffects = *se
	}
	if timeout != nil {
		h.Timeout = time.Duration(*timeout) * time.Second
	}
	var err error
	if h.namespaceSelector, err = selector(nsSel); err != nil {
		h.selectorErr = fmt.Errorf("invalid namespaceSelector: %w", err)
	}
	if h.objectSelector, err = selector(objSel); err != nil {
		h.selectorErr = fmt.Errorf("invalid objectSelector: %w", err)
	}
	if len(mcs) > 0 {
		h.conditions, h.conditionsErr = compileConditions(mcs)
	}
	return h
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// hookSet is one immutable generation of webhooks, in calling order.
type hookSet struct {
	hooks []*Hook
}

// CompileMutating returns the webhooks of configs in kube's order:
// configurations by name, webhooks in their order within each.
func CompileMutating(configs []*admissionregistrationv1.MutatingWebhookConfiguration) []*Hook {
	sorted := append([]*admissionregistrationv1.MutatingWebhookConfiguration(nil), configs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []*Hook
	for _, c := range sorted {
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			h := newHook(c.Name, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector, w.MatchConditions)
			if w.ReinvocationPolicy != nil {
				h.ReinvocationPolicy = *w.ReinvocationPolicy
			}
			out = append(out, h)
		}
	}
	return out
}

// CompileValidating returns the webhooks of configs, configurations by
// name (order does not matter for calling them, it does for reporting).
func CompileValidating(configs []*admissionregistrationv1.ValidatingWebhookConfiguration) []*Hook {
	sorted := append([]*admissionregistrationv1.ValidatingWebhookConfiguration(nil), configs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []*Hook
	for _, c := range sorted {
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			out = append(out, newHook(c.Name, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector, w.MatchConditions))
		}
	}
	return out
}
