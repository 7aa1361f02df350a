package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corekube/corekube/auth/pki"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file is the kubelet API's authentication and authorization, as the
// kubelet's with --anonymous-auth=false, --authentication-token-webhook and
// --authorization-mode=Webhook (kubeadm's kubelet configuration): a client
// certificate of the client CA or a bearer token the API server accepts
// (TokenReview) says who calls; a SubjectAccessReview on the node's
// subresource for the path says whether they may. Only /healthz is open,
// as the kubelet's.

// kubeletTLS is the kubelet API's TLS configuration: the serving
// certificate (the configured files, else a self-signed one made in memory
// as the kubelet makes one) and the client CAs whose certificates
// authenticate.
func (a *Agent) kubeletTLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.cfg.TLSCertFile, a.cfg.TLSPrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("agent: kubelet API serving certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else {
		cert, err := selfSignedKubeletCert(a.cfg.KubeletAdvertiseHost)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	bundle := a.cfg.ClientCA
	if len(bundle) == 0 {
		bundle = a.cfg.ClusterCA
	}
	if len(bundle) > 0 {
		pool, err := pki.CertPool(bundle)
		if err != nil {
			return nil, fmt.Errorf("agent: kubelet API client CA: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// selfSignedKubeletCert is the kubelet's certificate when it is given none:
// self-signed (a CA of its own, "<host>-ca@<time>"), for the advertised
// host, localhost and the loopback addresses.
func selfSignedKubeletCert(host string) (tls.Certificate, error) {
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	ca, err := pki.NewCA(host + "-ca@" + stamp)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: self-signed kubelet certificate: %w", err)
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if !slices.Contains(hosts, host) {
		hosts = append(hosts, host)
	}
	pair, err := ca.Serving(pki.ServingRequest{CommonName: host + "@" + stamp, Hosts: hosts})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: self-signed kubelet certificate: %w", err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent: self-signed kubelet certificate: %w", err)
	}
	cert.Certificate = append(cert.Certificate, ca.Cert.Raw)
	return cert, nil
}

// kubeletUser is who called the kubelet API.
type kubeletUser struct {
	name   string
	uid    string
	groups []string
	extra  map[string]authorizationv1.ExtraValue
}

// withKubeletAuth wraps the kubelet API's handler in authentication and
// authorization; /healthz passes untouched.
func (a *Agent) withKubeletAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		u, ok, err := a.authenticateKubelet(r)
		if err != nil {
			a.log.Info("kubelet API: authentication failed", "err", err)
		}
		if !ok {
			// The kubelet's text for an unauthenticated request.
			writeText(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		verb, subresource, name := a.kubeletAttributes(r)
		allowed, err := a.authorizeKubelet(r.Context(), u, verb, subresource, name)
		if err != nil {
			a.log.Info("kubelet API: authorization failed", "user", u.name, "path", r.URL.Path, "err", err)
		}
		if !allowed {
			// The kubelet's Forbidden text.
			writeText(w, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", u.name, verb, subresource))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticateKubelet says who made r: the subject of a verified client
// certificate, else the user of a bearer token the API server accepts;
// anyone else is not authenticated (anonymous requests are refused, as with
// the kubelet's --anonymous-auth=false).
func (a *Agent) authenticateKubelet(r *http.Request) (kubeletUser, bool, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		return certUser(cert), true, nil
	}
	scheme, token, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "bearer") || token == "" {
		return kubeletUser{}, false, nil
	}
	key := tokenCacheKey(token)
	if c, ok := a.tokenCache.get(key); ok {
		return c.user, c.ok, nil
	}
	u, ok, err := a.reviewToken(r.Context(), token)
	if err == nil {
		a.tokenCache.put(key, tokenAnswer{user: u, ok: ok}, a.cfg.AuthenticationCacheTTL)
	}
	return u, ok, err
}

// tokenAnswer is a TokenReview's answer, as cached.
type tokenAnswer struct {
	user kubeletUser
	ok   bool
}

// reviewToken asks the API server who token is.
func (a *Agent) reviewToken(ctx context.Context, token string) (kubeletUser, bool, error) {
	review, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return kubeletUser{}, false, fmt.Errorf("tokenreview: %w", err)
	}
	if !review.Status.Authenticated {
		return kubeletUser{}, false, nil
	}
	ru := review.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range ru.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return kubeletUser{name: ru.Username, uid: ru.UID, groups: ru.Groups, extra: extra}, true, nil
}

func certUser(cert *x509.Certificate) kubeletUser {
	return kubeletUser{name: cert.Subject.CommonName, groups: append(slices.Clone(cert.Subject.Organization), "system:authenticated")}
}

// kubeletAttributes are the kubelet's authorization attributes of r: the
// verb of its method, the nodes subresource of its path (stats, metrics,
// log, else proxy, as the kubelet's GetRequestAttributes) and the node:
// for a container's log the node its pod runs on, else the process's
// first node (one listener serves all the process's nodes).
func (a *Agent) kubeletAttributes(r *http.Request) (verb, subresource, name string) {
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = "get"
	}
	path := r.URL.Path
	switch {
	case isSubpath(path, "/stats"):
		subresource = "stats"
	case isSubpath(path, "/metrics"):
		subresource = "metrics"
	case isSubpath(path, "/logs"):
		subresource = "log"
	default:
		subresource = "proxy"
	}
	if rest, ok := strings.CutPrefix(path, "/containerLogs/"); ok {
		if parts := strings.Split(rest, "/"); len(parts) >= 2 {
			if _, n := a.podByName(parts[0], parts[1]); n != nil {
				return verb, subresource, n.name
			}
		}
	}
	if len(a.nodes) > 0 {
		name = a.nodes[0].name
	}
	return verb, subresource, name
}

// isSubpath reports whether path is prefix or below it.
func isSubpath(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// authorizeKubelet says whether u may verb the node's subresource: the
// cached answer, else the API server's.
func (a *Agent) authorizeKubelet(ctx context.Context, u kubeletUser, verb, subresource, name string) (bool, error) {
	key := accessKey(u, verb, subresource, name)
	if allowed, ok := a.accessCache.get(key); ok {
		return allowed, nil
	}
	allowed, err := a.reviewAccess(ctx, u, verb, subresource, name)
	if err != nil {
		return false, err
	}
	ttl := a.cfg.AuthorizationUnauthorizedTTL
	if allowed {
		ttl = a.cfg.AuthorizationAuthorizedTTL
	}
	a.accessCache.put(key, allowed, ttl)
	return allowed, nil
}

// reviewAccess asks the API server a SubjectAccessReview.
func (a *Agent) reviewAccess(ctx context.Context, u kubeletUser, verb, subresource, name string) (bool, error) {
	review, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   u.name,
			UID:    u.uid,
			Groups: u.groups,
			Extra:  u.extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb:        verb,
				Version:     "v1",
				Resource:    "nodes",
				Subresource: subresource,
				Name:        name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subjectaccessreview: %w", err)
	}
	return review.Status.Allowed, nil
}
