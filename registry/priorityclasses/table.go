package priorityclasses

import (
	"fmt"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// TableColumns are kube's priorityclass columns (PreemptionPolicy after
// Age, as kube has them).
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		{Name: "Value", Type: "integer", Description: doc["value"]},
		{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
		registry.AgeColumn(),
		registry.StringColumn("PreemptionPolicy", doc["preemptionPolicy"]),
	}
}

// TableRow prints a class as kube's printPriorityClass does.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	pc, ok := obj.(*schedulingv1.PriorityClass)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a PriorityClass, got %T", obj)
	}
	policy := ""
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return metav1.TableRow{Cells: []any{
		pc.Name, int64(pc.Value), pc.GlobalDefault, registry.TableAge(pc.CreationTimestamp, now), policy,
	}}, nil
}
