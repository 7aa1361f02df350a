package authentication

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/user"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// tokens authenticates "good" as alice for the audiences the request asks
// (echoing them), "stray" for an audience nobody asked, and refuses the
// rest with two errors, as a union of two authenticators would.
var tokens = authenticator.WithAuthenticatedGroup(authenticator.BearerToken(authenticator.TokenFunc(
	func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		auds, _ := authenticator.AudiencesFrom(ctx)
		switch token {
		case "good":
			return &authenticator.Response{User: &user.Info{Name: "alice", UID: "1", Groups: []string{"dev"}, Extra: map[string][]string{"k": {"v"}}}, Audiences: auds}, true, nil
		case "stray":
			return &authenticator.Response{User: &user.Info{Name: "bob"}, Audiences: []string{"elsewhere"}}, true, nil
		}
		return nil, false, errors.Join(errors.New("first refused"), errors.New("second refused"))
	})))

func review(t *testing.T, token string, audiences ...string) (*authenticationv1.TokenReview, error) {
	t.Helper()
	out, err := NewTokenReviewREST(tokens, []string{"api"}).Create(context.Background(), "", "",
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, false)
	if err != nil {
		return nil, err
	}
	return out.(*authenticationv1.TokenReview), nil
}

func TestTokenReview(t *testing.T) {
	r, err := review(t, "good")
	if err != nil {
		t.Fatal(err)
	}
	st := r.Status
	if !st.Authenticated || st.User.Username != "alice" || !slices.Equal(st.User.Groups, []string{"dev", "system:authenticated"}) ||
		!slices.Equal(st.Audiences, []string{"api"}) || st.User.Extra["k"][0] != "v" || r.Kind != "TokenReview" || r.APIVersion != "authentication.k8s.io/v1" {
		t.Errorf("review %+v", r)
	}
	if r, _ := review(t, "good", "vault"); !slices.Equal(r.Status.Audiences, []string{"vault"}) {
		t.Errorf("audiences %v, want the review's", r.Status.Audiences)
	}
	r, err = review(t, "bad")
	if err != nil || r.Status.Authenticated || r.Status.Error != "[first refused, second refused]" || r.Status.User.Username != "" {
		t.Errorf("refused token: %+v %v", r, err)
	}
	// An authenticator that accepts a token for audiences nobody asked is
	// broken: kube answers 500 rather than trust it.
	if _, err := review(t, "stray"); !apierrors.IsInternalError(err) {
		t.Errorf("stray audiences: %v, want 500", err)
	}
	if _, err := review(t, ""); !apierrors.IsBadRequest(err) || err.Error() != "token is required for TokenReview in authentication" {
		t.Errorf("empty token: %v", err)
	}
}

func TestSelfSubjectReview(t *testing.T) {
	rest := NewSelfSubjectReviewREST()
	if _, err := rest.Create(context.Background(), "", "", &authenticationv1.SelfSubjectReview{}, false); !apierrors.IsBadRequest(err) {
		t.Errorf("no user: %v", err)
	}
	ctx := user.WithUser(context.Background(), &user.Info{Name: "carol", Groups: []string{"system:authenticated"}})
	out, err := rest.Create(ctx, "", "", &authenticationv1.SelfSubjectReview{}, false)
	if err != nil {
		t.Fatal(err)
	}
	r := out.(*authenticationv1.SelfSubjectReview)
	if r.Status.UserInfo.Username != "carol" || r.CreationTimestamp.IsZero() || r.Kind != "SelfSubjectReview" {
		t.Errorf("review %+v", r)
	}
}
