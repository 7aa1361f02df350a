package flowcontrol

import (
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var (
	_ registry.TableConvertor = (*FlowSchemaStrategy)(nil)
	_ registry.TableConvertor = (*PriorityLevelStrategy)(nil)
)

// TableColumns are kube's FlowSchema columns.
func (*FlowSchemaStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("PriorityLevel", flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]),
		registry.StringColumn("MatchingPrecedence", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]),
		registry.StringColumn("DistinguisherMethod", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]),
		registry.AgeColumn(),
		registry.StringColumn("MissingPL", "references a broken or non-existent PriorityLevelConfiguration"),
	}
}

// TableRow prints a FlowSchema as kube's printFlowSchema: MissingPL is the
// status of the Dangling condition, "?" before there is one.
func (*FlowSchemaStrategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	fs, ok := obj.(*flowcontrolv1.FlowSchema)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a FlowSchema, got %T", obj)
	}
	dm := "<none>"
	if fs.Spec.DistinguisherMethod != nil {
		dm = string(fs.Spec.DistinguisherMethod.Type)
	}
	missing := "?"
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
			break
		}
	}
	return metav1.TableRow{Cells: []any{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence),
		dm, registry.TableAge(fs.CreationTimestamp, now), missing}}, nil
}

// TableColumns are kube's PriorityLevelConfiguration columns.
func (*PriorityLevelStrategy) TableColumns() []metav1.TableColumnDefinition {
	q := flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Type", flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]),
		registry.StringColumn("NominalConcurrencyShares", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]),
		registry.StringColumn("Queues", q["queues"]),
		registry.StringColumn("HandSize", q["handSize"]),
		registry.StringColumn("QueueLengthLimit", q["queueLengthLimit"]),
		registry.AgeColumn(),
	}
}

// TableRow prints a PriorityLevelConfiguration as kube's
// printPriorityLevelConfiguration: "<none>" where the level has no such
// setting.
func (*PriorityLevelStrategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	pl, ok := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a PriorityLevelConfiguration, got %T", obj)
	}
	var ncs, queues, handSize, qll any = "<none>", "<none>", "<none>", "<none>"
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares != nil {
			ncs = int64(*l.NominalConcurrencyShares)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			queues, handSize, qll = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
		}
	}
	return metav1.TableRow{Cells: []any{pl.Name, string(pl.Spec.Type), ncs, queues, handSize, qll, registry.TableAge(pl.CreationTimestamp, now)}}, nil
}
