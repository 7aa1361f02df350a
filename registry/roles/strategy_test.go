package roles

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestStrategy pins what roles share with the other RBAC strategies (PUT
// creates, any path segment is a name, namespaced info) and what is their
// own: no non-resource URLs, on create and on update alike.
func TestStrategy(t *testing.T) {
	s := NewStrategy()
	ctx := context.Background()
	if !s.AllowCreateOnUpdate() {
		t.Error("PUT of a missing role does not create it")
	}
	if errs := s.ValidateName("system:controller:x", false); len(errs) != 0 {
		t.Errorf("ValidateName of a path segment: %v", errs)
	}
	if errs := s.ValidateName("a/b", false); len(errs) == 0 {
		t.Error("ValidateName accepted a name with a slash")
	}
	if info := s.Info(); !info.Namespaced || info.Kind != "Role" || info.Group != rbacv1.GroupName {
		t.Errorf("info %+v", info)
	}
	if _, ok := s.New().(*rbacv1.Role); !ok {
		t.Errorf("New() = %T", s.New())
	}

	good := &rbacv1.Role{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	if errs := s.Validate(ctx, good); len(errs) != 0 {
		t.Errorf("Validate(good) = %v", errs)
	}
	urls := &rbacv1.Role{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}
	for name, errs := range map[string][]error{
		"create": s.Validate(ctx, urls).ToAggregate().Errors(),
		"update": s.ValidateUpdate(ctx, urls, good).ToAggregate().Errors(),
	} {
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "rules[0].nonResourceURLs") {
			t.Errorf("%s with nonResourceURLs: %v, want one error on rules[0].nonResourceURLs", name, errs)
		}
	}
}
