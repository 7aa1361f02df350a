package poddisruptionbudgets

import (
	"fmt"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// TableColumns are kube's poddisruptionbudget columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Min Available", "The minimum number of pods that must be available."),
		registry.StringColumn("Max Unavailable", "The maximum number of pods that may be unavailable."),
		{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
		registry.AgeColumn(),
	}
}

// TableRow prints a PodDisruptionBudget as kube's printPodDisruptionBudget
// does: "N/A" for the unset one of minAvailable and maxUnavailable.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a PodDisruptionBudget, got %T", obj)
	}
	minAvailable, maxUnavailable := "N/A", "N/A"
	if pdb.Spec.MinAvailable != nil {
		minAvailable = pdb.Spec.MinAvailable.String()
	}
	if pdb.Spec.MaxUnavailable != nil {
		maxUnavailable = pdb.Spec.MaxUnavailable.String()
	}
	return metav1.TableRow{Cells: []any{
		pdb.Name, minAvailable, maxUnavailable, int64(pdb.Status.DisruptionsAllowed), registry.TableAge(pdb.CreationTimestamp, now),
	}}, nil
}
