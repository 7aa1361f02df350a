package events

import (
	"github.com/corekube/corekube/registry"
	"k8s.io/apimachinery/pkg/api/validation/path"
)

var _ registry.NameValidationStrategy = (*Strategy)(nil)

// ValidateName: kube checks core/v1 event names only as path segments
// (generated event names like "pod.17a2b3c4d5e6f7a8" must pass).
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return path.IsValidPathSegmentName(name)
}
