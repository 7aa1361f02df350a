package poddisruptionbudgets

import (
	"github.com/corekube/corekube/registry"
	"k8s.io/apimachinery/pkg/api/validation/path"
)

var _ registry.NameValidationStrategy = (*Strategy)(nil)

// ValidateName: kube checks PodDisruptionBudget names only as path
// segments.
func (*Strategy) ValidateName(name string, prefix bool) []string {
	return path.IsValidPathSegmentName(name)
}
