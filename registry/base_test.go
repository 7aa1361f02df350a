package registry_test

import (
	"context"
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

func TestBaseDefaults(t *testing.T) {
	namespaced := &registry.Base{
		Resource:       registry.ResourceInfo{Version: "v1", Resource: "leases", Kind: "Lease", Namespaced: true},
		NewObject:      func() runtime.Object { return &coordinationv1.Lease{} },
		NewListObject:  func() runtime.Object { return &coordinationv1.LeaseList{} },
		CreateOnUpdate: true,
	}
	cluster := &registry.Base{
		Resource:      registry.ResourceInfo{Version: "v1", Resource: "nodes", Kind: "Node"},
		NewObject:     func() runtime.Object { return &v1.Node{} },
		NewListObject: func() runtime.Object { return &v1.NodeList{} },
	}
	if _, ok := namespaced.New().(*coordinationv1.Lease); !ok {
		t.Errorf("New: %T", namespaced.New())
	}
	if _, ok := namespaced.NewList().(*coordinationv1.LeaseList); !ok {
		t.Errorf("NewList: %T", namespaced.NewList())
	}
	if namespaced.Info().Resource != "leases" || !namespaced.AllowCreateOnUpdate() || cluster.AllowCreateOnUpdate() {
		t.Errorf("info %+v, create on update %v/%v", namespaced.Info(), namespaced.AllowCreateOnUpdate(), cluster.AllowCreateOnUpdate())
	}

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns", Labels: map[string]string{"a": "b"}}}
	before := lease.DeepCopy()
	namespaced.PrepareForCreate(context.Background(), lease)
	namespaced.PrepareForUpdate(context.Background(), lease, before)
	if !reflect.DeepEqual(lease, before) {
		t.Errorf("Prepare changed the object: %+v", lease)
	}
	for i := 0; i < 2; i++ { // the second call uses the type found by the first
		l, f, err := namespaced.GetAttrs(lease)
		if err != nil || l["a"] != "b" || !reflect.DeepEqual(f, fields.Set{"metadata.name": "l", "metadata.namespace": "ns"}) {
			t.Errorf("namespaced attrs %v %v %v", l, f, err)
		}
	}
	if _, f, err := cluster.GetAttrs(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}); err != nil || !reflect.DeepEqual(f, fields.Set{"metadata.name": "n"}) {
		t.Errorf("cluster attrs %v %v", f, err)
	}
	if _, _, err := namespaced.GetAttrs(&v1.Pod{}); err == nil {
		t.Error("GetAttrs took an object of another type")
	}
	if _, _, err := cluster.GetAttrs(lease); err == nil {
		t.Error("cluster GetAttrs took an object of another type")
	}
}
