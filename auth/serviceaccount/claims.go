package serviceaccount

import (
	"github.com/golang-jwt/jwt/v5"
)

// claims is the payload of a ServiceAccount token. Its fields are in
// alphabetical order because kube's tokens are (go-jose writes a merged
// map), so that ours read the same.
type claims struct {
	Audience   jwt.ClaimStrings `json:"aud,omitempty"`
	Expiry     *jwt.NumericDate `json:"exp,omitempty"`
	IssuedAt   *jwt.NumericDate `json:"iat,omitempty"`
	Issuer     string           `json:"iss,omitempty"`
	ID         string           `json:"jti,omitempty"`
	Kubernetes *kubeClaims      `json:"kubernetes.io,omitempty"`
	NotBefore  *jwt.NumericDate `json:"nbf,omitempty"`
	Subject    string           `json:"sub,omitempty"`
}

// kubeClaims is kube's private "kubernetes.io" claim.
type kubeClaims struct {
	Namespace      string           `json:"namespace,omitempty"`
	Node           *ref             `json:"node,omitempty"`
	Pod            *ref             `json:"pod,omitempty"`
	ServiceAccount ref              `json:"serviceaccount"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

type ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// The jwt.Claims methods, for golang-jwt's parser (whose own claim
// validation is off: Validator checks times with kube's leeway and
// messages).

func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.Expiry, nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt, nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore, nil }
func (c *claims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *claims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return c.Audience, nil }
