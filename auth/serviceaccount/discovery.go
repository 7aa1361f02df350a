package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
)

// Paths of the issuer discovery documents, as kube serves them.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// discoveryCacheControl lets relying parties cache the documents an hour,
// as kube.
const discoveryCacheControl = "public, max-age=3600"

// Discovery serves the OIDC discovery document and the JWKS of the
// ServiceAccount token issuer, rendered once.
type Discovery struct {
	config []byte
	keys   []byte
}

// openIDMetadata is the subset of OIDC provider metadata kube publishes,
// in kube's field order.
type openIDMetadata struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

// jwk is one public key of the JWKS, in the field order go-jose (kube's)
// writes: RSA keys have n and e, ECDSA keys crv, x and y.
type jwk struct {
	Use string `json:"use"`
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Crv string `json:"crv,omitempty"`
	Alg string `json:"alg"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
}

// NewDiscovery renders the documents of issuer, whose keys are published
// at jwksURI. As kube, the issuer must be an https URL without query or
// fragment (a relying party would refuse anything else); the server logs
// the error and serves no discovery.
func NewDiscovery(issuer, jwksURI string, keys []crypto.PublicKey) (*Discovery, error) {
	iss, err := url.Parse(issuer)
	switch {
	case err != nil:
		return nil, fmt.Errorf("service account issuer %q: %w", issuer, err)
	case iss.Scheme != "https":
		return nil, fmt.Errorf("issuer URL must use https scheme, got: %s", issuer)
	case iss.RawQuery != "":
		return nil, fmt.Errorf("issuer URL may not include a query, got: %s", issuer)
	case iss.Fragment != "":
		return nil, fmt.Errorf("issuer URL may not include a fragment, got: %s", issuer)
	}
	if u, err := url.Parse(jwksURI); err != nil || u.Scheme != "https" {
		return nil, fmt.Errorf("jwksURI requires https scheme, got: %s", jwksURI)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no keys provided for validating keyset")
	}
	set := struct {
		Keys []jwk `json:"keys"`
	}{}
	var algs []string
	for _, k := range keys {
		kid, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		method := signingMethod(k)
		if method == nil {
			return nil, fmt.Errorf("service account issuer JWKS: a %T cannot verify tokens", k)
		}
		key := jwk{Use: "sig", Kid: kid, Alg: method.Alg()}
		switch k := k.(type) {
		case *rsa.PublicKey:
			key.Kty = "RSA"
			key.N = base64.RawURLEncoding.EncodeToString(k.N.Bytes())
			key.E = base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())
		case *ecdsa.PublicKey:
			// RFC 7518: x and y are the curve's size in bytes, padded.
			size := (k.Curve.Params().BitSize + 7) / 8
			key.Kty, key.Crv = "EC", k.Curve.Params().Name
			key.X = base64.RawURLEncoding.EncodeToString(k.X.FillBytes(make([]byte, size)))
			key.Y = base64.RawURLEncoding.EncodeToString(k.Y.FillBytes(make([]byte, size)))
		}
		set.Keys = append(set.Keys, key)
		if !slices.Contains(algs, method.Alg()) {
			algs = append(algs, method.Alg())
		}
	}
	// kube lists the keys' algorithms sorted.
	slices.Sort(algs)
	d := &Discovery{}
	if d.keys, err = json.Marshal(set); err != nil {
		return nil, fmt.Errorf("marshal service account issuer JWKS: %w", err)
	}
	d.config, err = json.Marshal(openIDMetadata{
		Issuer:        issuer,
		JWKSURI:       jwksURI,
		ResponseTypes: []string{"id_token"},
		SubjectTypes:  []string{"public"},
		SigningAlgs:   algs,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal service account issuer metadata: %w", err)
	}
	return d, nil
}

// ServeConfiguration answers GET /.well-known/openid-configuration.
func (d *Discovery) ServeConfiguration(w http.ResponseWriter, _ *http.Request) {
	serveDocument(w, "application/json", d.config)
}

// ServeKeys answers GET /openid/v1/jwks (RFC 7517's media type).
func (d *Discovery) ServeKeys(w http.ResponseWriter, _ *http.Request) {
	serveDocument(w, "application/jwk-set+json", d.keys)
}

func serveDocument(w http.ResponseWriter, contentType string, data []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", discoveryCacheControl)
	_, _ = w.Write(data)
}
