package serviceaccount

import (
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/corekube/corekube/auth/user"
	"github.com/golang-jwt/jwt/v5"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Issuer signs ServiceAccount tokens as kube-apiserver's
// --service-account-signing-key-file and first --service-account-issuer:
// RS256 with an RSA key, ES256/ES384/ES512 with an ECDSA one.
type Issuer struct {
	iss    string
	key    crypto.Signer
	method jwt.SigningMethod
	kid    string
	now    func() time.Time
}

// NewIssuer returns an Issuer that signs with key (an *rsa.PrivateKey or
// an *ecdsa.PrivateKey on P-256, P-384 or P-521) as iss.
func NewIssuer(iss string, key crypto.Signer) (*Issuer, error) {
	if iss == "" {
		return nil, errors.New("service account issuer: empty issuer")
	}
	if key == nil {
		return nil, errors.New("service account issuer: no signing key")
	}
	method := signingMethod(key.Public())
	if method == nil {
		return nil, fmt.Errorf("service account issuer: a %T cannot sign tokens (RSA or ECDSA P-256, P-384, P-521)", key)
	}
	kid, err := KeyID(key.Public())
	if err != nil {
		return nil, err
	}
	return &Issuer{iss: iss, key: key, method: method, kid: kid, now: time.Now}, nil
}

// PublicKey is the public half of the signing key.
func (i *Issuer) PublicKey() crypto.PublicKey { return i.key.Public() }

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
	tok := jwt.NewWithClaims(i.method, c)
	// kube's header is alg and kid, no typ.
	tok.Header = map[string]any{"alg": i.method.Alg(), "kid": i.kid}
	signed, err := tok.SignedString(i.key)
	if err != nil {
		return "", fmt.Errorf("sign service account token: %w", err)
	}
	return signed, nil
}
