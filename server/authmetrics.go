package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/authorizer"
	"github.com/prometheus/client_golang/prometheus"
)

// authMetrics are kube-apiserver's authentication and authorization
// metrics (its endpoints filters' and its authorizers'), by kube's names,
// help texts, labels and buckets, for one server. Every request counts
// once in each filter's metrics, so their label children are cached: the
// label values are a handful of constants.
type authMetrics struct {
	userRequests *prometheus.CounterVec
	attempts     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	authzResults *prometheus.CounterVec
	authzLatency *prometheus.HistogramVec
	decisions    *prometheus.CounterVec

	// The children by result (kube's order of the constants below) and
	// by username category: indexed, not looked up by name, per request.
	authn [3]*lazyResult // success, failure, error
	authz [4]*lazyResult // allowed, denied, no-opinion, error
	users [len(usernameCategories)]*lazyCounter
}

// kube's result labels.
const (
	resultSuccess   = "success"
	resultFailure   = "failure"
	resultError     = "error"
	resultAllowed   = "allowed"
	resultDenied    = "denied"
	resultNoOpinion = "no-opinion"
)

// clockBase anchors monotonic.
var clockBase = time.Now()

// monotonic reads the monotonic clock alone (time.Now reads the wall
// clock too, as much again): the filters need only durations.
func monotonic() time.Duration { return time.Since(clockBase) }

// authBuckets are kube's: 1 ms doubling to ~16 s.
var authBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// newAuthMetrics creates the metrics and registers them with reg.
func newAuthMetrics(reg prometheus.Registerer) (*authMetrics, error) {
	m := &authMetrics{
		userRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authenticated_user_requests",
			Help: "[ALPHA] Counter of authenticated requests broken out by username.",
		}, []string{"username"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authentication_attempts",
			Help: "[ALPHA] Counter of authenticated attempts.",
		}, []string{"result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authentication_duration_seconds",
			Help:    "[ALPHA] Authentication duration in seconds broken out by result.",
			Buckets: authBuckets,
		}, []string{"result"}),
		authzResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authorization_attempts_total",
			Help: "[ALPHA] Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
		}, []string{"result"}),
		authzLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authorization_duration_seconds",
			Help:    "[ALPHA] Authorization duration in seconds broken out by result.",
			Buckets: authBuckets,
		}, []string{"result"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_authorization_decisions_total",
			Help: "[ALPHA] Total number of terminal decisions made by an authorizer split by authorizer type, name, and decision.",
		}, []string{"type", "name", "decision"}),
	}
	for _, c := range []prometheus.Collector{m.userRequests, m.attempts, m.duration, m.authzResults, m.authzLatency, m.decisions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the authentication and authorization metrics: %w", err)
		}
	}
	for i, r := range []string{resultSuccess, resultFailure, resultError} {
		m.authn[i] = &lazyResult{counter: lazyCounter{vec: m.attempts, values: []string{r}}, vec: m.duration}
	}
	for i, r := range []string{resultAllowed, resultDenied, resultNoOpinion, resultError} {
		m.authz[i] = &lazyResult{counter: lazyCounter{vec: m.authzResults, values: []string{r}}, vec: m.authzLatency}
	}
	for i, u := range usernameCategories {
		m.users[i] = &lazyCounter{vec: m.userRequests, values: []string{u}}
	}
	return m, nil
}

// lazyCounter is one child of a counter, made on first use so that only
// what happened is exposed, as in kube.
type lazyCounter struct {
	once   sync.Once
	vec    *prometheus.CounterVec
	values []string
	c      prometheus.Counter
}

func (l *lazyCounter) inc() {
	l.once.Do(func() { l.c = l.vec.WithLabelValues(l.values...) })
	l.c.Inc()
}

// lazyResult is one result's counter and latency histogram children.
type lazyResult struct {
	counter lazyCounter
	vec     *prometheus.HistogramVec
	once    sync.Once
	h       prometheus.Observer
}

func (l *lazyResult) observe(elapsed time.Duration) {
	l.counter.inc()
	l.once.Do(func() { l.h = l.vec.WithLabelValues(l.counter.values...) })
	l.h.Observe(elapsed.Seconds())
}

// authenticated records one request's authentication as kube's filter
// does: an error (a credential that did not verify), a failure (no
// credential, anonymous off) or a success, counted by its user's category.
func (m *authMetrics) authenticated(resp *authenticator.Response, ok bool, err error, elapsed time.Duration) {
	if m == nil {
		return
	}
	switch {
	case err != nil:
		m.authn[2].observe(elapsed)
	case !ok:
		m.authn[1].observe(elapsed)
	default:
		m.authn[0].observe(elapsed)
		name := ""
		if resp != nil && resp.User != nil {
			name = resp.User.Name
		}
		m.users[usernameCategory(name)].inc()
	}
}

// usernameCategories are kube's values of the username label: a few
// well-known names as themselves, email addresses as one value, everyone
// else as another (user names stay out of the metrics).
var usernameCategories = [...]string{"admin", "client", "kube_proxy", "kubelet", "system:serviceaccount:kube-system:default", "email_id", "other"}

// usernameCategory is the index of name's category.
func usernameCategory(name string) int {
	switch name {
	case "admin":
		return 0
	case "client":
		return 1
	case "kube_proxy":
		return 2
	case "kubelet":
		return 3
	case "system:serviceaccount:kube-system:default":
		return 4
	}
	if strings.Contains(name, "@") {
		return 5
	}
	return 6
}

// authorized records one request's authorization as kube's filter does.
func (m *authMetrics) authorized(d authorizer.Decision, err error, elapsed time.Duration) {
	if m == nil {
		return
	}
	i := 2 // no-opinion
	switch {
	case d == authorizer.DecisionAllow:
		i = 0
	case err != nil:
		i = 3
	case d == authorizer.DecisionDeny:
		i = 1
	}
	m.authz[i].observe(elapsed)
}

// instrumented wraps one authorizer of the chain (not system:masters') in
// kube's apiserver_authorization_decisions_total: its terminal decisions,
// by kube's type (the mode) and name (the mode in lower case, as kube
// names the authorizers of --authorization-mode).
func (m *authMetrics) instrumented(mode string, a authorizer.Authorizer) authorizer.Authorizer {
	if m == nil {
		return a
	}
	name := strings.ToLower(mode)
	return &instrumentedAuthorizer{inner: a,
		allowed: &lazyCounter{vec: m.decisions, values: []string{mode, name, resultAllowed}},
		denied:  &lazyCounter{vec: m.decisions, values: []string{mode, name, resultDenied}},
	}
}

type instrumentedAuthorizer struct {
	inner           authorizer.Authorizer
	allowed, denied *lazyCounter
}

func (a *instrumentedAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := a.inner.Authorize(ctx, attrs)
	switch d {
	case authorizer.DecisionAllow:
		a.allowed.inc()
	case authorizer.DecisionDeny:
		a.denied.inc()
	}
	return d, reason, err
}
