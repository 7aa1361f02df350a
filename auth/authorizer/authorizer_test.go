package authorizer

import (
	"context"
	"errors"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/corekube/corekube/auth/user"
)

func TestRuleResolvers(t *testing.T) {
	get := RuleResolverFunc(func(_ context.Context, u *user.Info, ns string) ([]rbacv1.PolicyRule, bool, error) {
		return []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}, ResourceNames: []string{u.Name + "@" + ns}}}, false, nil
	})
	broken := RuleResolverFunc(func(context.Context, *user.Info, string) ([]rbacv1.PolicyRule, bool, error) {
		return nil, true, errors.New("cannot enumerate")
	})
	rules, incomplete, err := RuleResolvers{get, broken, AlwaysAllowRules}.RulesFor(context.Background(), &user.Info{Name: "u"}, "ns")
	if len(rules) != 3 || rules[0].ResourceNames[0] != "u@ns" || rules[1].Resources[0] != "*" || rules[2].NonResourceURLs[0] != "*" {
		t.Errorf("rules %+v", rules)
	}
	if !incomplete || err == nil || err.Error() != "cannot enumerate" {
		t.Errorf("incomplete %v, err %v", incomplete, err)
	}
	rules, incomplete, err = RuleResolvers{}.RulesFor(context.Background(), &user.Info{}, "ns")
	if rules != nil || incomplete || err != nil {
		t.Errorf("no resolvers: %v %v %v", rules, incomplete, err)
	}
}
