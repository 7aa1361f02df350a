package oidc

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The group and kind of kube's structured authentication configuration.
const (
	ConfigGroup = "apiserver.config.k8s.io"
	ConfigKind  = "AuthenticationConfiguration"
)

// configVersions are the versions of AuthenticationConfiguration accepted:
// they share the shape read here.
var configVersions = []string{"v1alpha1", "v1beta1", "v1"}

// maxIssuers is kube's limit on jwt authenticators.
const maxIssuers = 64

// AuthenticationConfiguration is kube's structured authentication
// configuration (--authentication-config): the JWT issuers.
type AuthenticationConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	JWT             []JWTAuthenticator `json:"jwt"`
	// Anonymous is read only to be refused with a clear error:
	// corekube configures anonymous requests with --anonymous-auth.
	Anonymous *AnonymousAuthConfig `json:"anonymous,omitempty"`
}

// AnonymousAuthConfig is kube's anonymous stanza (not supported).
type AnonymousAuthConfig struct {
	Enabled    bool `json:"enabled"`
	Conditions []struct {
		Path string `json:"path"`
	} `json:"conditions,omitempty"`
}

// JWTAuthenticator is one issuer's configuration.
type JWTAuthenticator struct {
	Issuer               Issuer                `json:"issuer"`
	ClaimValidationRules []ClaimValidationRule `json:"claimValidationRules,omitempty"`
	ClaimMappings        ClaimMappings         `json:"claimMappings"`
	// UserValidationRules are CEL-only: refused at load.
	UserValidationRules []UserValidationRule `json:"userValidationRules,omitempty"`
}

// Issuer is where an issuer's tokens come from and whom they must be for.
type Issuer struct {
	// URL must equal the tokens' iss claim and the discovery document's
	// issuer.
	URL string `json:"url"`
	// DiscoveryURL, when set, is fetched instead of
	// URL/.well-known/openid-configuration.
	DiscoveryURL string `json:"discoveryURL,omitempty"`
	// CertificateAuthority is the PEM the issuer's TLS certificates are
	// checked against (empty: the system's roots).
	CertificateAuthority string   `json:"certificateAuthority,omitempty"`
	Audiences            []string `json:"audiences"`
	AudienceMatchPolicy  string   `json:"audienceMatchPolicy,omitempty"`
	// EgressSelectorType is refused: there is no egress selector here.
	EgressSelectorType string `json:"egressSelectorType,omitempty"`
}

// AudienceMatchPolicyMatchAny accepts a token whose aud holds any of the
// configured audiences (kube's only policy).
const AudienceMatchPolicyMatchAny = "MatchAny"

// ClaimValidationRule requires a string claim of a given value (or a CEL
// expression, refused at load).
type ClaimValidationRule struct {
	Claim         string `json:"claim,omitempty"`
	RequiredValue string `json:"requiredValue,omitempty"`
	Expression    string `json:"expression,omitempty"`
	Message       string `json:"message,omitempty"`
}

// ClaimMappings says which claims are the user's attributes.
type ClaimMappings struct {
	Username PrefixedClaimOrExpression `json:"username"`
	Groups   PrefixedClaimOrExpression `json:"groups,omitempty"`
	UID      ClaimOrExpression         `json:"uid"`
	// Extra is CEL-only: refused at load.
	Extra []ExtraMapping `json:"extra,omitempty"`
}

// PrefixedClaimOrExpression is a claim whose values get Prefix (which
// must be set, possibly empty, when Claim is), or a CEL expression
// (refused at load).
type PrefixedClaimOrExpression struct {
	Claim      string  `json:"claim,omitempty"`
	Prefix     *string `json:"prefix,omitempty"`
	Expression string  `json:"expression,omitempty"`
}

// ClaimOrExpression is a claim, or a CEL expression (refused at load).
type ClaimOrExpression struct {
	Claim      string `json:"claim,omitempty"`
	Expression string `json:"expression,omitempty"`
}

// ExtraMapping is a CEL mapping to a user's extra (refused at load).
type ExtraMapping struct {
	Key             string `json:"key"`
	ValueExpression string `json:"valueExpression"`
}

// UserValidationRule is a CEL rule on the user (refused at load).
type UserValidationRule struct {
	Expression string `json:"expression"`
	Message    string `json:"message,omitempty"`
}

// LoadConfig reads and validates an AuthenticationConfiguration in YAML or
// JSON, strictly (unknown and duplicate fields are errors, field names are
// case-sensitive). disallowedIssuers are issuer URLs no jwt authenticator
// may use (kube passes its ServiceAccount issuers).
func LoadConfig(data []byte, disallowedIssuers []string) (*AuthenticationConfiguration, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fmt.Errorf("empty config data")
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var tm metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := checkTypeMeta(tm); err != nil {
		return nil, err
	}
	cfg := &AuthenticationConfiguration{}
	strictErrs, err := sigsjson.UnmarshalStrict(j, cfg)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("strict decoding error: %s", strings.Join(msgs, ", "))
	}
	if err := ValidateConfig(cfg, disallowedIssuers).ToAggregate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func checkTypeMeta(tm metav1.TypeMeta) error {
	if tm.Kind == "" {
		return fmt.Errorf("kind is missing: want %s", ConfigKind)
	}
	if tm.Kind != ConfigKind {
		return fmt.Errorf("kind %q: want %s", tm.Kind, ConfigKind)
	}
	group, version, _ := strings.Cut(tm.APIVersion, "/")
	for _, v := range configVersions {
		if group == ConfigGroup && version == v {
			return nil
		}
	}
	return fmt.Errorf("apiVersion %q: want %s/v1beta1 (or v1alpha1, v1)", tm.APIVersion, ConfigGroup)
}

// celUnsupported is the detail of every refused CEL field.
const celUnsupported = "CEL expressions are not supported by corekube; use claim (and requiredValue)"

// ValidateConfig checks cfg as kube's validation does, and refuses what
// corekube does not implement (CEL, egress selectors, the anonymous
// stanza) instead of ignoring it.
func ValidateConfig(cfg *AuthenticationConfiguration, disallowedIssuers []string) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("jwt")
	if len(cfg.JWT) > maxIssuers {
		return field.ErrorList{field.TooMany(root, len(cfg.JWT), maxIssuers)}
	}
	issuers := map[string]bool{}
	discoveryURLs := map[string]bool{}
	for i, a := range cfg.JWT {
		p := root.Index(i)
		errs = append(errs, validateJWTAuthenticator(a, p, disallowedIssuers)...)
		if issuers[a.Issuer.URL] {
			errs = append(errs, field.Duplicate(p.Child("issuer", "url"), a.Issuer.URL))
		}
		issuers[a.Issuer.URL] = true
		if a.Issuer.DiscoveryURL != "" {
			if discoveryURLs[a.Issuer.DiscoveryURL] {
				errs = append(errs, field.Duplicate(p.Child("issuer", "discoveryURL"), a.Issuer.DiscoveryURL))
			}
			discoveryURLs[a.Issuer.DiscoveryURL] = true
		}
	}
	if cfg.Anonymous != nil {
		errs = append(errs, field.Forbidden(field.NewPath("anonymous"), "not supported by corekube; use --anonymous-auth"))
	}
	return errs
}

func validateJWTAuthenticator(a JWTAuthenticator, p *field.Path, disallowedIssuers []string) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateIssuer(a.Issuer, p.Child("issuer"), disallowedIssuers)...)

	rules := p.Child("claimValidationRules")
	claims := map[string]bool{}
	for i, r := range a.ClaimValidationRules {
		rp := rules.Index(i)
		switch {
		case r.Claim != "" && r.Expression != "":
			errs = append(errs, field.Invalid(rp, r.Claim, "claim and expression can't both be set"))
		case r.Claim == "" && r.Expression == "":
			errs = append(errs, field.Required(rp, "claim or expression is required"))
		case r.Claim != "":
			if r.Message != "" {
				errs = append(errs, field.Invalid(rp.Child("message"), r.Message, "may not be specified when claim is set"))
			}
			if claims[r.Claim] {
				errs = append(errs, field.Duplicate(rp.Child("claim"), r.Claim))
			}
			claims[r.Claim] = true
		default:
			errs = append(errs, field.Invalid(rp.Child("expression"), r.Expression, celUnsupported))
		}
	}

	m := p.Child("claimMappings")
	errs = append(errs, validatePrefixedClaim(a.ClaimMappings.Username, m.Child("username"), true)...)
	errs = append(errs, validatePrefixedClaim(a.ClaimMappings.Groups, m.Child("groups"), false)...)
	uid := a.ClaimMappings.UID
	switch {
	case uid.Claim != "" && uid.Expression != "":
		errs = append(errs, field.Invalid(m.Child("uid"), "", "claim and expression can't both be set"))
	case uid.Expression != "":
		errs = append(errs, field.Invalid(m.Child("uid", "expression"), uid.Expression, celUnsupported))
	}
	for i, e := range a.ClaimMappings.Extra {
		errs = append(errs, field.Invalid(m.Child("extra").Index(i).Child("valueExpression"), e.ValueExpression, celUnsupported))
	}
	for i, r := range a.UserValidationRules {
		errs = append(errs, field.Invalid(p.Child("userValidationRules").Index(i).Child("expression"), r.Expression, celUnsupported))
	}
	return errs
}

func validatePrefixedClaim(c PrefixedClaimOrExpression, p *field.Path, required bool) field.ErrorList {
	switch {
	case c.Claim != "" && c.Expression != "":
		return field.ErrorList{field.Invalid(p, "", "claim and expression can't both be set")}
	case c.Claim == "" && c.Expression == "" && required:
		return field.ErrorList{field.Required(p, "claim or expression is required")}
	case c.Expression != "":
		return field.ErrorList{field.Invalid(p.Child("expression"), c.Expression, celUnsupported)}
	case c.Claim != "" && c.Prefix == nil:
		return field.ErrorList{field.Required(p.Child("prefix"), "prefix is required when claim is set. It can be set to an empty string to disable prefixing")}
	}
	return nil
}

func validateIssuer(is Issuer, p *field.Path, disallowedIssuers []string) field.ErrorList {
	var errs field.ErrorList
	if is.URL == "" {
		errs = append(errs, field.Required(p.Child("url"), ""))
	} else {
		for _, d := range disallowedIssuers {
			if d == is.URL {
				errs = append(errs, field.Invalid(p.Child("url"), is.URL, fmt.Sprintf("URL must not overlap with disallowed issuers: %v", disallowedIssuers)))
			}
		}
		errs = append(errs, validateURL(is.URL, p.Child("url"))...)
	}
	if is.DiscoveryURL != "" {
		if is.URL != "" && strings.TrimRight(is.URL, "/") == strings.TrimRight(is.DiscoveryURL, "/") {
			errs = append(errs, field.Invalid(p.Child("discoveryURL"), is.DiscoveryURL, "discoveryURL must be different from URL"))
		}
		errs = append(errs, validateURL(is.DiscoveryURL, p.Child("discoveryURL"))...)
	}

	auds := p.Child("audiences")
	if len(is.Audiences) == 0 {
		errs = append(errs, field.Required(auds, fmt.Sprintf("at least one %s is required", auds)))
	}
	seen := map[string]bool{}
	for i, a := range is.Audiences {
		if a == "" {
			errs = append(errs, field.Required(auds.Index(i), ""))
		}
		if seen[a] {
			errs = append(errs, field.Duplicate(auds.Index(i), a))
		}
		seen[a] = true
	}
	policy := p.Child("audienceMatchPolicy")
	if len(is.Audiences) > 1 && is.AudienceMatchPolicy != AudienceMatchPolicyMatchAny {
		errs = append(errs, field.Invalid(policy, is.AudienceMatchPolicy, "audienceMatchPolicy must be MatchAny for multiple audiences"))
	}
	if len(is.Audiences) == 1 && is.AudienceMatchPolicy != "" && is.AudienceMatchPolicy != AudienceMatchPolicyMatchAny {
		errs = append(errs, field.Invalid(policy, is.AudienceMatchPolicy, "audienceMatchPolicy must be empty or MatchAny for single audience"))
	}

	if is.CertificateAuthority != "" {
		if _, err := certPool(is.CertificateAuthority); err != nil {
			errs = append(errs, field.Invalid(p.Child("certificateAuthority"), "<omitted>", err.Error()))
		}
	}
	if is.EgressSelectorType != "" {
		errs = append(errs, field.Invalid(p.Child("egressSelectorType"), is.EgressSelectorType, "egress selectors are not supported by corekube"))
	}
	return errs
}

func validateURL(raw string, p *field.Path) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(p, raw, err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, raw, "URL scheme must be https"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, raw, "URL must not contain a username or password"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, raw, "URL must not contain a query"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, raw, "URL must not contain a fragment"))
	}
	return errs
}

// certPool parses PEM certificates; none is an error, as kube's.
func certPool(pemData string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pemData)) {
		return nil, fmt.Errorf("data does not contain any valid RSA or ECDSA certificates")
	}
	return pool, nil
}
