package authorization

import (
	"context"
	"errors"
	"testing"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// authz allows alice to get pods in ns "a" (any version only when the
// review named none), denies "mallory" everything, has no opinion (with a
// reason and an error) otherwise, and allows get on /healthz.
var authz = authorizer.Func(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch {
	case a.User.Name == "mallory":
		return authorizer.DecisionDeny, "banned", nil
	case !a.ResourceRequest && a.Path == "/healthz" && a.Verb == "get":
		return authorizer.DecisionAllow, "public", nil
	case a.User.Name == "alice" && a.Verb == "get" && a.Resource == "pods" && a.Subresource == "log" && a.Namespace == "a" && a.APIVersion == "*":
		return authorizer.DecisionAllow, "alice reads logs", nil
	}
	return authorizer.DecisionNoOpinion, "nobody said yes", errors.Join(errors.New("x broke"), errors.New("y broke"))
})

var alice = user.WithUser(context.Background(), &user.Info{Name: "alice", Groups: []string{"system:authenticated"}})

func TestSelfSubjectAccessReview(t *testing.T) {
	rest := NewSelfSubjectAccessReviewREST(authz)
	for _, c := range []struct {
		ctx                     context.Context
		spec                    authorizationv1.SelfSubjectAccessReviewSpec
		allowed, denied         bool
		reason, evaluationError string
	}{
		{ctx: alice, spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "a", Verb: "get", Resource: "pods", Subresource: "log"}},
			allowed: true, reason: "alice reads logs"},
		{ctx: alice, spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "b", Verb: "get", Resource: "pods", Subresource: "log"}},
			reason: "nobody said yes", evaluationError: "[x broke, y broke]"},
		{ctx: alice, spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/healthz"}},
			allowed: true, reason: "public"},
		{ctx: user.WithUser(context.Background(), &user.Info{Name: "mallory"}), spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/healthz"}},
			denied: true, reason: "banned"},
	} {
		out, err := rest.Create(c.ctx, "", "", &authorizationv1.SelfSubjectAccessReview{Spec: c.spec}, false)
		if err != nil {
			t.Fatal(err)
		}
		r := out.(*authorizationv1.SelfSubjectAccessReview)
		if st := r.Status; st.Allowed != c.allowed || st.Denied != c.denied || st.Reason != c.reason || st.EvaluationError != c.evaluationError || r.Kind != "SelfSubjectAccessReview" {
			t.Errorf("%+v: got %+v", c.spec, r)
		}
	}
	for _, c := range []struct {
		review *authorizationv1.SelfSubjectAccessReview
		want   string
	}{
		{&authorizationv1.SelfSubjectAccessReview{},
			`.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified`},
		{&authorizationv1.SelfSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{}}},
			`must be empty`},
	} {
		_, err := rest.Create(alice, "", "", c.review, false)
		if !apierrors.IsInvalid(err) || (c.review.Name == "" && err.Error() != c.want) {
			t.Errorf("%+v: %v, want %q", c.review, err, c.want)
		}
	}
	if _, err := rest.Create(context.Background(), "", "", &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{}}}, false); !apierrors.IsBadRequest(err) {
		t.Errorf("no user: %v", err)
	}
}

func TestSubjectAccessReviews(t *testing.T) {
	spec := authorizationv1.SubjectAccessReviewSpec{User: "alice",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "a", Verb: "get", Resource: "pods", Subresource: "log"}}
	out, err := NewSubjectAccessReviewREST(authz).Create(context.Background(), "", "", &authorizationv1.SubjectAccessReview{Spec: spec}, false)
	if err != nil || !out.(*authorizationv1.SubjectAccessReview).Status.Allowed {
		t.Errorf("review of alice: %+v %v", out, err)
	}
	_, err = NewSubjectAccessReviewREST(authz).Create(context.Background(), "", "", &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: spec.ResourceAttributes, NonResourceAttributes: &authorizationv1.NonResourceAttributes{}}}, false)
	if !apierrors.IsInvalid(err) || len(err.(apierrors.APIStatus).Status().Details.Causes) != 2 {
		t.Errorf("both attributes, no user: %v", err)
	}

	local := NewLocalSubjectAccessReviewREST(authz)
	out, err = local.Create(context.Background(), "a", "", &authorizationv1.LocalSubjectAccessReview{Spec: spec}, false)
	if err != nil || !out.(*authorizationv1.LocalSubjectAccessReview).Status.Allowed || out.(*authorizationv1.LocalSubjectAccessReview).Namespace != "a" {
		t.Errorf("local review of alice: %+v %v", out, err)
	}
	_, err = local.Create(context.Background(), "b", "", &authorizationv1.LocalSubjectAccessReview{Spec: spec}, false)
	if want := `.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: "a": must match metadata.namespace`; !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("namespace mismatch: %v, want %q", err, want)
	}
	_, err = local.Create(context.Background(), "b", "", &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: spec}, false)
	if !apierrors.IsBadRequest(err) {
		t.Errorf("object in another namespace than the URL's: %v", err)
	}
	_, err = local.Create(context.Background(), "a", "", &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice",
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz"}}}, false)
	if want := `.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:""}: disallowed on this kind of request`; !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("non-resource local review: %v", err)
	}
}

func TestSelfSubjectRulesReview(t *testing.T) {
	resolver := authorizer.RuleResolvers{
		authorizer.RuleResolverFunc(func(_ context.Context, u *user.Info, ns string) ([]rbacv1.PolicyRule, bool, error) {
			return []rbacv1.PolicyRule{
				{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{ns}},
				{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
			}, false, nil
		}),
		authorizer.RuleResolverFunc(func(context.Context, *user.Info, string) ([]rbacv1.PolicyRule, bool, error) {
			return nil, true, errors.New("cannot list")
		}),
	}
	rest := NewSelfSubjectRulesReviewREST(resolver)
	out, err := rest.Create(alice, "", "", &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "a"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	st := out.(*authorizationv1.SelfSubjectRulesReview).Status
	if len(st.ResourceRules) != 1 || st.ResourceRules[0].ResourceNames[0] != "a" || len(st.NonResourceRules) != 1 ||
		st.NonResourceRules[0].NonResourceURLs[0] != "/healthz" || !st.Incomplete || st.EvaluationError != "cannot list" {
		t.Errorf("status %+v", st)
	}
	out, err = NewSelfSubjectRulesReviewREST(authorizer.RuleResolvers{}).Create(alice, "", "", &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "a"}}, false)
	if st := out.(*authorizationv1.SelfSubjectRulesReview).Status; err != nil || st.ResourceRules == nil || st.NonResourceRules == nil {
		t.Errorf("no rules must be empty lists: %+v %v", st, err)
	}
	if _, err := rest.Create(alice, "", "", &authorizationv1.SelfSubjectRulesReview{}, false); !apierrors.IsBadRequest(err) || err.Error() != "no namespace on request" {
		t.Errorf("no namespace: %v", err)
	}
}

func TestSelectorValidation(t *testing.T) {
	rest := NewSelfSubjectAccessReviewREST(authz)
	for _, c := range []struct {
		ra   authorizationv1.ResourceAttributes
		want string
	}{
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", FieldSelector: &authorizationv1.FieldSelectorAttributes{}},
			`.authorization.k8s.io "" is invalid: spec.resourceAttributes.fieldSelector.requirements: Required value: when spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is required`},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", LabelSelector: &authorizationv1.LabelSelectorAttributes{RawSelector: "a=b",
			Requirements: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}}}},
			`.authorization.k8s.io "" is invalid: spec.resourceAttributes.labelSelector.rawSelector: Invalid value: "a=b": may not specified at the same time as requirements`},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", FieldSelector: &authorizationv1.FieldSelectorAttributes{
			Requirements: []metav1.FieldSelectorRequirement{{Operator: metav1.FieldSelectorOpIn, Values: []string{"n"}}}}},
			`.authorization.k8s.io "" is invalid: spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be specified`},
		{authorizationv1.ResourceAttributes{Namespace: "a", Verb: "get", Resource: "pods", Subresource: "log", FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "spec.nodeName=n"}}, ""},
	} {
		_, err := rest.Create(alice, "", "", &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &c.ra}}, false)
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || err.Error() != c.want)) {
			t.Errorf("%+v:\n got  %v\n want %q", c.ra, err, c.want)
		}
	}
}
