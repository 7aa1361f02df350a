package sharedinformers

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Pod is what the factory's pod informer stores of a pod: the fields the
// controllers sharing it read, at v1.Pod's paths (pod.Spec.NodeName,
// pod.Status.Phase, ...), so that their code reads alike. A v1.Pod is 1,120
// bytes before any of its contents, almost all of it the spec's fields
// that no controller here reads; a Pod is 328. The metadata is whole
// (metav1.Object for the garbage collector, keys and event references),
// with only the fields listed in Transform set.
//
// Cached Pods are shared and read-only. The factory's pod lister
// (informers' Core().V1().Pods().Lister()) does not work on them: read
// them through PodsOf.
type Pod struct {
	metav1.ObjectMeta
	Spec   PodSpec
	Status PodStatus
}

// PodSpec is what is kept of a pod's spec.
type PodSpec struct {
	NodeName    string
	Tolerations []v1.Toleration
}

// PodStatus is what is kept of a pod's status.
type PodStatus struct {
	Phase      v1.PodPhase
	Reason     string
	Conditions []v1.PodCondition
}

// GetObjectKind is runtime.Object's: a Pod carries no type metadata.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is runtime.Object's.
func (p *Pod) DeepCopyObject() runtime.Object {
	if p == nil {
		return nil
	}
	out := &Pod{Spec: PodSpec{NodeName: p.Spec.NodeName}, Status: PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason}}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if p.Spec.Tolerations != nil {
		out.Spec.Tolerations = make([]v1.Toleration, len(p.Spec.Tolerations))
		for i := range p.Spec.Tolerations {
			p.Spec.Tolerations[i].DeepCopyInto(&out.Spec.Tolerations[i])
		}
	}
	if p.Status.Conditions != nil {
		out.Status.Conditions = make([]v1.PodCondition, len(p.Status.Conditions))
		for i := range p.Status.Conditions {
			p.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	return out
}

// Condition returns the pod's condition of type t, nil if it has none.
func (p *Pod) Condition(t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// PodLister reads the pods of a factory's pod informer.
type PodLister struct{ indexer cache.Indexer }

// PodsOf returns the pod informer of factory (a shared one, registered
// with the factory) and a lister of what it stores.
func PodsOf(factory informers.SharedInformerFactory) (cache.SharedIndexInformer, PodLister) {
	informer := factory.Core().V1().Pods().Informer()
	return informer, PodLister{indexer: informer.GetIndexer()}
}

// List returns the pods of every namespace whose labels selector matches.
func (l PodLister) List(selector labels.Selector) []*Pod {
	return matching(l.indexer.List(), selector)
}

// ListNamespace returns the pods of namespace whose labels selector
// matches.
func (l PodLister) ListNamespace(namespace string, selector labels.Selector) []*Pod {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		// No namespace index: the factory's informers always have one.
		return nil
	}
	return matching(objs, selector)
}

// ByIndex returns the pods whose index (one a controller added to the
// informer) has value; none if there is no such index.
func (l PodLister) ByIndex(index, value string) []*Pod {
	objs, err := l.indexer.ByIndex(index, value)
	if err != nil {
		return nil
	}
	return matching(objs, nil)
}

// Get returns the pod namespace/name, and whether it is cached.
func (l PodLister) Get(namespace, name string) (*Pod, bool) {
	return l.GetByKey(namespace + "/" + name)
}

// GetByKey returns the pod of a cache key (namespace/name), and whether
// it is cached.
func (l PodLister) GetByKey(key string) (*Pod, bool) {
	obj, exists, err := l.indexer.GetByKey(key)
	if err != nil || !exists {
		return nil, false
	}
	pod, ok := obj.(*Pod)
	return pod, ok
}

func matching(objs []any, selector labels.Selector) []*Pod {
	everything := selector == nil || selector.Empty()
	out := make([]*Pod, 0, len(objs))
	for _, obj := range objs {
		pod, ok := obj.(*Pod)
		if ok && (everything || selector.Matches(labels.Set(pod.Labels))) {
			out = append(out, pod)
		}
	}
	return out
}
