package rbac

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

// strategyBase is what the role and the binding strategies share, as
// kube's four RBAC strategies do: PUT creates a missing object, and a name
// is any path segment.
type strategyBase struct{ registry.Base }

// newStrategyBase returns the base of a kind described by info (as kube's
// discovery has it: no short names) whose objects and lists newObject and
// newList make.
func newStrategyBase(info registry.ResourceInfo, newObject, newList func() runtime.Object) strategyBase {
	return strategyBase{registry.Base{
		Resource:       info,
		NewObject:      newObject,
		NewListObject:  newList,
		CreateOnUpdate: true,
	}}
}

// ValidateName accepts any path segment, as kube's ValidateRBACName.
func (*strategyBase) ValidateName(name string, prefix bool) []string {
	return ValidateName(name, prefix)
}
