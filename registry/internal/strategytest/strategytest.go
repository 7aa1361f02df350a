// Package strategytest holds what the registry strategies' tests share to
// check validation: errors compared by type and field, and one object
// checked both on create and on update, which every strategy with nothing
// immutable must answer alike. It is for tests only.
package strategytest

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ErrKeys lists errs as "<type> <field>" (FieldValueInvalid spec.x), the
// form the tests compare: it pins which rule fired where without the
// message.
func ErrKeys(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

// Validator is the validation half of a registry strategy.
type Validator interface {
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// ExpectBoth checks that s.Validate(created) and s.ValidateUpdate(updated,
// old) both find exactly want, in ErrKeys' form; nil wants none.
func ExpectBoth(t *testing.T, s Validator, created, updated, old runtime.Object, want []string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	ctx := context.Background()
	if got := ErrKeys(s.Validate(ctx, created)); !reflect.DeepEqual(got, want) {
		t.Errorf("create: got %v, want %v", got, want)
	}
	if got := ErrKeys(s.ValidateUpdate(ctx, updated, old)); !reflect.DeepEqual(got, want) {
		t.Errorf("update: got %v, want %v", got, want)
	}
}
