package authenticator

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/corekube/corekube/auth/user"
)

// staticTokens authenticates "good" as alice and refuses "bad".
var staticTokens = TokenFunc(func(_ context.Context, token string) (*Response, bool, error) {
	switch token {
	case "good":
		return &Response{User: &user.Info{Name: "alice", Groups: []string{"dev"}}}, true, nil
	case "bad":
		return nil, false, errors.New("token refused")
	}
	return nil, false, nil
})

func request(authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func TestChain(t *testing.T) {
	chain := OrAnonymous(WithAuthenticatedGroup(Union{BearerToken(staticTokens)}))
	for _, tc := range []struct {
		name, header string
		wantUser     string
		wantGroups   []string
		wantErr      bool
	}{
		{name: "valid token", header: "Bearer good", wantUser: "alice", wantGroups: []string{"dev", user.AllAuthenticated}},
		{name: "scheme is case-insensitive", header: "bearer good", wantUser: "alice", wantGroups: []string{"dev", user.AllAuthenticated}},
		{name: "no credentials: anonymous", wantUser: user.Anonymous, wantGroups: []string{user.AllUnauthenticated}},
		{name: "other scheme: anonymous", header: "Basic Zm9vOmJhcg==", wantUser: user.Anonymous, wantGroups: []string{user.AllUnauthenticated}},
		{name: "refused token is never anonymous", header: "Bearer bad", wantErr: true},
		{name: "empty bearer token", header: "Bearer  x", wantErr: true},
		{name: "bearer without token: anonymous", header: "Bearer ", wantUser: user.Anonymous, wantGroups: []string{user.AllUnauthenticated}},
		{name: "unknown token is refused, as kube's 401-bad-token", header: "Bearer other", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(tc.header)
			resp, ok, err := chain.AuthenticateRequest(r)
			if tc.wantErr {
				if err == nil || ok {
					t.Fatalf("got %+v, %v, %v; want an error", resp, ok, err)
				}
				return
			}
			if err != nil || !ok {
				t.Fatalf("got %v, %v", ok, err)
			}
			if resp.User.Name != tc.wantUser || !reflect.DeepEqual(resp.User.Groups, tc.wantGroups) {
				t.Errorf("user %q groups %v, want %q %v", resp.User.Name, resp.User.Groups, tc.wantUser, tc.wantGroups)
			}
			if tc.wantUser == "alice" && r.Header.Get("Authorization") != "" {
				t.Error("the Authorization header survived authentication")
			}
		})
	}
}

// TestAuthenticatedGroupDoesNotAlias: adding system:authenticated never
// writes into the authenticator's own slice (several requests share it).
func TestAuthenticatedGroupDoesNotAlias(t *testing.T) {
	groups := make([]string, 1, 4)
	groups[0] = "dev"
	shared := &user.Info{Name: "bob", Groups: groups}
	a := WithAuthenticatedGroup(RequestFunc(func(*http.Request) (*Response, bool, error) {
		return &Response{User: shared}, true, nil
	}))
	resp, _, _ := a.AuthenticateRequest(request(""))
	if !reflect.DeepEqual(resp.User.Groups, []string{"dev", user.AllAuthenticated}) {
		t.Errorf("groups %v", resp.User.Groups)
	}
	if len(shared.Groups) != 1 || groups[:2][1] != "" {
		t.Errorf("the shared user was changed: %v / %v", shared.Groups, groups[:2])
	}
}

func TestUnionTokenJoinsErrors(t *testing.T) {
	u := UnionToken{staticTokens, TokenFunc(func(context.Context, string) (*Response, bool, error) {
		return nil, false, errors.New("second refused")
	})}
	_, ok, err := u.AuthenticateToken(context.Background(), "bad")
	if ok || err == nil || err.Error() != "token refused\nsecond refused" {
		t.Errorf("got %v, %v", ok, err)
	}
	resp, ok, err := u.AuthenticateToken(context.Background(), "good")
	if !ok || err != nil || resp.User.Name != "alice" {
		t.Errorf("good token: %v, %v", ok, err)
	}
}
