// Package authentication serves the authentication.k8s.io/v1 resources
// that are only ever created, never stored, as kube-apiserver v1.32 has
// them: tokenreviews (is this token valid, and whose is it) and
// selfsubjectreviews (who am I, `kubectl auth whoami`).
package authentication

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/registry/internal/aggregate"
	"net/http"
	"slices"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/registry"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	tokenReviewKind       = authenticationv1.SchemeGroupVersion.WithKind("TokenReview")
	selfSubjectReviewKind = authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview")
)

// TokenReviewInfo describes tokenreviews as kube's discovery does.
func TokenReviewInfo() registry.ResourceInfo {
	return registry.ResourceInfo{Group: authenticationv1.GroupName, Version: "v1", Resource: "tokenreviews",
		Singular: "tokenreview", Kind: "TokenReview", Verbs: []string{"create"}}
}

// SelfSubjectReviewInfo describes selfsubjectreviews as kube's discovery
// does.
func SelfSubjectReviewInfo() registry.ResourceInfo {
	return registry.ResourceInfo{Group: authenticationv1.GroupName, Version: "v1", Resource: "selfsubjectreviews",
		Singular: "selfsubjectreview", Kind: "SelfSubjectReview", Verbs: []string{"create"}}
}

// errAudiences is kube's answer when an authenticator accepted a token for
// none of the audiences asked: a bug of the authenticator, not the
// client's.
var errAudiences = apierrors.NewInternalError(errors.New("error validating audience"))

// TokenReviewREST answers a TokenReview with what the server's token
// authenticators make of its token.
type TokenReviewREST struct {
	authn        authenticator.Request
	apiAudiences []string
}

// NewTokenReviewREST returns the tokenreviews resource. authn is the
// server's request authenticator for bearer tokens, without anonymous (a
// token nobody recognizes is not authenticated); apiAudiences are the
// audiences of a review that names none.
func NewTokenReviewREST(authn authenticator.Request, apiAudiences []string) *TokenReviewREST {
	return &TokenReviewREST{authn: authn, apiAudiences: apiAudiences}
}

// New returns an empty TokenReview.
func (*TokenReviewREST) New() runtime.Object { return &authenticationv1.TokenReview{} }

// GroupVersionKind is authentication.k8s.io/v1 TokenReview.
func (*TokenReviewREST) GroupVersionKind() schema.GroupVersionKind { return tokenReviewKind }

// Create authenticates the review's token as a request carrying it alone
// would be, for the review's audiences (the API's when it names none).
func (r *TokenReviewREST) Create(ctx context.Context, namespace, _ string, obj runtime.Object, _ bool) (runtime.Object, error) {
	review := obj.(*authenticationv1.TokenReview).DeepCopy()
	if namespace != "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is not allowed on this type: %v", namespace))
	}
	if review.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	auds := review.Spec.Audiences
	if len(auds) == 0 {
		auds = r.apiAudiences
	}
	fake, err := http.NewRequestWithContext(authenticator.WithAudiences(ctx, auds), http.MethodGet, "/", nil)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	fake.Header.Set("Authorization", "Bearer "+review.Spec.Token)
	resp, ok, err := r.authn.AuthenticateRequest(fake)
	review.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
	if err != nil {
		review.Status.Error = aggregate.Message(err)
	}
	if len(auds) > 0 && resp != nil && len(authenticator.IntersectAudiences(auds, resp.Audiences)) == 0 {
		return nil, errAudiences
	}
	if resp != nil && resp.User != nil {
		review.Status.User = userInfo(resp.User)
		review.Status.Audiences = resp.Audiences
	}
	review.TypeMeta = metav1.TypeMeta{Kind: tokenReviewKind.Kind, APIVersion: tokenReviewKind.GroupVersion().String()}
	return review, nil
}

// userInfo is u as the authentication API shows a user.
func userInfo(u *user.Info) authenticationv1.UserInfo {
	out := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: slices.Clone(u.Groups)}
	if len(u.Extra) > 0 {
		out.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			out.Extra[k] = authenticationv1.ExtraValue(slices.Clone(v))
		}
	}
	return out
}

// SelfSubjectReviewREST answers a SelfSubjectReview with the user the
// request is made as (after impersonation).
type SelfSubjectReviewREST struct {
	now func() time.Time
}

// NewSelfSubjectReviewREST returns the selfsubjectreviews resource.
func NewSelfSubjectReviewREST() *SelfSubjectReviewREST {
	return &SelfSubjectReviewREST{now: time.Now}
}

// New returns an empty SelfSubjectReview.
func (*SelfSubjectReviewREST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// GroupVersionKind is authentication.k8s.io/v1 SelfSubjectReview.
func (*SelfSubjectReviewREST) GroupVersionKind() schema.GroupVersionKind {
	return selfSubjectReviewKind
}

// Create answers the requester's user info.
func (r *SelfSubjectReviewREST) Create(ctx context.Context, _, _ string, _ runtime.Object, _ bool) (runtime.Object, error) {
	u, ok := user.From(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	return &authenticationv1.SelfSubjectReview{
		TypeMeta:   metav1.TypeMeta{Kind: selfSubjectReviewKind.Kind, APIVersion: selfSubjectReviewKind.GroupVersion().String()},
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(r.now())},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: userInfo(u)},
	}, nil
}
