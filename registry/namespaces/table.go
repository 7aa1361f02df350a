package namespaces

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// TableColumns are kube's namespace columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Status", "The status of the namespace"),
		registry.AgeColumn(),
	}
}

// TableRow prints a namespace as kube's printNamespace does.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a Namespace, got %T", obj)
	}
	return metav1.TableRow{Cells: []any{ns.Name, string(ns.Status.Phase), registry.TableAge(ns.CreationTimestamp, now)}}, nil
}
