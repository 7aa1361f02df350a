package sharedinformers

import (
	"fmt"
	"k8s.io/apimachinery/pkg/api/resource"
	"reflect"
	"sort"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/corekube/corekube/test/informertest"
)

func TestTransformPod(t *testing.T) {
	created := metav1.Unix(100, 0)
	deleted := metav1.Unix(200, 0)
	// Of the Ready condition only the type and status are kept.
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, Reason: "r", LastTransitionTime: created}
	keptReady := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	target := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI", LastTransitionTime: created}
	toleration := v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"big": "x"}, CreationTimestamp: created, DeletionTimestamp: &deleted,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}, OwnerReferences: []metav1.OwnerReference{{Name: "o"}},
			Finalizers: []string{"f"},
		},
		Spec: v1.PodSpec{
			NodeName: "n", Tolerations: []v1.Toleration{toleration},
			Containers: []v1.Container{{Name: "c", Image: "nginx"}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodFailed, Reason: "Evicted", Message: "gone", PodIP: "10.0.0.1",
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, ready, target},
		},
	}
	want := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "a"},
			CreationTimestamp: created, DeletionTimestamp: &deleted,
			OwnerReferences: []metav1.OwnerReference{{Name: "o"}}, Finalizers: []string{"f"},
		},
		Spec:   PodSpec{NodeName: "n", Tolerations: []v1.Toleration{toleration}},
		Status: PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Conditions: []v1.PodCondition{keptReady, target}},
	}
	got, err := Transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("Transform(pod) = %+v\nwant %+v", got, want)
	}
	again, err := Transform(got)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(again, want) {
		t.Errorf("Transform is not idempotent: %+v", again)
	}
	// A deep copy is equal and shares nothing.
	cp := got.(*Pod).DeepCopyObject().(*Pod)
	if !apiequality.Semantic.DeepEqual(cp, want) {
		t.Errorf("DeepCopyObject = %+v\nwant %+v", cp, want)
	}
	cp.Labels["app"] = "changed"
	cp.Spec.Tolerations[0].Key = "changed"
	cp.Status.Conditions[1].Reason = "changed"
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("changing the deep copy changed the original: %+v", got)
	}
	if c := got.(*Pod).Condition(v1.DisruptionTarget); c == nil || c.Reason != "EvictionByEvictionAPI" {
		t.Errorf("Condition(DisruptionTarget) = %+v", c)
	}
	if c := got.(*Pod).Condition(v1.PodScheduled); c != nil {
		t.Errorf("Condition(PodScheduled) = %+v, want nil (not kept)", c)
	}
}

func TestTransformKeepsNodesWhole(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Status:     v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"nginx"}}}, Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}},
	}
	want := node.DeepCopy()
	got, err := Transform(node)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("a node was changed: %+v", got)
	}
}

func TestTransformDropsManagedFields(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	got, err := Transform(lease)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.(*coordinationv1.Lease); l.ManagedFields != nil || l.Name != "n" {
		t.Errorf("lease = %+v", l)
	}
}

// TestTransformSharesTemplateParts: pods with equal labels and
// tolerations share one copy of each; a pod with other labels keeps its
// own.
func TestTransformSharesTemplateParts(t *testing.T) {
	pod := func(name, app string) *v1.Pod {
		secs := int64(300)
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": app}},
			Spec: v1.PodSpec{NodeName: "n", Tolerations: []v1.Toleration{
				{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
			}},
		}
	}
	strip := func(p *v1.Pod) *Pod {
		got, err := Transform(p)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*Pod)
	}
	a, b, c := strip(pod("a", "web")), strip(pod("b", "web")), strip(pod("c", "db"))
	mapPtr := func(m map[string]string) uintptr { return uintptr(reflect.ValueOf(m).UnsafePointer()) }
	if mapPtr(a.Labels) != mapPtr(b.Labels) || &a.Spec.Tolerations[0] != &b.Spec.Tolerations[0] {
		t.Error("pods of one template share neither labels nor tolerations")
	}
	if mapPtr(a.Labels) == mapPtr(c.Labels) || c.Labels["app"] != "db" || a.Labels["app"] != "web" {
		t.Errorf("labels %v and %v", a.Labels, c.Labels)
	}
	// Owner references and a Ready-only condition list are shared too.
	owned := func(name string, ready v1.ConditionStatus) *v1.Pod {
		p := pod(name, "web")
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid"}}
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: ready, LastTransitionTime: metav1.Unix(int64(len(name)), 0)}}
		return p
	}
	d, e, f := strip(owned("d", v1.ConditionTrue)), strip(owned("ee", v1.ConditionTrue)), strip(owned("f", v1.ConditionFalse))
	if &d.OwnerReferences[0] != &e.OwnerReferences[0] || &d.Status.Conditions[0] != &e.Status.Conditions[0] {
		t.Error("pods of one template share neither owner references nor their Ready condition")
	}
	if want := []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}; !reflect.DeepEqual(f.Status.Conditions, want) {
		t.Errorf("conditions of a pod not ready: %+v, want %+v", f.Status.Conditions, want)
	}
}

// BenchmarkTransformPodRetained decodes b.N running pods from protobuf as
// the informer does, keeps what Transform returns, and reports the live
// heap they hold (B/pod-kept).
func BenchmarkTransformPodRetained(b *testing.B) {
	ts := metav1.Unix(1700000000, 0)
	secs := int64(300)
	raw := make([][]byte, 64)
	for i := range raw {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%05d", i), Namespace: "scale-bench", UID: "987667c2-bcb7-41f1-81a1-a7ac447f838a",
				ResourceVersion: "229188", Labels: map[string]string{"app": "scale"}, CreationTimestamp: ts},
			Spec: v1.PodSpec{NodeName: fmt.Sprintf("node-%d", i), SchedulerName: v1.DefaultSchedulerName,
				Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}}}},
				Tolerations: []v1.Toleration{
					{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
					{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
				}},
			Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &ts, PodIP: "10.0.0.1", Conditions: []v1.PodCondition{
				{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: ts},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: ts},
			}},
		}
		data, err := p.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		raw[i] = data
	}
	informertest.ReportRetained(b, raw, Transform)
}

func TestPodLister(t *testing.T) {
	byApp := func(obj any) ([]string, error) { return []string{obj.(*Pod).Labels["app"]}, nil }
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, "app": byApp})
	add := func(ns, name, app string) {
		obj, err := Transform(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := indexer.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "web-1", "web")
	add("a", "db-1", "db")
	add("b", "web-2", "web")
	lister := PodLister{indexer: indexer}
	names := func(pods []*Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		sort.Strings(out)
		return out
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, c := range []struct {
		name string
		got  []*Pod
		want []string
	}{
		{"List(everything)", lister.List(labels.Everything()), []string{"a/db-1", "a/web-1", "b/web-2"}},
		{"List(app=web)", lister.List(web), []string{"a/web-1", "b/web-2"}},
		{"List(nothing)", lister.List(labels.Nothing()), nil},
		{"ListNamespace(a, everything)", lister.ListNamespace("a", labels.Everything()), []string{"a/db-1", "a/web-1"}},
		{"ListNamespace(b, app=web)", lister.ListNamespace("b", web), []string{"b/web-2"}},
		{"ListNamespace(c, everything)", lister.ListNamespace("c", labels.Everything()), nil},
		{"ByIndex(app, web)", lister.ByIndex("app", "web"), []string{"a/web-1", "b/web-2"}},
		{"ByIndex(none, web)", lister.ByIndex("none", "web"), nil},
	} {
		if got := names(c.got); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if p, ok := lister.Get("a", "db-1"); !ok || p.Labels["app"] != "db" {
		t.Errorf("Get(a, db-1) = %+v, %v", p, ok)
	}
	if p, ok := lister.GetByKey("b/db-1"); ok || p != nil {
		t.Errorf("GetByKey(b/db-1) = %+v, %v; want none", p, ok)
	}
}
