package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"sync"
	"time"
)

// The kubelet's webhook cache defaults: token reviews 2 minutes
// (authentication.webhook.cacheTTL), allowed access reviews 5 minutes
// (authorization.webhook.cacheAuthorizedTTL), refused ones 30 seconds
// (cacheUnauthorizedTTL).
const (
	DefaultAuthenticationCacheTTL       = 2 * time.Minute
	DefaultAuthorizationAuthorizedTTL   = 5 * time.Minute
	DefaultAuthorizationUnauthorizedTTL = 30 * time.Second
)

// maxReviewCacheEntries bounds each cache: a flood of distinct tokens or
// users costs at most this many entries.
const maxReviewCacheEntries = 4096

// reviewCache remembers the API server's answers to TokenReviews or
// SubjectAccessReviews for a while, as the kubelet's webhook caches, so
// that a scrape or a log request does not cost a round trip to the API
// server each time. Errors are never cached. It has no goroutine: expired
// entries are dropped when the cache fills.
type reviewCache[V any] struct {
	mu      sync.Mutex
	entries map[string]cacheEntry[V]
	now     func() time.Time
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
}

func newReviewCache[V any](now func() time.Time) *reviewCache[V] {
	return &reviewCache[V]{entries: map[string]cacheEntry[V]{}, now: now}
}

// get returns the unexpired value under key.
func (c *reviewCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put keeps value under key for ttl (nothing when ttl is not positive).
func (c *reviewCache[V]) put(key string, value V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= maxReviewCacheEntries {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxReviewCacheEntries {
			// Still full of live entries: start over rather than grow.
			clear(c.entries)
		}
	}
	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(ttl)}
}

// tokenCacheKey is a token's cache key: its hash, so that the cache holds no
// credential.
func tokenCacheKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// accessKey is the cache key of an access review: everything the
// SubjectAccessReview says.
func accessKey(u kubeletUser, verb, subresource, name string) string {
	var b strings.Builder
	for _, s := range []string{u.name, u.uid, verb, subresource, name} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	for _, g := range u.groups {
		b.WriteString(g)
		b.WriteByte(1)
	}
	keys := make([]string, 0, len(u.extra))
	for k := range u.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(2)
		for _, v := range u.extra[k] {
			b.WriteString(v)
			b.WriteByte(3)
		}
	}
	return b.String()
}
