// Package serviceaccounts is the registry strategy of core/v1
// ServiceAccounts as kube-apiserver v1.32 has it
// (pkg/registry/core/serviceaccount): object metadata is all kube
// validates; secret references keep only their names.
package serviceaccounts

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Strategy is the strategy of the serviceaccounts resource.
type Strategy struct{ registry.Base }

var (
	_ registry.Strategy       = (*Strategy)(nil)
	_ registry.TableConvertor = (*Strategy)(nil)
)

// NewStrategy returns the serviceaccounts strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes serviceaccounts as kube's discovery does.
		Resource: registry.ResourceInfo{
			Version:    "v1",
			Resource:   "serviceaccounts",
			Singular:   "serviceaccount",
			Kind:       "ServiceAccount",
			ListKind:   "ServiceAccountList",
			Namespaced: true,
			ShortNames: []string{"sa"},
		},
		NewObject:     func() runtime.Object { return &v1.ServiceAccount{} },
		NewListObject: func() runtime.Object { return &v1.ServiceAccountList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// PrepareForCreate keeps only the names of secret references, as kube.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	cleanSecretReferences(obj.(*v1.ServiceAccount))
}

// PrepareForUpdate keeps only the names of secret references, as kube.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	cleanSecretReferences(obj.(*v1.ServiceAccount))
}

// cleanSecretReferences drops everything but the name of each secret
// reference: a ServiceAccount's secrets are in its own namespace, and the
// other fields would only mislead.
func cleanSecretReferences(sa *v1.ServiceAccount) {
	for i, s := range sa.Secrets {
		sa.Secrets[i] = v1.ObjectReference{Name: s.Name}
	}
}

// Validate has nothing to check beyond the metadata the Store validates.
func (*Strategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

// ValidateUpdate has nothing to check beyond the metadata.
func (*Strategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}

// TableColumns are kube's ServiceAccount columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		// A count typed "string", as kube's printer declares it.
		registry.StringColumn("Secrets", v1.ServiceAccount{}.SwaggerDoc()["secrets"]),
		registry.AgeColumn(),
	}
}

// TableRow prints a ServiceAccount as kube's printServiceAccount does: the
// number of its secrets.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	sa, ok := obj.(*v1.ServiceAccount)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a ServiceAccount, got %T", obj)
	}
	return metav1.TableRow{Cells: []any{sa.Name, int64(len(sa.Secrets)), registry.TableAge(sa.CreationTimestamp, now)}}, nil
}
