package authenticator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
)

func TestCachedToken(t *testing.T) {
	calls := 0
	valid := map[string]bool{"good": true}
	inner := TokenFunc(func(_ context.Context, token string) (*Response, bool, error) {
		calls++
		switch {
		case valid[token]:
			return &Response{User: &user.Info{Name: token}}, true, nil
		case token == "bad":
			return nil, false, errors.New("bad signature")
		}
		return nil, false, nil
	})
	now := time.Unix(1000, 0)
	c := NewCachedToken(inner, 10*time.Second, 2)
	c.now = func() time.Time { return now }
	ctx := context.Background()

	for range 3 {
		if resp, ok, err := c.AuthenticateToken(ctx, "good"); !ok || err != nil || resp.User.Name != "good" {
			t.Fatalf("good: %v %v %v", resp, ok, err)
		}
	}
	if calls != 1 {
		t.Errorf("inner called %d times for one token within the TTL, want 1", calls)
	}
	// Failures and not-mine answers are not cached.
	for range 2 {
		if _, ok, err := c.AuthenticateToken(ctx, "bad"); ok || err == nil {
			t.Errorf("bad: ok=%v err=%v", ok, err)
		}
		if _, ok, err := c.AuthenticateToken(ctx, "other"); ok || err != nil {
			t.Errorf("other: ok=%v err=%v", ok, err)
		}
	}
	if calls != 5 {
		t.Errorf("inner called %d times, want 5 (failures not cached)", calls)
	}
	// Past the TTL the token is verified again: revoked now.
	valid["good"] = false
	now = now.Add(11 * time.Second)
	if _, ok, _ := c.AuthenticateToken(ctx, "good"); ok {
		t.Error("good still accepted after the TTL although revoked")
	}
	// The size bound holds.
	valid["a"], valid["b"], valid["c"] = true, true, true
	for _, tok := range []string{"a", "b", "c"} {
		c.AuthenticateToken(ctx, tok)
	}
	if n := len(c.entries); n > 2 {
		t.Errorf("%d entries, bound 2", n)
	}
}

// TestCachedTokenMetrics: kube's token cache series after hits, a miss
// that verifies and a miss that fails.
func TestCachedTokenMetrics(t *testing.T) {
	inner := TokenFunc(func(_ context.Context, token string) (*Response, bool, error) {
		if token == "good" {
			return &Response{User: &user.Info{Name: token}}, true, nil
		}
		return nil, false, errors.New("bad signature")
	})
	reg := prometheus.NewPedanticRegistry()
	m, err := NewTokenCacheMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCachedToken(inner, time.Minute, 10).WithMetrics(m)
	ctx := context.Background()
	for range 3 {
		_, _, _ = c.AuthenticateToken(ctx, "good") // one miss, two hits
	}
	_, _, _ = c.AuthenticateToken(ctx, "bad")
	fs := metricstest.Gather(t, reg)
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"authentication_token_cache_request_total", "status", "hit", 2},
		{"authentication_token_cache_request_total", "status", "miss", 2},
		{"authentication_token_cache_request_duration_seconds", "status", "hit", 2},
		{"authentication_token_cache_fetch_total", "status", "ok", 1},
		{"authentication_token_cache_fetch_total", "status", "error", 1},
		{"authentication_token_cache_active_fetch_count", "status", "in_flight", 0},
		{"authentication_token_cache_active_fetch_count", "status", "blocked", 0},
	} {
		if got, ok := fs.Value(c.name, c.label, c.value); !ok || got != c.want {
			t.Errorf("%s{%s=%q} = %v (found %v), want %v", c.name, c.label, c.value, got, ok, c.want)
		}
	}
	if h := fs["authentication_token_cache_request_total"].GetHelp(); h != "[ALPHA] " {
		t.Errorf("help %q, want kube's bare stability level", h)
	}
}
