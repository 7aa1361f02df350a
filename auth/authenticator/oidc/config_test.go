package oidc

import (
	"strings"
	"testing"
)

const validConfig = `apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://issuer.example.com
    audiences: [corekube, other]
    audienceMatchPolicy: MatchAny
    certificateAuthority: ""
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  claimMappings:
    username:
      claim: sub
      prefix: "oidc:"
    groups:
      claim: groups
      prefix: ""
    uid:
      claim: uid
`

func TestLoadConfig(t *testing.T) {
	cfg, err := LoadConfig([]byte(validConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.JWT[0]
	if j.Issuer.URL != "https://issuer.example.com" || len(j.Issuer.Audiences) != 2 ||
		j.ClaimMappings.Username.Claim != "sub" || *j.ClaimMappings.Username.Prefix != "oidc:" ||
		*j.ClaimMappings.Groups.Prefix != "" || j.ClaimMappings.UID.Claim != "uid" ||
		j.ClaimValidationRules[0].RequiredValue != "example.com" {
		t.Errorf("loaded %+v", j)
	}
	for _, v := range []string{"v1alpha1", "v1"} {
		if _, err := LoadConfig([]byte(strings.Replace(validConfig, "v1beta1", v, 1)), nil); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	json := `{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"AuthenticationConfiguration",
	  "jwt":[{"issuer":{"url":"https://a.example","audiences":["x"]},"claimMappings":{"username":{"claim":"email","prefix":""}}}]}`
	if _, err := LoadConfig([]byte(json), nil); err != nil {
		t.Errorf("json: %v", err)
	}
	empty := "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\n"
	if cfg, err := LoadConfig([]byte(empty), nil); err != nil || len(cfg.JWT) != 0 {
		t.Errorf("no issuers: %v, %v", cfg, err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown field", "    audiences:", "    audience: x\n    audiences:", `unknown field "jwt[0].issuer.audience"`},
		{"case-sensitive", "    url:", "    URL:", `unknown field "jwt[0].issuer.URL"`},
		{"duplicate field", "    uid:\n      claim: uid\n", "    uid:\n      claim: uid\n      claim: sub\n", `"claim" already set in map`},
		{"wrong kind", "kind: AuthenticationConfiguration", "kind: AuthorizationConfiguration", `kind "AuthorizationConfiguration": want AuthenticationConfiguration`},
		{"no kind", "kind: AuthenticationConfiguration\n", "", "kind is missing"},
		{"wrong version", "config.k8s.io/v1beta1", "config.k8s.io/v2", `apiVersion "apiserver.config.k8s.io/v2"`},
		{"http issuer", "url: https://issuer", "url: http://issuer", "jwt[0].issuer.url: Invalid value: \"http://issuer.example.com\": URL scheme must be https"},
		{"query", "url: https://issuer.example.com", "url: https://issuer.example.com?x=1", "URL must not contain a query"},
		{"no audiences", "audiences: [corekube, other]", "audiences: []", "jwt[0].issuer.audiences: Required value"},
		{"duplicate audience", "[corekube, other]", "[corekube, corekube]", "jwt[0].issuer.audiences[1]: Duplicate value"},
		{"policy", "    audienceMatchPolicy: MatchAny\n", "", "audienceMatchPolicy must be MatchAny for multiple audiences"},
		{"username prefix", "      claim: sub\n      prefix: \"oidc:\"\n", "      claim: sub\n", "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set"},
		{"groups prefix", "      claim: groups\n      prefix: \"\"\n", "      claim: groups\n", "jwt[0].claimMappings.groups.prefix: Required value"},
		{"no username", "      claim: sub\n      prefix: \"oidc:\"\n", "      prefix: \"oidc:\"\n", "jwt[0].claimMappings.username: Required value: claim or expression is required"},
		{"username CEL", "      claim: sub\n      prefix: \"oidc:\"\n", "      expression: claims.sub\n", "jwt[0].claimMappings.username.expression: Invalid value: \"claims.sub\": CEL expressions are not supported"},
		{"rule CEL", "  - claim: hd\n    requiredValue: example.com\n", "  - expression: claims.hd == 'x'\n", "jwt[0].claimValidationRules[0].expression: Invalid value"},
		{"rule both", "    requiredValue: example.com\n", "    expression: x\n", "claim and expression can't both be set"},
		{"rule message", "    requiredValue: example.com\n", "    message: nope\n", "may not be specified when claim is set"},
		{"extra CEL", "    uid:\n", "    extra:\n    - key: example.com/x\n      valueExpression: claims.x\n    uid:\n", "jwt[0].claimMappings.extra[0].valueExpression"},
		{"user rules", "  claimMappings:", "  userValidationRules:\n  - expression: \"true\"\n  claimMappings:", "jwt[0].userValidationRules[0].expression"},
		{"bad CA", `certificateAuthority: ""`, `certificateAuthority: "not a PEM"`, "jwt[0].issuer.certificateAuthority: Invalid value: \"<omitted>\": data does not contain any valid RSA or ECDSA certificates"},
		{"discoveryURL", "    audiences:", "    discoveryURL: https://issuer.example.com/\n    audiences:", "discoveryURL must be different from URL"},
		{"anonymous", "jwt:\n", "anonymous:\n  enabled: true\njwt:\n", "anonymous: Forbidden: not supported by corekube; use --anonymous-auth"},
		{"egress", "    audiences:", "    egressSelectorType: cluster\n    audiences:", "egress selectors are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(validConfig, tc.old, tc.new, 1)
			if text == validConfig {
				t.Fatalf("%q not in the config", tc.old)
			}
			_, err := LoadConfig([]byte(text), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := LoadConfig([]byte(" \n"), nil); err == nil || err.Error() != "empty config data" {
		t.Errorf("empty: %v", err)
	}
	if _, err := LoadConfig([]byte(validConfig), []string{"https://issuer.example.com"}); err == nil || !strings.Contains(err.Error(), "URL must not overlap with disallowed issuers") {
		t.Errorf("disallowed issuer: %v", err)
	}
	dup := validConfig + strings.SplitN(validConfig, "jwt:\n", 2)[1]
	if _, err := LoadConfig([]byte(dup), nil); err == nil || !strings.Contains(err.Error(), "jwt[1].issuer.url: Duplicate value") {
		t.Errorf("duplicate issuer: %v", err)
	}
}
