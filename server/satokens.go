package server

import (
	"context"
	"crypto"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/authentication"
	"github.com/corekube/corekube/registry/serviceaccounts"
	"github.com/go-chi/chi/v5"
	v1 "k8s.io/api/core/v1"
)

// saTokens is the server's ServiceAccount token machinery: the issuer
// behind serviceaccounts/token, the validator among the token
// authenticators, the keys the discovery documents publish.
type saTokens struct {
	issuer    *serviceaccount.Issuer
	validator *serviceaccount.Validator
	keys      []crypto.PublicKey
}

// memoryKey is the signing key of servers started without one: one per
// process, generated once (tests start many servers); its tokens die with
// the process. ECDSA P-256 as the keys `up` creates: ES256 tokens, cheap
// to sign.
var memoryKey = sync.OnceValues(func() (crypto.Signer, error) { return serviceaccount.GenerateECDSAKey() })

// serveServiceAccountTokens loads the keys, builds the issuer and the
// validator, and adds what uses them to api: serviceaccounts/token,
// tokenreviews and selfsubjectreviews. The token authenticators are built
// later (buildAuthenticator); tokenreviews reaches them through s.
func (s *Server) serveServiceAccountTokens(api *handlers.API) error {
	cfg := &s.cfg
	var key crypto.Signer
	var err error
	if cfg.ServiceAccountSigningKeyFile != "" {
		key, err = serviceaccount.ReadPrivateKey(cfg.ServiceAccountSigningKeyFile)
	} else {
		s.log.Info("no service account signing key file: tokens are signed with a key that lives as long as the process")
		key, err = memoryKey()
	}
	if err != nil {
		return err
	}
	t := &saTokens{}
	if t.issuer, err = serviceaccount.NewIssuer(cfg.ServiceAccountIssuers[0], key); err != nil {
		return err
	}
	for _, f := range cfg.ServiceAccountKeyFiles {
		keys, err := serviceaccount.ReadPublicKeys(f)
		if err != nil {
			return err
		}
		t.keys = append(t.keys, keys...)
	}
	if len(cfg.ServiceAccountKeyFiles) == 0 || cfg.ServiceAccountSigningKeyFile == "" {
		t.keys = append(t.keys, key.Public())
	}

	saRes, pods, nodes := api.Resource("", "v1", "serviceaccounts"), api.Resource("", "v1", "pods"), api.Resource("", "v1", "nodes")
	if saRes == nil || pods == nil || nodes == nil {
		return fmt.Errorf("service account tokens need the serviceaccounts, pods and nodes resources")
	}
	t.validator, err = serviceaccount.NewValidator(serviceaccount.ValidatorConfig{
		Keys: t.keys, Issuers: cfg.ServiceAccountIssuers, APIAudiences: cfg.APIAudiences,
		Lookup: cacheLookup{serviceAccounts: saRes.Store, pods: pods.Store, nodes: nodes.Store},
	})
	if err != nil {
		return err
	}
	s.saTokens = t

	if saRes.Subresources == nil {
		saRes.Subresources = map[string]handlers.Subresource{}
	}
	saRes.Subresources["token"] = handlers.Subresource{Creater: serviceaccounts.NewTokenREST(saRes.Store, pods.Store, nodes.Store, serviceaccounts.TokenOptions{
		Issuer: t.issuer, APIAudiences: cfg.APIAudiences,
		MaxExpiration: cfg.ServiceAccountMaxTokenExpiration, ExtendExpiration: cfg.ServiceAccountExtendTokenExpiration,
	})}
	// A TokenReview runs the server's bearer token authenticators (not
	// anonymous: a token nobody knows is not authenticated).
	reviews := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		return s.tokenReviewAuthn.AuthenticateRequest(r)
	})
	api.AddCreateOnly(
		&handlers.CreateOnly{Info: authentication.TokenReviewInfo(), Creater: authentication.NewTokenReviewREST(reviews, cfg.APIAudiences)},
		&handlers.CreateOnly{Info: authentication.SelfSubjectReviewInfo(), Creater: authentication.NewSelfSubjectReviewREST()},
	)
	return nil
}

// routeServiceAccountIssuer serves the issuer discovery documents, when
// the issuer is one relying parties would accept (https), as kube does.
func (s *Server) routeServiceAccountIssuer(r chi.Router) {
	if s.saTokens == nil {
		return
	}
	jwksURI := s.cfg.ServiceAccountJWKSURI
	if jwksURI == "" {
		// kube names its external address, over https.
		u := url.URL{Scheme: "https", Host: s.listener.Addr().String(), Path: serviceaccount.JWKSPath}
		jwksURI = u.String()
	}
	d, err := serviceaccount.NewDiscovery(s.cfg.ServiceAccountIssuers[0], jwksURI, s.saTokens.keys)
	if err != nil {
		s.log.Warn("service account issuer discovery is not served", "err", err)
		return
	}
	r.Get(serviceaccount.OpenIDConfigPath, d.ServeConfiguration)
	r.Get(serviceaccount.JWKSPath, d.ServeKeys)
}

// cacheLookup finds the objects tokens name in the watch caches.
type cacheLookup struct {
	serviceAccounts, pods, nodes *registry.Store
}

func (l cacheLookup) ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	return cached[*v1.ServiceAccount](ctx, l.serviceAccounts, namespace, name)
}

// Pod runs on every request that presents a pod-bound token, for its uid
// and deletionTimestamp: only the cached copy's metadata is decoded, and
// nothing stays decoded (GetCached would keep every such pod decoded for
// as long as it does not change). A miss reads etcd.
func (l cacheLookup) Pod(ctx context.Context, namespace, name string) (*v1.Pod, error) {
	if m, ok := l.pods.CachedMeta(namespace, name); ok {
		return &v1.Pod{ObjectMeta: *m}, nil
	}
	obj, err := l.pods.Get(ctx, namespace, name, nil)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("pods storage holds a %T", obj)
	}
	return pod, nil
}

func (l cacheLookup) Node(ctx context.Context, name string) (*v1.Node, error) {
	return cached[*v1.Node](ctx, l.nodes, "", name)
}

func cached[T any](ctx context.Context, st *registry.Store, namespace, name string) (T, error) {
	var zero T
	obj, err := st.GetCached(ctx, namespace, name)
	if err != nil {
		return zero, err
	}
	out, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s cache holds a %T", st.Info().Resource, obj)
	}
	return out, nil
}
