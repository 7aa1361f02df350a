package serviceaccount

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/user"
	"github.com/golang-jwt/jwt/v5"
	v1 "k8s.io/api/core/v1"
)

// Keys of a ServiceAccount user's extra, as kube-apiserver v1.32 sets them.
const (
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraNodeUID      = "authentication.kubernetes.io/node-uid"
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"
)

// Leeway is the clock skew tolerated on exp, nbf and iat, and how long
// after its deletion time a bound object still counts, as kube's
// (go-jose's DefaultLeeway).
const Leeway = time.Minute

// Defaults of the verification cache.
const (
	// DefaultCacheTTL is how long a verified signature is remembered, as
	// kube's token cache (--authentication-token-cache-ttl is not a flag;
	// kube caches successes 10s).
	DefaultCacheTTL = 10 * time.Second
	// DefaultCacheSize bounds the remembered tokens.
	DefaultCacheSize = 1 << 14
)

// Lookup finds the objects a token names. The server's implementation
// reads the watch caches, never etcd per request.
type Lookup interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string) (*v1.Pod, error)
	Node(ctx context.Context, name string) (*v1.Node, error)
}

// ValidatorConfig configures a Validator.
type ValidatorConfig struct {
	// Keys verify signatures (--service-account-key-file, every key of
	// every file).
	Keys []crypto.PublicKey
	// Issuers are the accepted iss values (--service-account-issuer).
	Issuers []string
	// APIAudiences are the audiences a token must share with the request
	// when the request names none (--api-audiences).
	APIAudiences []string
	// Lookup finds the ServiceAccounts and pods tokens name.
	Lookup Lookup
	// CacheTTL is how long a verified signature is remembered (0:
	// DefaultCacheTTL; negative: no cache). Times, audiences and the
	// ServiceAccount and pod are checked on every use all the same.
	CacheTTL time.Duration
	// CacheSize bounds the remembered tokens (0: DefaultCacheSize).
	CacheSize int
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
}

// Validator authenticates ServiceAccount tokens: kube's JWT token
// authenticator with its validator for bound tokens.
type Validator struct {
	keys     map[string]crypto.PublicKey // by kid
	keySet   jwt.VerificationKeySet      // every key, for a token without a known kid
	issuers  []string
	implicit []string
	lookup   Lookup
	now      func() time.Time
	parser   *jwt.Parser
	cache    *verifiedCache
	cacheTTL time.Duration
}

var _ authenticator.Token = (*Validator)(nil)

// NewValidator returns the Validator cfg describes.
func NewValidator(cfg ValidatorConfig) (*Validator, error) {
	if len(cfg.Keys) == 0 {
		return nil, errors.New("service account token validator: no keys")
	}
	if len(cfg.Issuers) == 0 {
		return nil, errors.New("service account token validator: no issuers")
	}
	if cfg.Lookup == nil {
		return nil, errors.New("service account token validator: no lookup")
	}
	v := &Validator{
		keys:     map[string]crypto.PublicKey{},
		issuers:  slices.Clone(cfg.Issuers),
		implicit: slices.Clone(cfg.APIAudiences),
		lookup:   cfg.Lookup,
		now:      cfg.Now,
		// Only the signature is checked by the parser: times are checked
		// on every use (a cached token expires all the same), with kube's
		// leeway and messages. The algorithms are those of the keys (as
		// kube's verifier, which takes the key's); jwt refuses a key of
		// another type than the token's alg names.
		parser:   jwt.NewParser(jwt.WithValidMethods(validMethods(cfg.Keys)), jwt.WithoutClaimsValidation()),
		cacheTTL: cfg.CacheTTL,
	}
	if v.now == nil {
		v.now = time.Now
	}
	for _, k := range cfg.Keys {
		if signingMethod(k) == nil {
			return nil, fmt.Errorf("service account token validator: a %T cannot verify tokens", k)
		}
		kid, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		v.keys[kid] = k
		v.keySet.Keys = append(v.keySet.Keys, k)
	}
	if v.cacheTTL == 0 {
		v.cacheTTL = DefaultCacheTTL
	}
	if v.cacheTTL > 0 {
		size := cfg.CacheSize
		if size <= 0 {
			size = DefaultCacheSize
		}
		v.cache = newVerifiedCache(size)
	}
	return v, nil
}

// validMethods is the algorithms of keys, each once.
func validMethods(keys []crypto.PublicKey) []string {
	var algs []string
	for _, k := range keys {
		if m := signingMethod(k); m != nil && !slices.Contains(algs, m.Alg()) {
			algs = append(algs, m.Alg())
		}
	}
	return algs
}

// AuthenticateToken authenticates a ServiceAccount token. A token that is
// not a JWT of one of the issuers is not its kind (nil, false, nil), so
// that other token authenticators (OIDC) get it.
func (v *Validator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if strings.Count(token, ".") != 2 {
		return nil, false, nil
	}
	now := v.now()
	entry, err := v.verified(token, now)
	if entry == nil || err != nil {
		return nil, false, err
	}
	c := entry.claims
	if err := checkTimes(c, now); err != nil {
		return nil, false, err
	}

	tokenAuds := []string(c.Audience)
	if len(tokenAuds) == 0 {
		tokenAuds = v.implicit
	}
	requested, ok := authenticator.AudiencesFrom(ctx)
	if !ok {
		requested = v.implicit
	}
	auds := authenticator.IntersectAudiences(tokenAuds, requested)
	if len(auds) == 0 && len(v.implicit) != 0 {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAuds, requested)
	}

	if err := v.checkBound(ctx, c, now); err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: entry.user, Audiences: auds}, true, nil
}

// verified returns the token's claims once its signature and issuer are
// checked, from the cache when it was verified lately. nil without error:
// not a token of ours.
func (v *Validator) verified(token string, now time.Time) (*verifiedToken, error) {
	var key [sha256.Size]byte
	if v.cache != nil {
		// The cache keys on the token's hash: the token itself is a
		// credential and stays out of long-lived memory.
		key = sha256.Sum256([]byte(token))
		if e := v.cache.get(key, now); e != nil {
			return e, nil
		}
	}
	if !v.hasIssuer(token) {
		return nil, nil
	}
	c := &claims{}
	if _, err := v.parser.ParseWithClaims(token, c, v.keyFunc); err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	// The payload was read before its signature was checked: check the
	// issuer again on what is signed.
	if !slices.Contains(v.issuers, c.Issuer) {
		return nil, fmt.Errorf("token issuer %q is invalid", c.Issuer)
	}
	k := c.Kubernetes
	if k == nil || k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" {
		// A legacy (Secret-based) token: corekube issues none.
		return nil, errors.New("service account token has no kubernetes.io claims")
	}
	e := &verifiedToken{claims: c, user: userFor(c)}
	if v.cache != nil {
		v.cache.put(key, e, now, now.Add(v.cacheTTL))
	}
	return e, nil
}

// hasIssuer reads the unverified payload's iss: a JWT of another issuer is
// for another authenticator (kube's hasCorrectIssuer).
func (v *Validator) hasIssuer(token string) bool {
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return false
	}
	return slices.Contains(v.issuers, c.Issuer)
}

// keyFunc picks the key the token's kid names, or tries every key when it
// names none of them (a token signed before kids, or by another server's
// key loaded from --service-account-key-file).
func (v *Validator) keyFunc(t *jwt.Token) (any, error) {
	if kid, _ := t.Header["kid"].(string); kid != "" {
		if k, ok := v.keys[kid]; ok {
			return k, nil
		}
	}
	return v.keySet, nil
}

// checkTimes checks exp, nbf and iat with kube's leeway and messages.
func checkTimes(c *claims, now time.Time) error {
	switch {
	case c.NotBefore != nil && now.Add(Leeway).Before(c.NotBefore.Time):
		return errors.New("service account token is not valid yet")
	case c.Expiry != nil && now.Add(-Leeway).After(c.Expiry.Time):
		return errors.New("service account token has expired")
	case c.IssuedAt != nil && now.Add(Leeway).Before(c.IssuedAt.Time):
		return errors.New("service account token is issued in the future")
	}
	return nil
}

// checkBound checks that the ServiceAccount (same uid) and the bound pod
// (same uid, not deleted more than Leeway ago) still exist, as kube's
// validator: deleting either revokes the token.
func (v *Validator) checkBound(ctx context.Context, c *claims, now time.Time) error {
	k := c.Kubernetes
	deletedBefore := now.Add(-Leeway)
	sa, err := v.lookup.ServiceAccount(ctx, k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return err
	}
	if sa.DeletionTimestamp != nil && sa.DeletionTimestamp.Time.Before(deletedBefore) {
		return fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.ServiceAccount.Name)
	}
	if string(sa.UID) != k.ServiceAccount.UID {
		return fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.ServiceAccount.UID)
	}
	if k.Pod == nil {
		if k.Node != nil {
			return v.checkNode(ctx, k.Node, deletedBefore)
		}
		return nil
	}
	pod, err := v.lookup.Pod(ctx, k.Namespace, k.Pod.Name)
	if err != nil {
		return errors.New("service account token has been invalidated")
	}
	// A pod in its grace period keeps its token (its preStop hooks may
	// need the API); once its deletion time is past, the token goes.
	if pod.DeletionTimestamp != nil && pod.DeletionTimestamp.Time.Before(deletedBefore) {
		return errors.New("service account token has been invalidated")
	}
	if string(pod.UID) != k.Pod.UID {
		return fmt.Errorf("pod UID (%s) does not match claim (%s)", pod.UID, k.Pod.UID)
	}
	return nil
}

// checkNode checks the node a node-bound token names (kube's
// ServiceAccountTokenNodeBindingValidation).
func (v *Validator) checkNode(ctx context.Context, ref *ref, deletedBefore time.Time) error {
	node, err := v.lookup.Node(ctx, ref.Name)
	if err != nil {
		return errors.New("service account token has been invalidated")
	}
	if string(node.UID) != ref.UID {
		return fmt.Errorf("node UID (%s) does not match claim (%s)", node.UID, ref.UID)
	}
	if node.DeletionTimestamp != nil && node.DeletionTimestamp.Time.Before(deletedBefore) {
		return errors.New("service account token has been invalidated")
	}
	return nil
}

// userFor is the user a token authenticates as (kube's
// ServiceAccountInfo.UserInfo).
func userFor(c *claims) *user.Info {
	k := c.Kubernetes
	u := &user.Info{
		Name:   user.ServiceAccountUsernamePrefix + k.Namespace + ":" + k.ServiceAccount.Name,
		UID:    k.ServiceAccount.UID,
		Groups: []string{user.ServiceAccountsGroup, user.ServiceAccountGroupPrefix + k.Namespace},
	}
	extra := map[string][]string{}
	if k.Pod != nil && k.Pod.Name != "" && k.Pod.UID != "" {
		extra[ExtraPodName] = []string{k.Pod.Name}
		extra[ExtraPodUID] = []string{k.Pod.UID}
	}
	if c.ID != "" {
		extra[ExtraCredentialID] = []string{"JTI=" + c.ID}
	}
	if k.Node != nil && k.Node.Name != "" {
		extra[ExtraNodeName] = []string{k.Node.Name}
		if k.Node.UID != "" {
			extra[ExtraNodeUID] = []string{k.Node.UID}
		}
	}
	if len(extra) > 0 {
		u.Extra = extra
	}
	return u
}

// verifiedToken is a token whose signature and issuer are checked.
type verifiedToken struct {
	claims  *claims
	user    *user.Info
	expires time.Time // of the cache entry
}

// verifiedCache remembers verified tokens for a short time, bounded in
// size: a token seen again skips the RSA verification and JSON decoding.
type verifiedCache struct {
	mu      sync.Mutex
	max     int
	entries map[[sha256.Size]byte]*verifiedToken
}

func newVerifiedCache(max int) *verifiedCache {
	return &verifiedCache{max: max, entries: map[[sha256.Size]byte]*verifiedToken{}}
}

func (c *verifiedCache) get(key [sha256.Size]byte, now time.Time) *verifiedToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		return nil
	}
	if !now.Before(e.expires) {
		delete(c.entries, key)
		return nil
	}
	return e
}

func (c *verifiedCache) put(key [sha256.Size]byte, e *verifiedToken, now, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.evict(now)
	}
	stored := *e
	stored.expires = expires
	c.entries[key] = &stored
}

// evict drops the expired entries, and when that is not enough, half of
// the others (map order is random, which serves as well as LRU for a cache
// this short-lived).
func (c *verifiedCache) evict(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < c.max/2 {
			break
		}
		delete(c.entries, k)
	}
}

// len is the number of remembered tokens (tests).
func (c *verifiedCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
