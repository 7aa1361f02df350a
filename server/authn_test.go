package server

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/corekube/corekube/auth/user"
)

func TestImpersonationTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		want    *user.Info
		wantErr bool
	}{
		{name: "none"},
		{name: "user", headers: map[string][]string{"Impersonate-User": {"jane"}},
			want: &user.Info{Name: "jane", Groups: []string{user.AllAuthenticated}}},
		{name: "user with groups, uid and extra", headers: map[string][]string{
			"Impersonate-User": {"jane"}, "Impersonate-Group": {"a", "b"}, "Impersonate-Uid": {"42"},
			"Impersonate-Extra-Scopes": {"view", "edit"}, "Impersonate-Extra-Example.com%2fteam": {"core"}},
			want: &user.Info{Name: "jane", UID: "42", Groups: []string{"a", "b", user.AllAuthenticated},
				Extra: map[string][]string{"scopes": {"view", "edit"}, "example.com/team": {"core"}}}},
		{name: "service account gets its groups", headers: map[string][]string{"Impersonate-User": {"system:serviceaccount:ns:bot"}},
			want: &user.Info{Name: "system:serviceaccount:ns:bot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", user.AllAuthenticated}}},
		{name: "node as kubectl --as --as-group", headers: map[string][]string{"Impersonate-User": {"system:node:node-1"}, "Impersonate-Group": {"system:nodes"}},
			want: &user.Info{Name: "system:node:node-1", Groups: []string{"system:nodes", user.AllAuthenticated}}},
		{name: "anonymous", headers: map[string][]string{"Impersonate-User": {user.Anonymous}},
			want: &user.Info{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}},
		{name: "groups without a user", headers: map[string][]string{"Impersonate-Group": {"a"}}, wantErr: true},
		{name: "uid without a user", headers: map[string][]string{"Impersonate-Uid": {"1"}}, wantErr: true},
		{name: "extra without a user", headers: map[string][]string{"Impersonate-Extra-A": {"1"}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tc.headers {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			got, err := impersonationTarget(h)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
