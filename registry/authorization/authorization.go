// Package authorization serves the authorization.k8s.io/v1 access reviews,
// resources that are only ever created, never stored, as kube-apiserver
// v1.32 has them: selfsubjectaccessreviews (may I?, `kubectl auth can-i`),
// subjectaccessreviews (may this user?), localsubjectaccessreviews (the
// same, namespaced) and selfsubjectrulesreviews (what may I do here?,
// `kubectl auth can-i --list`). They ask the server's own authorizer, so
// the answer is the decision a real request would get.
package authorization

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/registry/internal/aggregate"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/registry"
)

var (
	selfSubjectAccessReviewKind  = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")
	subjectAccessReviewKind      = authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")
	localSubjectAccessReviewKind = authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview")
	selfSubjectRulesReviewKind   = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview")
)

func info(resource, kind string, namespaced bool) registry.ResourceInfo {
	return registry.ResourceInfo{Group: authorizationv1.GroupName, Version: "v1", Resource: resource,
		Singular: strings.ToLower(kind), Kind: kind, Namespaced: namespaced, Verbs: []string{"create"}}
}

// SelfSubjectAccessReviewInfo describes selfsubjectaccessreviews as kube's
// discovery does.
func SelfSubjectAccessReviewInfo() registry.ResourceInfo {
	return info("selfsubjectaccessreviews", selfSubjectAccessReviewKind.Kind, false)
}

// SubjectAccessReviewInfo describes subjectaccessreviews.
func SubjectAccessReviewInfo() registry.ResourceInfo {
	return info("subjectaccessreviews", subjectAccessReviewKind.Kind, false)
}

// LocalSubjectAccessReviewInfo describes localsubjectaccessreviews, the
// namespaced one.
func LocalSubjectAccessReviewInfo() registry.ResourceInfo {
	return info("localsubjectaccessreviews", localSubjectAccessReviewKind.Kind, true)
}

// SelfSubjectRulesReviewInfo describes selfsubjectrulesreviews.
func SelfSubjectRulesReviewInfo() registry.ResourceInfo {
	return info("selfsubjectrulesreviews", selfSubjectRulesReviewKind.Kind, false)
}

// invalid is kube's 422 for a review. kube names the kind of the decoded
// internal object, whose type metadata the conversion leaves empty: the
// kind in the message and details is empty, the group is kept.
func invalid(errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName}, "", errs)
}

// NonResourceAttributes is kube's internal authorization type of the same
// name, only for the value shown in a field error: kube validates its
// internal object, so an error about spec.nonResourceAttributes prints
// `authorization.NonResourceAttributes{Path:"/x", Verb:"get"}` (a Go
// syntax dump of a type of a package named authorization, as this one).
type NonResourceAttributes struct {
	Path string
	Verb string
}

// badNonResource is nra as a field error's bad value, as kube shows it.
func badNonResource(nra *authorizationv1.NonResourceAttributes) any {
	if nra == nil {
		return nil
	}
	return &NonResourceAttributes{Path: nra.Path, Verb: nra.Verb}
}

// validateSpec checks what every access review's spec needs: exactly one
// of resourceAttributes and nonResourceAttributes (kube's messages and
// paths, including its "null" for the missing one). The selectors are
// checked after (selectorErrors), in kube's order of errors.
func validateSpec(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(path.Child("nonResourceAttributes"), badNonResource(nra), "cannot be specified in combination with resourceAttributes"))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(path.Child("resourceAttributes"), nra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	return errs
}

// selectorErrors are validateSelectors' for a spec's resource attributes,
// named from the root as kube names them.
func selectorErrors(ra *authorizationv1.ResourceAttributes) field.ErrorList {
	if ra == nil {
		return nil
	}
	return validateSelectors(ra, field.NewPath("spec.resourceAttributes"))
}

// validateSelectors checks the field and label selectors a review may
// carry (kube 1.32, AuthorizeWithSelectors): a raw selector or
// requirements, not both, and requirements well formed, operators kube
// does not know being allowed for newer clients. The authorizers decide
// without them (RBAC ignores selectors).
func validateSelectors(ra *authorizationv1.ResourceAttributes, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	shape := func(p *field.Path, raw string, n int) {
		if raw != "" && n > 0 {
			errs = append(errs, field.Invalid(p.Child("rawSelector"), raw, "may not specified at the same time as requirements"))
		}
		if raw == "" && n == 0 {
			errs = append(errs, field.Required(p.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", p)))
		}
	}
	if fs := ra.FieldSelector; fs != nil {
		p := path.Child("fieldSelector")
		shape(p, fs.RawSelector, len(fs.Requirements))
		opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, r := range fs.Requirements {
			errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(r, opts, p.Child("requirements").Index(i))...)
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		p := path.Child("labelSelector")
		shape(p, ls.RawSelector, len(ls.Requirements))
		opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, r := range ls.Requirements {
			errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(r, opts, p.Child("requirements").Index(i))...)
		}
	}
	return errs
}

// validateSubject adds to validateSpec that a review of someone names a
// user or a group.
func validateSubject(spec *authorizationv1.SubjectAccessReviewSpec, path *field.Path) field.ErrorList {
	errs := validateSpec(spec.ResourceAttributes, spec.NonResourceAttributes, path)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(path.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	return append(errs, selectorErrors(spec.ResourceAttributes)...)
}

// metadataEmpty reports whether m holds nothing but what the server fills
// itself (managed fields), ignoring the namespace when asked: a review
// has no name, labels or anything else to keep.
func metadataEmpty(m metav1.ObjectMeta, ignoreNamespace bool) bool {
	m.ManagedFields = nil
	if ignoreNamespace {
		m.Namespace = ""
	}
	return apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, m)
}

// resourceAttributes are the attributes a request described by ra would be
// authorized on; an empty version means any.
func resourceAttributes(u *user.Info, ra *authorizationv1.ResourceAttributes) authorizer.Attributes {
	version := ra.Version
	if version == "" {
		version = "*"
	}
	a := authorizer.Attributes{User: u, Verb: ra.Verb, Namespace: ra.Namespace, APIGroup: ra.Group, APIVersion: version,
		Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name, ResourceRequest: true}
	reviewSelectors(&a, ra)
	return a
}

func nonResourceAttributes(u *user.Info, nra *authorizationv1.NonResourceAttributes) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: nra.Verb, Path: nra.Path}
}

// subjectOf is the user a (local) subject access review asks about.
func subjectOf(spec *authorizationv1.SubjectAccessReviewSpec) *user.Info {
	u := &user.Info{Name: spec.User, UID: spec.UID, Groups: slices.Clone(spec.Groups)}
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = slices.Clone(v)
		}
	}
	return u
}

func specAttributes(spec *authorizationv1.SubjectAccessReviewSpec) authorizer.Attributes {
	u := subjectOf(spec)
	if spec.ResourceAttributes != nil {
		return resourceAttributes(u, spec.ResourceAttributes)
	}
	return nonResourceAttributes(u, spec.NonResourceAttributes)
}

// decide asks z about a and writes its answer as a review's status.
func decide(ctx context.Context, z authorizer.Authorizer, a authorizer.Attributes) authorizationv1.SubjectAccessReviewStatus {
	d, reason, err := z.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{
		Allowed: d == authorizer.DecisionAllow,
		Denied:  d == authorizer.DecisionDeny,
		Reason:  reason,
	}
	if err != nil {
		st.EvaluationError = aggregate.Message(err)
	}
	return st
}

func requester(ctx context.Context) (*user.Info, error) {
	u, ok := user.From(ctx)
	if !ok || u == nil {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	return u, nil
}

// SelfSubjectAccessReviewREST answers whether the requester (after
// impersonation) may do what the review describes.
type SelfSubjectAccessReviewREST struct{ authz authorizer.Authorizer }

// NewSelfSubjectAccessReviewREST returns selfsubjectaccessreviews asking
// authz, the server's authorizer.
func NewSelfSubjectAccessReviewREST(authz authorizer.Authorizer) *SelfSubjectAccessReviewREST {
	return &SelfSubjectAccessReviewREST{authz: authz}
}

// New returns an empty SelfSubjectAccessReview.
func (*SelfSubjectAccessReviewREST) New() runtime.Object {
	return &authorizationv1.SelfSubjectAccessReview{}
}

// GroupVersionKind is authorization.k8s.io/v1 SelfSubjectAccessReview.
func (*SelfSubjectAccessReviewREST) GroupVersionKind() schema.GroupVersionKind {
	return selfSubjectAccessReviewKind
}

// Create validates the review and answers it with the authorizer's
// decision for the requester.
func (r *SelfSubjectAccessReviewREST) Create(ctx context.Context, _, _ string, obj runtime.Object, _ bool) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
	errs := validateSpec(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes, field.NewPath("spec"))
	errs = append(errs, selectorErrors(review.Spec.ResourceAttributes)...)
	if !metadataEmpty(review.ObjectMeta, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), review.ObjectMeta, "must be empty"))
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	u, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	var a authorizer.Attributes
	if review.Spec.ResourceAttributes != nil {
		a = resourceAttributes(u, review.Spec.ResourceAttributes)
	} else {
		a = nonResourceAttributes(u, review.Spec.NonResourceAttributes)
	}
	review.Status = decide(ctx, r.authz, a)
	review.TypeMeta = metav1.TypeMeta{Kind: selfSubjectAccessReviewKind.Kind, APIVersion: selfSubjectAccessReviewKind.GroupVersion().String()}
	return review, nil
}

// SubjectAccessReviewREST answers whether the user the review names may do
// what it describes.
type SubjectAccessReviewREST struct{ authz authorizer.Authorizer }

// NewSubjectAccessReviewREST returns subjectaccessreviews asking authz.
func NewSubjectAccessReviewREST(authz authorizer.Authorizer) *SubjectAccessReviewREST {
	return &SubjectAccessReviewREST{authz: authz}
}

// New returns an empty SubjectAccessReview.
func (*SubjectAccessReviewREST) New() runtime.Object { return &authorizationv1.SubjectAccessReview{} }

// GroupVersionKind is authorization.k8s.io/v1 SubjectAccessReview.
func (*SubjectAccessReviewREST) GroupVersionKind() schema.GroupVersionKind {
	return subjectAccessReviewKind
}

// Create validates the review and answers it with the authorizer's
// decision for its user.
func (r *SubjectAccessReviewREST) Create(ctx context.Context, _, _ string, obj runtime.Object, _ bool) (runtime.Object, error) {
	review := obj.(*authorizationv1.SubjectAccessReview).DeepCopy()
	errs := validateSubject(&review.Spec, field.NewPath("spec"))
	if !metadataEmpty(review.ObjectMeta, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), review.ObjectMeta, "must be empty"))
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	review.Status = decide(ctx, r.authz, specAttributes(&review.Spec))
	review.TypeMeta = metav1.TypeMeta{Kind: subjectAccessReviewKind.Kind, APIVersion: subjectAccessReviewKind.GroupVersion().String()}
	return review, nil
}

// LocalSubjectAccessReviewREST is SubjectAccessReviewREST for one
// namespace: the review may only ask about resources in the namespace of
// its URL (so that namespace admins can be granted it).
type LocalSubjectAccessReviewREST struct{ authz authorizer.Authorizer }

// NewLocalSubjectAccessReviewREST returns localsubjectaccessreviews
// asking authz.
func NewLocalSubjectAccessReviewREST(authz authorizer.Authorizer) *LocalSubjectAccessReviewREST {
	return &LocalSubjectAccessReviewREST{authz: authz}
}

// New returns an empty LocalSubjectAccessReview.
func (*LocalSubjectAccessReviewREST) New() runtime.Object {
	return &authorizationv1.LocalSubjectAccessReview{}
}

// GroupVersionKind is authorization.k8s.io/v1 LocalSubjectAccessReview.
func (*LocalSubjectAccessReviewREST) GroupVersionKind() schema.GroupVersionKind {
	return localSubjectAccessReviewKind
}

// Create takes the URL's namespace as the review's (refusing another, as
// kube's create handler does for any namespaced object), validates that
// the review asks about that namespace only, and answers with the
// authorizer's decision for its user.
func (r *LocalSubjectAccessReviewREST) Create(ctx context.Context, namespace, _ string, obj runtime.Object, _ bool) (runtime.Object, error) {
	review := obj.(*authorizationv1.LocalSubjectAccessReview).DeepCopy()
	switch review.Namespace {
	case "":
		review.Namespace = namespace
	case namespace:
	default:
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	errs := validateSubject(&review.Spec, field.NewPath("spec"))
	if !metadataEmpty(review.ObjectMeta, true) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), review.ObjectMeta, "must be empty except for namespace"))
	}
	if ra := review.Spec.ResourceAttributes; ra != nil && ra.Namespace != review.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, "must match metadata.namespace"))
	}
	if nra := review.Spec.NonResourceAttributes; nra != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), badNonResource(nra), "disallowed on this kind of request"))
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	if namespace == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is required on this type: %v", namespace))
	}
	review.Status = decide(ctx, r.authz, specAttributes(&review.Spec))
	review.TypeMeta = metav1.TypeMeta{Kind: localSubjectAccessReviewKind.Kind, APIVersion: localSubjectAccessReviewKind.GroupVersion().String()}
	return review, nil
}

// SelfSubjectRulesReviewREST answers what the requester may do in a
// namespace, as far as the authorizers can enumerate it.
type SelfSubjectRulesReviewREST struct{ rules authorizer.RuleResolver }

// NewSelfSubjectRulesReviewREST returns selfsubjectrulesreviews listing
// what rules, the server's rule resolvers, grant.
func NewSelfSubjectRulesReviewREST(rules authorizer.RuleResolver) *SelfSubjectRulesReviewREST {
	return &SelfSubjectRulesReviewREST{rules: rules}
}

// New returns an empty SelfSubjectRulesReview.
func (*SelfSubjectRulesReviewREST) New() runtime.Object {
	return &authorizationv1.SelfSubjectRulesReview{}
}

// GroupVersionKind is authorization.k8s.io/v1 SelfSubjectRulesReview.
func (*SelfSubjectRulesReviewREST) GroupVersionKind() schema.GroupVersionKind {
	return selfSubjectRulesReviewKind
}

// Create lists the requester's rules in spec.namespace. As kube's, the
// answer carries only the status: rules split into resource and
// non-resource ones, incomplete when an authorizer cannot enumerate what
// it grants, and the resolvers' errors as evaluationError.
func (r *SelfSubjectRulesReviewREST) Create(ctx context.Context, _, _ string, obj runtime.Object, _ bool) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectRulesReview)
	u, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	if review.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	rules, incomplete, err := r.rules.RulesFor(ctx, u, review.Spec.Namespace)
	out := &authorizationv1.SelfSubjectRulesReview{
		TypeMeta: metav1.TypeMeta{Kind: selfSubjectRulesReviewKind.Kind, APIVersion: selfSubjectRulesReviewKind.GroupVersion().String()},
		Status:   splitRules(rules),
	}
	out.Status.Incomplete = incomplete
	if err != nil {
		out.Status.EvaluationError = aggregate.Message(err)
	}
	return out, nil
}

// splitRules is rules as a rules review shows them: each rule naming
// resources a resource rule, each naming non-resource URLs a
// non-resource rule (a rule naming both is both); both lists present even
// when empty, as kube answers them.
func splitRules(rules []rbacv1.PolicyRule) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{},
		NonResourceRules: []authorizationv1.NonResourceRule{},
	}
	for _, rule := range rules {
		if len(rule.Resources) > 0 {
			st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{
				Verbs: slices.Clone(rule.Verbs), APIGroups: slices.Clone(rule.APIGroups),
				Resources: slices.Clone(rule.Resources), ResourceNames: slices.Clone(rule.ResourceNames),
			})
		}
		if len(rule.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{
				Verbs: slices.Clone(rule.Verbs), NonResourceURLs: slices.Clone(rule.NonResourceURLs),
			})
		}
	}
	return st
}
