package registry_test

import (
	"context"
	"testing"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
)

// TestFieldsCreateAsKube: the entry the Store records for a create is the
// one kube's field manager records for the same object when built the way
// kube-apiserver builds it (the scheme as converter, creater and
// defaulter, the pod strategy's reset fields), not with the Store's own
// one-version stand-ins.
func TestFieldsCreateAsKube(t *testing.T) {
	tc, err := podTypes()
	if err != nil {
		t.Fatal(err)
	}
	gvk := v1.SchemeGroupVersion.WithKind("Pod")
	reset := map[fieldpath.APIVersion]fieldpath.Filter{}
	for v, set := range pods.NewStrategy().GetResetFields() {
		reset[v] = fieldpath.NewExcludeSetFilter(set)
	}
	kube, err := managedfields.NewDefaultFieldManager(tc, scheme.Scheme, scheme.Scheme, scheme.Scheme, gvk, gvk.GroupVersion(), "", reset)
	if err != nil {
		t.Fatal(err)
	}
	store, _ := newPodStores(newTestStorage(t), true, registry.Options{})
	for name, pod := range map[string]*v1.Pod{
		"minimal": {ObjectMeta: metav1.ObjectMeta{Name: "minimal"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}},
		"rich": {
			ObjectMeta: metav1.ObjectMeta{Name: "rich", Labels: map[string]string{"app": "a", "tier": "b"}, Annotations: map[string]string{"x": "y"},
				Finalizers: []string{"f/1"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "u1"}}},
			Spec: v1.PodSpec{
				Containers: []v1.Container{
					{Name: "app", Image: "app:1", Ports: []v1.ContainerPort{{ContainerPort: 80}, {Name: "m", ContainerPort: 9090, Protocol: v1.ProtocolUDP}},
						Env:       []v1.EnvVar{{Name: "A", Value: "1"}},
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}}},
					{Name: "side", Image: "side:1", Args: []string{"--x"}},
				},
				NodeSelector: map[string]string{"zone": "a"},
				Tolerations:  []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
			},
			// A client's status on create is reset: never owned.
			Status: v1.PodStatus{Phase: v1.PodRunning},
		},
		"reset list": {ObjectMeta: metav1.ObjectMeta{Name: "reset", ManagedFields: []metav1.ManagedFieldsEntry{}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			want := kube.UpdateNoErrors(&v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}, defaulted(pod), "creator")
			got, err := store.Create(context.Background(), "ns", pod.DeepCopy(), registry.CreateOptions{FieldManager: "creator"})
			if err != nil {
				t.Fatal(err)
			}
			w, g := entriesOf(t, mustManaged(t, want)), entriesOf(t, mustManaged(t, got))
			if len(w) != 1 || len(g) != 1 || w[0].untimed().String() != g[0].untimed().String() {
				t.Errorf("kube's field manager: %v\nthe Store:           %v", w, g)
			}
		})
	}
}

// defaulted is pod as the Store sees it when it records managedFields:
// with the scheme defaults, in namespace ns.
func defaulted(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Namespace = "ns"
	pods.NewStrategy().Default(p)
	return p
}

func mustManaged(t *testing.T, obj any) []metav1.ManagedFieldsEntry {
	t.Helper()
	switch o := obj.(type) {
	case *v1.Pod:
		return o.ManagedFields
	case interface {
		GetManagedFields() []metav1.ManagedFieldsEntry
	}:
		return o.GetManagedFields()
	}
	t.Fatalf("no managedFields in %T", obj)
	return nil
}
