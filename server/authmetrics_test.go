package server

import (
	"errors"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAuthMetricsResults: kube's result values and username categories,
// and only the series that happened.
func TestAuthMetricsResults(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := newAuthMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	as := func(name string) *authenticator.Response {
		return &authenticator.Response{User: &user.Info{Name: name}}
	}
	m.authenticated(nil, false, nil, time.Millisecond)                 // no credentials, anonymous off
	m.authenticated(nil, false, errors.New("invalid bearer token"), 0) // a bad token
	m.authenticated(as("admin"), true, nil, 0)                         // kube's own names stay
	m.authenticated(as("kubelet"), true, nil, 0)                       //
	m.authenticated(as("jane@example.com"), true, nil, 0)              // an email address
	m.authenticated(as("system:serviceaccount:kube-system:default"), true, nil, 0)
	m.authenticated(as("system:serviceaccount:team:builder"), true, nil, 0) // anyone else
	m.authorized(authorizer.DecisionAllow, nil, 0)
	m.authorized(authorizer.DecisionNoOpinion, nil, 0)
	m.authorized(authorizer.DecisionNoOpinion, errors.New("down"), 0)
	m.authorized(authorizer.DecisionDeny, nil, 0)
	rbacLike := m.instrumented(authorizer.ModeRBAC, authorizer.AlwaysAllow)
	_, _, _ = rbacLike.Authorize(t.Context(), authorizer.Attributes{})
	_, _, _ = m.instrumented(authorizer.ModeAlwaysDeny, authorizer.AlwaysDeny).Authorize(t.Context(), authorizer.Attributes{})

	fs := metricstest.Gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"authentication_attempts", []string{"result", "failure"}, 1},
		{"authentication_attempts", []string{"result", "error"}, 1},
		{"authentication_attempts", []string{"result", "success"}, 5},
		{"authentication_duration_seconds", []string{"result", "failure"}, 1},
		{"authenticated_user_requests", []string{"username", "admin"}, 1},
		{"authenticated_user_requests", []string{"username", "kubelet"}, 1},
		{"authenticated_user_requests", []string{"username", "email_id"}, 1},
		{"authenticated_user_requests", []string{"username", "system:serviceaccount:kube-system:default"}, 1},
		{"authenticated_user_requests", []string{"username", "other"}, 1},
		{"authorization_attempts_total", []string{"result", "allowed"}, 1},
		{"authorization_attempts_total", []string{"result", "no-opinion"}, 1},
		{"authorization_attempts_total", []string{"result", "error"}, 1},
		{"authorization_attempts_total", []string{"result", "denied"}, 1},
		{"authorization_duration_seconds", []string{"result", "error"}, 1},
		{"apiserver_authorization_decisions_total", []string{"type", "RBAC", "name", "rbac", "decision", "allowed"}, 1},
	} {
		if got, ok := fs.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v; series %q", c.name, c.labels, got, ok, c.want, fs.Series(c.name))
		}
	}
	// AlwaysDeny has no opinion (as kube's): no terminal decision.
	if got := fs.Series("apiserver_authorization_decisions_total"); len(got) != 1 {
		t.Errorf("decisions series %q, want only RBAC's allowed", got)
	}
	if n := len(fs.Series("authenticated_user_requests")); n != 5 {
		t.Errorf("%d username series: %q", n, fs.Series("authenticated_user_requests"))
	}
}

// BenchmarkAuthMetrics is what the authentication and authorization
// filters add to a request: two clock pairs and the observations.
func BenchmarkAuthMetrics(b *testing.B) {
	m, err := newAuthMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	resp := &authenticator.Response{User: &user.Info{Name: "kubernetes-admin"}}
	b.ReportAllocs()
	for b.Loop() {
		start := monotonic()
		m.authenticated(resp, true, nil, monotonic()-start)
		start = monotonic()
		m.authorized(authorizer.DecisionAllow, nil, monotonic()-start)
	}
}
