package tokenfile

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corekube/corekube/auth/user"
)

func parse(t *testing.T, text string) (*Authenticator, string) {
	t.Helper()
	var logs bytes.Buffer
	a, err := Parse(strings.NewReader(text), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return a, logs.String()
}

func TestParse(t *testing.T) {
	a, logs := parse(t, `token1,alice,uid-a,"dev,ops"

token2,bob,uid-b
token3,carol,uid-c,solo,ignored-extra-column
"tok,en4","dave, jr",uid-d,""
,empty,uid-e
token2,bob-again,uid-b2,late
#comment,is,a record
`)
	for _, tc := range []struct {
		token string
		want  *user.Info
	}{
		{"token1", &user.Info{Name: "alice", UID: "uid-a", Groups: []string{"dev", "ops"}}},
		{"token2", &user.Info{Name: "bob-again", UID: "uid-b2", Groups: []string{"late"}}},
		{"token3", &user.Info{Name: "carol", UID: "uid-c", Groups: []string{"solo"}}},
		// As kube: an empty groups column is one empty group name.
		{"tok,en4", &user.Info{Name: "dave, jr", UID: "uid-d", Groups: []string{""}}},
		// kube's token file has no comments: this is a token.
		{"#comment", &user.Info{Name: "is", UID: "a record"}},
	} {
		resp, ok, err := a.AuthenticateToken(context.Background(), tc.token)
		if err != nil || !ok {
			t.Errorf("%s: %v, %v", tc.token, ok, err)
			continue
		}
		if !reflect.DeepEqual(resp.User, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.token, resp.User, tc.want)
		}
	}
	for _, token := range []string{"", "token", "token1 ", "TOKEN1", "unknown"} {
		if resp, ok, err := a.AuthenticateToken(context.Background(), token); ok || err != nil {
			t.Errorf("%q: got %+v, %v, %v; want not mine", token, resp, ok, err)
		}
	}
	if a.Len() != 5 {
		t.Errorf("%d tokens, want 5", a.Len())
	}
	if !strings.Contains(logs, "empty token") || !strings.Contains(logs, "duplicate token") {
		t.Errorf("missing warnings in %q", logs)
	}
	for _, secret := range []string{"token1", "token2", "tok,en4"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log carries a token: %q", logs)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"two columns", "token1,alice,uid\ntoken2,bob\n", "line 2: must have at least 3 columns (token, user name, user uid), found 2"},
		{"one column", "lonely\n", "found 1"},
		{"bad quoting", "tok\"en,alice,uid\n", "bare \" in non-quoted-field"},
		{"unterminated quote", "\"token,alice,uid\n", "extraneous or missing \" in quoted-field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "token1") || strings.Contains(err.Error(), "lonely") {
				t.Errorf("the error carries a token: %v", err)
			}
		})
	}
}

func TestNewCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("s3cret,admin,1,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := NewCSV(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok, err := a.AuthenticateToken(context.Background(), "s3cret")
	if !ok || err != nil || resp.User.Name != "admin" || !resp.User.IsPrivileged() {
		t.Errorf("got %+v, %v, %v", resp, ok, err)
	}
	if _, err := NewCSV(filepath.Join(t.TempDir(), "missing.csv"), nil); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("s3cret,admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCSV(path, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("bad file: %v", err)
	}
}
