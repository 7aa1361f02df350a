package leases

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// TableColumns are kube's lease columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Holder", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
		registry.AgeColumn(),
	}
}

// TableRow prints a lease as kube's printLease does.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a Lease, got %T", obj)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	return metav1.TableRow{Cells: []any{lease.Name, holder, registry.TableAge(lease.CreationTimestamp, now)}}, nil
}
