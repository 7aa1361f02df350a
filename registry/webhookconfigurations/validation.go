package webhookconfigurations

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/corekube/corekube/admission/webhook"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// hook is what validation reads of either kind of webhook.
type hook struct {
	Name                    string
	ClientConfig            admissionregistrationv1.WebhookClientConfig
	Rules                   []admissionregistrationv1.RuleWithOperations
	FailurePolicy           *admissionregistrationv1.FailurePolicyType
	MatchPolicy             *admissionregistrationv1.MatchPolicyType
	NamespaceSelector       *metav1.LabelSelector
	ObjectSelector          *metav1.LabelSelector
	SideEffects             *admissionregistrationv1.SideEffectClass
	TimeoutSeconds          *int32
	AdmissionReviewVersions []string
	MatchConditions         []admissionregistrationv1.MatchCondition
	ReinvocationPolicy      *admissionregistrationv1.ReinvocationPolicyType // mutating only
}

func mutatingHooks(in []admissionregistrationv1.MutatingWebhook) []hook {
	out := make([]hook, len(in))
	for i, h := range in {
		out[i] = hook{h.Name, h.ClientConfig, h.Rules, h.FailurePolicy, h.MatchPolicy, h.NamespaceSelector, h.ObjectSelector,
			h.SideEffects, h.TimeoutSeconds, h.AdmissionReviewVersions, h.MatchConditions, h.ReinvocationPolicy}
	}
	return out
}

func validatingHooks(in []admissionregistrationv1.ValidatingWebhook) []hook {
	out := make([]hook, len(in))
	for i, h := range in {
		out[i] = hook{h.Name, h.ClientConfig, h.Rules, h.FailurePolicy, h.MatchPolicy, h.NamespaceSelector, h.ObjectSelector,
			h.SideEffects, h.TimeoutSeconds, h.AdmissionReviewVersions, h.MatchConditions, nil}
	}
	return out
}

// options are kube's validationOptions that v1 objects vary.
type options struct {
	requireNoSideEffects       bool
	requireRecognizedVersion   bool
	requireUniqueNames         bool
	allowInvalidSelectorValues bool
}

func strictOptions() options {
	return options{requireNoSideEffects: true, requireRecognizedVersion: true, requireUniqueNames: true}
}

// updateOptions keeps what the stored webhooks already satisfied strict,
// and relaxes the rest, as kube's Validate*Update does.
func updateOptions(old []hook) options {
	o := options{requireNoSideEffects: true, requireRecognizedVersion: true, requireUniqueNames: true}
	names := sets.New[string]()
	for _, h := range old {
		if h.SideEffects == nil || !noSideEffectClasses.Has(string(*h.SideEffects)) {
			o.requireNoSideEffects = false
		}
		if len(h.AdmissionReviewVersions) > 0 && !slices.ContainsFunc(h.AdmissionReviewVersions, isAcceptedReviewVersion) {
			o.requireRecognizedVersion = false
		}
		if names.Has(h.Name) {
			o.requireUniqueNames = false
		}
		names.Insert(h.Name)
		for _, sel := range []*metav1.LabelSelector{h.NamespaceSelector, h.ObjectSelector} {
			if sel != nil && len(metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0 {
				o.allowInvalidSelectorValues = true
			}
		}
	}
	return o
}

var (
	supportedFailurePolicies = sets.New("Ignore", "Fail")
	supportedMatchPolicies   = sets.New("Exact", "Equivalent")
	supportedSideEffects     = sets.New("Unknown", "None", "Some", "NoneOnDryRun")
	noSideEffectClasses      = sets.New("None", "NoneOnDryRun")
	supportedOperations      = sets.New("*", "CREATE", "UPDATE", "DELETE", "CONNECT")
	supportedReinvocation    = sets.New("Never", "IfNeeded")
	validScopes              = sets.New("Cluster", "Namespaced", "*")
	// acceptedReviewVersions are the AdmissionReview versions kube lists
	// as understood (corekube sends v1).
	acceptedReviewVersions = []string{"v1", "v1beta1"}
)

func isAcceptedReviewVersion(v string) bool { return slices.Contains(acceptedReviewVersions, v) }

// validateWebhooks is kube's validate{Mutating,Validating}WebhookConfiguration
// minus ObjectMeta (the Store validates it).
func validateWebhooks(hooks []hook, opts options) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range hooks {
		h := &hooks[i]
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(h, opts, p)...)
		errs = append(errs, validateReviewVersions(h.AdmissionReviewVersions, opts.requireRecognizedVersion, p.Child("admissionReviewVersions"))...)
		if opts.requireUniqueNames && h.Name != "" {
			if names.Has(h.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), h.Name))
			} else {
				names.Insert(h.Name)
			}
		}
	}
	return errs
}

func validateWebhook(h *hook, opts options, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p.Child("name"), h.Name)
	for i := range h.Rules {
		errs = append(errs, validateRuleWithOperations(&h.Rules[i], p.Child("rules").Index(i))...)
	}
	if h.FailurePolicy != nil && !supportedFailurePolicies.Has(string(*h.FailurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *h.FailurePolicy, sets.List(supportedFailurePolicies)))
	}
	if h.MatchPolicy != nil && !supportedMatchPolicies.Has(string(*h.MatchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *h.MatchPolicy, sets.List(supportedMatchPolicies)))
	}
	allowed := supportedSideEffects
	if opts.requireNoSideEffects {
		allowed = noSideEffectClasses
	}
	if h.SideEffects == nil {
		errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of "+strings.Join(sets.List(allowed), ", ")))
	} else if !allowed.Has(string(*h.SideEffects)) {
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *h.SideEffects, sets.List(allowed)))
	}
	if h.TimeoutSeconds != nil && (*h.TimeoutSeconds > 30 || *h.TimeoutSeconds < 1) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *h.TimeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	selOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidSelectorValues}
	if h.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.NamespaceSelector, selOpts, p.Child("namespaceSelector"))...)
	}
	if h.ObjectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.ObjectSelector, selOpts, p.Child("objectSelector"))...)
	}
	if h.ReinvocationPolicy != nil && !supportedReinvocation.Has(string(*h.ReinvocationPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *h.ReinvocationPolicy, sets.List(supportedReinvocation)))
	}
	cc := h.ClientConfig
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(p.Child("clientConfig"), "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, validateURL(p.Child("clientConfig", "url"), *cc.URL)...)
	default:
		errs = append(errs, validateService(p.Child("clientConfig", "service"), cc.Service)...)
	}
	errs = append(errs, validateMatchConditions(h.MatchConditions, p.Child("matchConditions"))...)
	return errs
}

// validateMatchConditions is kube's: at most 64, names qualified and
// unique, expressions that compile to a bool.
func validateMatchConditions(mcs []admissionregistrationv1.MatchCondition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(mcs) > 64 {
		errs = append(errs, field.TooMany(p, len(mcs), 64))
	}
	names := sets.New[string]()
	for i, mc := range mcs {
		ip := p.Index(i)
		if expr := strings.TrimSpace(mc.Expression); expr == "" {
			errs = append(errs, field.Required(ip.Child("expression"), ""))
		} else if _, err := webhook.CompileCondition(expr); err != nil {
			errs = append(errs, field.Invalid(ip.Child("expression"), expr, err.Error()))
		}
		if mc.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(mc.Name) {
				errs = append(errs, field.Invalid(ip.Child("name"), mc.Name, msg))
			}
			if names.Has(mc.Name) {
				errs = append(errs, field.Duplicate(ip.Child("name"), mc.Name))
			}
			names.Insert(mc.Name)
		}
	}
	return errs
}

func validateReviewVersions(versions []string, requireRecognized bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(versions) == 0 {
		return append(errs, field.Required(p, "must specify one of "+strings.Join(acceptedReviewVersions, ", ")))
	}
	seen := map[string]bool{}
	recognized := false
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		if isAcceptedReviewVersion(v) {
			recognized = true
		}
	}
	if requireRecognized && !recognized {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of "+strings.Join(acceptedReviewVersions, ", ")))
	}
	return errs
}

func hasWildcard(s []string) bool { return slices.Contains(s, "*") }

func validateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
		errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !supportedOperations.Has(string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, sets.List(supportedOperations)))
		}
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil && !validScopes.Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, sets.List(validScopes)))
	}
	return errs
}

// validateResources checks resource names with kube's wildcard rules: "*"
// (every resource), "*/*" (every resource and subresource), "x/*", "*/y".
func validateResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	wildSub := sets.New[string]() // x/*
	wildRes := sets.New[string]() // */y
	double, single, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		if rs == "*/*" {
			double = true
		}
		if rs == "*" {
			single = true
		}
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			plain = rs != "*"
			continue
		}
		if wildSub.Has(res) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildRes.Has(sub) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildSub.Insert(res)
		}
		if res == "*" {
			wildRes.Insert(sub)
		}
	}
	if len(resources) > 1 && double {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if single && plain {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

const urlForm = "; desired format: https://host[/path]"

// validateURL is kube's ValidateWebhookURL with https forced.
func validateURL(p *field.Path, raw string) field.ErrorList {
	var errs field.ErrorList
	u, err := url.Parse(raw)
	if err != nil {
		return append(errs, field.Required(p, "url must be a valid URL: "+err.Error()+urlForm))
	}
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"+urlForm))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"+urlForm))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateService is kube's ValidateWebhookService. Service references
// are stored (kube accepts them) though corekube cannot call them.
func validateService(p *field.Path, s *admissionregistrationv1.ServiceReference) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "service name is required"))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(p.Child("namespace"), "service namespace is required"))
	}
	if s.Port != nil {
		if msgs := utilvalidation.IsValidPortNum(int(*s.Port)); msgs != nil {
			errs = append(errs, field.Invalid(p.Child("port"), *s.Port, "port is not valid: "+strings.Join(msgs, ", ")))
		}
	}
	if s.Path == nil || *s.Path == "/" || *s.Path == "" {
		return errs
	}
	path := *s.Path
	if path == "//" {
		return append(errs, field.Invalid(p.Child("path"), path, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(path, "/") {
		errs = append(errs, field.Invalid(p.Child("path"), path, "must start with a '/'"))
	}
	check := strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/")
	for i, step := range strings.Split(check, "/") {
		if step == "" {
			errs = append(errs, field.Invalid(p.Child("path"), path, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(step) {
			errs = append(errs, field.Invalid(p.Child("path"), path, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}
