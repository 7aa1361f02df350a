package authenticator

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CachedToken remembers the successful authentications of inner for ttl,
// as kube-apiserver caches its token authenticators' answers (10 s by
// default; failures are not cached): a client sends the same token with
// every request, and verifying it (a JWT signature, the ServiceAccount and
// pod lookups) costs far more than a hash. Within ttl a token keeps working
// after its ServiceAccount is deleted, as in kube.
//
// Tokens are kept only as their SHA-256 digests. At most size entries are
// kept: when full, expired entries are dropped, and if none expired the
// cache starts over (one verification per client, not correctness).
type CachedToken struct {
	inner   Token
	ttl     time.Duration
	size    int
	now     func() time.Time
	metrics *TokenCacheMetrics

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedResponse
}

type cachedResponse struct {
	resp    *Response
	expires time.Time
}

// NewCachedToken caches inner's successes for ttl, at most size of them.
func NewCachedToken(inner Token, ttl time.Duration, size int) *CachedToken {
	return &CachedToken{inner: inner, ttl: ttl, size: size, now: time.Now, entries: map[[sha256.Size]byte]cachedResponse{}}
}

// WithMetrics makes the cache record kube's authentication_token_cache_*
// metrics in m (nil: none); call it before the cache is used.
func (c *CachedToken) WithMetrics(m *TokenCacheMetrics) *CachedToken {
	c.metrics = m
	return c
}

// AuthenticateToken answers from the cache, or asks inner and remembers a
// success.
func (c *CachedToken) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	start := time.Now()
	key := sha256.Sum256([]byte(token))
	now := c.now()
	c.mu.Lock()
	hit, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(hit.expires) {
		c.metrics.request(true, start)
		return hit.resp, true, nil
	}
	resp, ok, err := c.fetch(ctx, token)
	c.metrics.request(false, start)
	if err != nil || !ok {
		return resp, ok, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.size {
			clear(c.entries)
		}
	}
	c.entries[key] = cachedResponse{resp: resp, expires: now.Add(c.ttl)}
	return resp, true, nil
}

// fetch asks inner, counted as kube's cache counts its fetches.
func (c *CachedToken) fetch(ctx context.Context, token string) (*Response, bool, error) {
	m := c.metrics
	if m == nil {
		return c.inner.AuthenticateToken(ctx, token)
	}
	// kube's cache shares one fetch among the requests of one token: its
	// "blocked" gauge counts the requests waiting on a fetch, "in_flight"
	// the fetches. Here every miss fetches on its own: it is both.
	// A miss verifies a token, which costs far more than the label
	// lookups: the children are looked up here, made on first use.
	blocked, inFlight := m.active.WithLabelValues("blocked"), m.active.WithLabelValues("in_flight")
	blocked.Inc()
	defer blocked.Dec()
	inFlight.Inc()
	resp, ok, err := c.inner.AuthenticateToken(ctx, token)
	status := "ok"
	if err != nil {
		status = "error"
	}
	m.fetches.WithLabelValues(status).Inc()
	inFlight.Dec()
	return resp, ok, err
}

// TokenCacheMetrics are kube's authentication_token_cache_* metrics of
// one server's token cache. The children of the requests (every request
// with a token) are cached, made on first use: only what happened is
// exposed, as in kube.
type TokenCacheMetrics struct {
	latency             *prometheus.HistogramVec
	requests, fetches   *prometheus.CounterVec
	active              *prometheus.GaugeVec
	once                [2]sync.Once
	hitCount, missCount prometheus.Counter
	hitLatency, missLat prometheus.Observer
}

// NewTokenCacheMetrics creates the metrics and registers them with reg
// (nil: no metrics, a nil *TokenCacheMetrics).
func NewTokenCacheMetrics(reg prometheus.Registerer) (*TokenCacheMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	// kube gives these no help text: component-base prints the stability
	// level alone.
	m := &TokenCacheMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "authentication_token_cache_request_duration_seconds", Help: "[ALPHA] "}, []string{"status"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authentication_token_cache_request_total", Help: "[ALPHA] "}, []string{"status"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authentication_token_cache_fetch_total", Help: "[ALPHA] "}, []string{"status"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "authentication_token_cache_active_fetch_count", Help: "[ALPHA] "}, []string{"status"}),
	}
	for _, c := range []prometheus.Collector{m.latency, m.requests, m.fetches, m.active} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the token cache metrics: %w", err)
		}
	}
	return m, nil
}

// request records one authentication through the cache: a hit or a
// miss, and its latency (in whole milliseconds, as kube's).
func (m *TokenCacheMetrics) request(hit bool, start time.Time) {
	if m == nil {
		return
	}
	i, status := 0, "miss"
	if hit {
		i, status = 1, "hit"
	}
	m.once[i].Do(func() {
		c, o := m.requests.WithLabelValues(status), m.latency.WithLabelValues(status)
		if hit {
			m.hitCount, m.hitLatency = c, o
		} else {
			m.missCount, m.missLat = c, o
		}
	})
	c, o := m.missCount, m.missLat
	if hit {
		c, o = m.hitCount, m.hitLatency
	}
	c.Inc()
	o.Observe(float64(time.Since(start).Milliseconds()) / 1000)
}
