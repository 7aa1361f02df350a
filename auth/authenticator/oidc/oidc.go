// Package oidc authenticates JWTs of external OpenID Connect issuers as
// kube-apiserver's structured authentication configuration does
// (--authentication-config, apiserver.config.k8s.io AuthenticationConfiguration
// jwt authenticators): each issuer's keys come from its discovery document
// and JWKS over HTTPS, are cached, refreshed in the background and
// re-fetched (rate-limited) when a token is signed by a key not seen yet;
// tokens are verified with golang-jwt (signature, iss, aud, exp, nbf, iat)
// and their claims mapped to the user as configured.
//
// A token that is not a JWT, or whose (unverified) iss names no configured
// issuer, is not this authenticator's kind; a token of a configured issuer
// that does not verify is an error. CEL expressions are refused when the
// configuration is loaded.
package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"time"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/user"
	"github.com/golang-jwt/jwt/v5"
)

// Defaults of Options.
const (
	// DefaultRefreshInterval is how often the keys of an issuer are
	// fetched again in the background, so that keys it withdrew stop
	// verifying.
	DefaultRefreshInterval = time.Hour
	// DefaultRetryInterval is how often a failed fetch is retried in the
	// background (kube retries an issuer it cannot reach every 10s).
	DefaultRetryInterval = 10 * time.Second
	// DefaultMinRefetchInterval is the least time between two fetches
	// that tokens signed by unknown keys ask for.
	DefaultMinRefetchInterval = 5 * time.Second
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway = 30 * time.Second
	// fetchTimeout bounds one fetch of a discovery document or JWKS.
	fetchTimeout = 30 * time.Second
)

// allowedAlgs are the signature algorithms accepted, kube's list for the
// structured configuration (RSA PKCS#1 v1.5, RSA-PSS, ECDSA).
var allowedAlgs = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true,
	"PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true,
}

// Options tune an Authenticator; the zero value is the defaults.
type Options struct {
	// Logger gets the failures of background fetches (nil: slog.Default()).
	Logger *slog.Logger
	// RefreshInterval, RetryInterval, MinRefetchInterval: see the
	// Default* constants.
	RefreshInterval    time.Duration
	RetryInterval      time.Duration
	MinRefetchInterval time.Duration
	// Now is the clock tokens are checked against (nil: time.Now).
	Now func() time.Time
	// Metrics, when set, gets kube's
	// apiserver_authentication_jwt_authenticator_latency_seconds.
	Metrics prometheus.Registerer
}

// Authenticator authenticates the tokens of the configured issuers.
type Authenticator struct {
	issuers map[string]*issuer
	log     *slog.Logger
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// issuer is one jwt authenticator of the configuration.
type issuer struct {
	cfg    JWTAuthenticator
	keys   *remoteKeys
	parser *jwt.Parser
	// success and failure observe the verifications' latency (nil: no
	// metrics), labelled with the issuer URL's hash as kube's.
	success, failure prometheus.Observer
}

// jwtLatency is kube's jwt authenticator latency histogram; its buckets
// are Prometheus' defaults starting at 1 ms.
func jwtLatency() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apiserver_authentication_jwt_authenticator_latency_seconds",
		Help:    "[ALPHA] Latency of jwt authentication operations in seconds. This is the time spent authenticating a token for cache miss only (i.e. when the token is not found in the cache).",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"result", "jwt_issuer_hash"})
}

// LoadConfigFile reads and validates the configuration at path.
func LoadConfigFile(path string, disallowedIssuers []string) (*AuthenticationConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("authentication config: %w", err)
	}
	cfg, err := LoadConfig(data, disallowedIssuers)
	if err != nil {
		return nil, fmt.Errorf("authentication config %q: %w", path, err)
	}
	return cfg, nil
}

// New returns an authenticator for cfg's issuers (cfg validated by
// LoadConfig or ValidateConfig) and starts fetching their keys in the
// background until ctx ends or Close is called. An issuer that cannot be
// reached yet does not fail New (it may be served by the cluster itself):
// its tokens are refused until its keys are had.
func New(ctx context.Context, cfg *AuthenticationConfiguration, opts Options) (*Authenticator, error) {
	if errs := ValidateConfig(cfg, nil); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.MinRefetchInterval == 0 {
		opts.MinRefetchInterval = DefaultMinRefetchInterval
	}
	a := &Authenticator{issuers: map[string]*issuer{}, log: opts.Logger}
	var latency *prometheus.HistogramVec
	if opts.Metrics != nil {
		latency = jwtLatency()
		if err := opts.Metrics.Register(latency); err != nil {
			return nil, fmt.Errorf("register the jwt authenticator metrics: %w", err)
		}
	}
	for _, j := range cfg.JWT {
		client, err := httpClient(j.Issuer.CertificateAuthority)
		if err != nil {
			return nil, fmt.Errorf("issuer %q: %w", j.Issuer.URL, err)
		}
		a.issuers[j.Issuer.URL] = &issuer{
			cfg:  j,
			keys: newRemoteKeys(j.Issuer.URL, j.Issuer.DiscoveryURL, client, opts.MinRefetchInterval, opts.Now),
			parser: jwt.NewParser(
				jwt.WithIssuer(j.Issuer.URL),
				// Any of the audiences (MatchAny, kube's only policy).
				jwt.WithAudience(j.Issuer.Audiences...),
				jwt.WithExpirationRequired(),
				jwt.WithIssuedAt(),
				jwt.WithLeeway(Leeway),
				jwt.WithTimeFunc(opts.Now),
			),
		}
		if latency != nil {
			// The children are looked up when a token comes, so that only
			// results that happened are exposed, as in kube.
			is := a.issuers[j.Issuer.URL]
			hash := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(j.Issuer.URL)))
			is.success, is.failure = latencyObserver{latency, "success", hash}, latencyObserver{latency, "failure", hash}
		}
	}
	ctx, a.stop = context.WithCancel(ctx)
	for _, is := range a.issuers {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.refreshLoop(ctx, is, opts.RefreshInterval, opts.RetryInterval)
		}()
	}
	return a, nil
}

// Close stops the background fetches and waits for them.
func (a *Authenticator) Close() error {
	a.stop()
	a.wg.Wait()
	return nil
}

// Issuers are the URLs of the configured issuers.
func (a *Authenticator) Issuers() []string {
	urls := make([]string, 0, len(a.issuers))
	for u := range a.issuers {
		urls = append(urls, u)
	}
	return urls
}

// Ready reports whether the keys of every issuer have been fetched.
func (a *Authenticator) Ready() bool {
	for _, is := range a.issuers {
		if is.keys.current.Load() == nil {
			return false
		}
	}
	return true
}

// refreshLoop fetches is's keys at once, then every refresh (every retry
// while fetches fail), until ctx ends.
func (a *Authenticator) refreshLoop(ctx context.Context, is *issuer, refresh, retry time.Duration) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		next, err := is.keys.refreshIfOlder(fctx, refresh)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Error("oidc: fetching the issuer's keys", "issuer", is.cfg.Issuer.URL, "err", err)
			next = retry
		}
		timer.Reset(next)
	}
}

func httpClient(caPEM string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != "" {
		pool, err := certPool(caPEM)
		if err != nil {
			return nil, fmt.Errorf("certificateAuthority: %w", err)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{
		Transport: tr,
		Timeout:   fetchTimeout,
		// Discovery and keys are fetched over HTTPS only, redirects too.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s: not https", req.URL.Redacted())
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}, nil
}

// AuthenticateToken authenticates a JWT of a configured issuer.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	iss, ok := untrustedIssuer(token)
	if !ok {
		return nil, false, nil
	}
	is := a.issuers[iss]
	if is == nil {
		return nil, false, nil
	}
	start := time.Now()
	u, err := is.authenticate(ctx, token)
	if is.success != nil {
		if err != nil {
			is.failure.Observe(time.Since(start).Seconds())
		} else {
			is.success.Observe(time.Since(start).Seconds())
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("oidc: issuer %q: %w", iss, err)
	}
	return &authenticator.Response{User: u}, true, nil
}

// untrustedIssuer is the iss claim of a compact JWT, not verified: only
// to pick the issuer that verifies it.
func untrustedIssuer(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return "", false
	}
	return claims.Issuer, claims.Issuer != ""
}

// errUnknownKey: no key of the issuer's (cached) set can have signed the
// token.
var errUnknownKey = errors.New("no key of the issuer's JWKS matches")

func (is *issuer) authenticate(ctx context.Context, token string) (*user.Info, error) {
	k, err := is.keys.get(ctx)
	if err != nil {
		return nil, err
	}
	claims := jwt.MapClaims{}
	_, err = is.parser.ParseWithClaims(token, claims, keyfunc(k))
	if errors.Is(err, errUnknownKey) || errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		// The issuer may have rotated its keys since they were fetched.
		fresh, newer, ferr := is.keys.refetch(ctx, k)
		if ferr != nil {
			err = fmt.Errorf("%w (fetching the issuer's keys again: %w)", err, ferr)
		}
		if newer {
			claims = jwt.MapClaims{}
			_, err = is.parser.ParseWithClaims(token, claims, keyfunc(fresh))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("verify token: %w", err)
	}
	return is.user(claims)
}

// keyfunc picks the keys of k that may have signed a token: those of its
// kid (all when it has none) whose type fits its algorithm.
func keyfunc(k *keys) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if !allowedAlgs[alg] {
			return nil, fmt.Errorf("signing algorithm %q is not accepted", alg)
		}
		candidates := k.all
		kid, _ := t.Header["kid"].(string)
		if kid != "" {
			candidates = k.byKID[kid]
		}
		var set jwt.VerificationKeySet
		for _, key := range candidates {
			if keyFits(alg, key) {
				set.Keys = append(set.Keys, key)
			}
		}
		switch {
		case len(set.Keys) == 0 && kid != "":
			return nil, fmt.Errorf("%w: kid %q, algorithm %s", errUnknownKey, kid, alg)
		case len(set.Keys) == 0:
			return nil, fmt.Errorf("%w: algorithm %s", errUnknownKey, alg)
		case len(set.Keys) == 1:
			return set.Keys[0], nil
		}
		return set, nil
	}
}

func keyFits(alg string, key crypto.PublicKey) bool {
	switch pub := key.(type) {
	case *rsa.PublicKey:
		return alg[0] == 'R' || alg[0] == 'P'
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return pub.Curve == elliptic.P256()
		case "ES384":
			return pub.Curve == elliptic.P384()
		case "ES512":
			return pub.Curve == elliptic.P521()
		}
	}
	return false
}

// user maps verified claims to the user, as kube's claim mappings and
// claim validation rules.
func (is *issuer) user(claims jwt.MapClaims) (*user.Info, error) {
	m := is.cfg.ClaimMappings
	name, err := stringClaim(claims, m.Username.Claim)
	if err != nil {
		return nil, fmt.Errorf("username: %w", err)
	}
	if name == "" {
		return nil, fmt.Errorf("username: claim %q is empty", m.Username.Claim)
	}
	if m.Username.Claim == "email" {
		// As kube: an email is a user name only when not said to be
		// unverified (email_verified, when present, must be true).
		if v, present := claims["email_verified"]; present {
			verified, isBool := v.(bool)
			if !isBool {
				return nil, errors.New("claim \"email_verified\" is not a boolean")
			}
			if !verified {
				return nil, errors.New("email not verified")
			}
		}
	}
	u := &user.Info{Name: prefixed(m.Username.Prefix, name)}

	if c := m.Groups.Claim; c != "" {
		groups, err := stringsClaim(claims, c)
		if err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
		for _, g := range groups {
			u.Groups = append(u.Groups, prefixed(m.Groups.Prefix, g))
		}
	}
	if c := m.UID.Claim; c != "" {
		if u.UID, err = stringClaim(claims, c); err != nil {
			return nil, fmt.Errorf("uid: %w", err)
		}
	}
	for _, r := range is.cfg.ClaimValidationRules {
		if r.Claim == "" {
			continue // expressions are refused at load
		}
		v, err := stringClaim(claims, r.Claim)
		if err != nil {
			return nil, fmt.Errorf("required claim: %w", err)
		}
		if v != r.RequiredValue {
			return nil, fmt.Errorf("required claim %s value does not match. Got = %s, want = %s", r.Claim, v, r.RequiredValue)
		}
	}
	return u, nil
}

func prefixed(prefix *string, s string) string {
	if prefix == nil {
		return s
	}
	return *prefix + s
}

func stringClaim(claims jwt.MapClaims, name string) (string, error) {
	v, ok := claims[name]
	if !ok {
		return "", fmt.Errorf("claim %q not present", name)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("claim %q is not a string", name)
	}
	return s, nil
}

// stringsClaim reads a string or array-of-strings claim (kube lets a
// single string be the groups); absent, null or "" is none.
func stringsClaim(claims jwt.MapClaims, name string) ([]string, error) {
	switch v := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		if v == "" {
			return nil, nil
		}
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("claim %q holds a value that is not a string", name)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("claim %q is neither a string nor an array of strings", name)
}

// latencyObserver observes into one child of the latency histogram,
// looked up at each observation (a token verification costs far more).
type latencyObserver struct {
	vec          *prometheus.HistogramVec
	result, hash string
}

func (l latencyObserver) Observe(v float64) { l.vec.WithLabelValues(l.result, l.hash).Observe(v) }
