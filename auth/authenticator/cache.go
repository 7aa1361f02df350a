package authenticator

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
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
	inner Token
	ttl   time.Duration
	size  int
	now   func() time.Time

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

// AuthenticateToken answers from the cache, or asks inner and remembers a
// success.
func (c *CachedToken) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := c.now()
	c.mu.Lock()
	hit, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(hit.expires) {
		return hit.resp, true, nil
	}
	resp, ok, err := c.inner.AuthenticateToken(ctx, token)
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
