package serviceaccount

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/corekube/corekube/auth/user"
	"github.com/golang-jwt/jwt/v5"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Issuer signs ServiceAccount tokens (RS256) as kube-apiserver's
// --service-account-signing-key-file and first --service-account-issuer.
type Issuer struct {
	iss string
	key *rsa.PrivateKey
	kid string
	now func() time.Time
}

// NewIssuer returns an Issuer that signs with key as iss.
func NewIssuer(iss string, key *rsa.PrivateKey) (*Issuer, error) {
	if iss == "" {
		return nil, errors.New("service account issuer: empty issuer")
	}
	if key == nil {
		return nil, errors.New("service account issuer: no signing key")
	}
	kid, err := KeyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Issuer{iss: iss, key: key, kid: kid, now: time.Now}, nil
}

// PublicKey is the public half of the signing key.
func (i *Issuer) PublicKey() *rsa.PublicKey { return &i.key.PublicKey }

// Token is what a TokenRequest asks to be signed.
type Token struct {
	ServiceAccount *v1.ServiceAccount
	// Pod, when set, binds the token to the pod: it is valid only while
	// the pod (same uid) exists.
	Pod *v1.Pod
	// Node is the pod's node (name, and uid when the node exists), put in
	// the token for information as kube does (ServiceAccountTokenPodNodeInfo);
	// without Pod, it binds the token to the node.
	Node      *v1.Node
	Audiences []string
	// Expiration is the token's lifetime from now.
	Expiration time.Duration
	// WarnAfter, when set, is when a token whose life kube extended
	// (--service-account-extend-token-expiration) should have expired.
	WarnAfter time.Duration
}

// Issue signs t and returns the JWT.
func (i *Issuer) Issue(t Token) (string, error) {
	sa := t.ServiceAccount
	if sa == nil {
		return "", errors.New("issue service account token: no ServiceAccount")
	}
	now := jwt.NewNumericDate(i.now())
	c := &claims{
		Audience:  jwt.ClaimStrings(t.Audiences),
		Expiry:    jwt.NewNumericDate(now.Add(t.Expiration)),
		IssuedAt:  now,
		Issuer:    i.iss,
		ID:        string(uuid.NewUUID()),
		NotBefore: now,
		Subject:   user.ServiceAccountUsernamePrefix + sa.Namespace + ":" + sa.Name,
		Kubernetes: &kubeClaims{
			Namespace:      sa.Namespace,
			ServiceAccount: ref{Name: sa.Name, UID: string(sa.UID)},
		},
	}
	if t.Pod != nil {
		c.Kubernetes.Pod = &ref{Name: t.Pod.Name, UID: string(t.Pod.UID)}
	}
	if t.Node != nil {
		c.Kubernetes.Node = &ref{Name: t.Node.Name, UID: string(t.Node.UID)}
	}
	if t.WarnAfter > 0 {
		c.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(t.WarnAfter))
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	// kube's header is alg and kid, no typ.
	tok.Header = map[string]any{"alg": jwt.SigningMethodRS256.Alg(), "kid": i.kid}
	signed, err := tok.SignedString(i.key)
	if err != nil {
		return "", fmt.Errorf("sign service account token: %w", err)
	}
	return signed, nil
}
