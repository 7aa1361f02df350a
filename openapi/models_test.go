package openapi

import (
	"encoding/json"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
)

// TestModelsMatchV2 checks that the models are the /openapi/v2
// definitions: same names, same extensions server-side apply reads.
func TestModelsMatchV2(t *testing.T) {
	models, err := Models(testResources())
	if err != nil {
		t.Fatal(err)
	}
	var v2 struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(buildTestDocument(t).V2JSON(), &v2); err != nil {
		t.Fatal(err)
	}
	for name := range v2.Definitions {
		if _, ok := models[name]; !ok {
			// The types only the paths use (discovery, options, Status)
			// are not objects anyone applies.
			switch name {
			case "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
				"io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup", "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
				"io.k8s.apimachinery.pkg.apis.meta.v1.APIResource", "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
				"io.k8s.apimachinery.pkg.apis.meta.v1.GroupVersionForDiscovery", "io.k8s.apimachinery.pkg.apis.meta.v1.ServerAddressByClientCIDR",
				"io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
				"io.k8s.apimachinery.pkg.apis.meta.v1.StatusCause", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
				"io.k8s.apimachinery.pkg.apis.meta.v1.Preconditions", "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
				"io.k8s.apimachinery.pkg.runtime.RawExtension":
				continue
			}
			t.Errorf("definition %s missing from the models", name)
		}
	}
	containers := models["io.k8s.api.core.v1.PodSpec"].Properties["containers"]
	if containers.Extensions["x-kubernetes-list-type"] != "map" || containers.Extensions["x-kubernetes-patch-merge-key"] != "name" {
		t.Errorf("PodSpec.containers extensions = %v", containers.Extensions)
	}
	if d := models["io.k8s.api.core.v1.Pod"].Description; d != "" {
		t.Errorf("models keep descriptions: %q", d)
	}
}

// TestTypeConverterMergesAsKube applies two configurations to a pod the
// way kube merges them: containers by name, ports by containerPort and
// protocol, tolerations atomic.
func TestTypeConverterMergesAsKube(t *testing.T) {
	tc, err := TypeConverter(testResources())
	if err != nil {
		t.Fatal(err)
	}
	live := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "1"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{
				{Name: "app", Image: "app:1", Ports: []v1.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}}},
				{Name: "side", Image: "side:1"},
			},
			Tolerations: []v1.Toleration{{Key: "k", Operator: "Exists"}},
		},
	}
	lt, err := tc.ObjectToTyped(live)
	if err != nil {
		t.Fatal(err)
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "labels": map[string]any{"b": "2"}},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "app:2",
				"ports":     []any{map[string]any{"containerPort": int64(80), "protocol": "UDP"}},
				"resources": map[string]any{"limits": map[string]any{"cpu": int64(1)}}}},
			"tolerations": []any{map[string]any{"key": "other", "operator": "Exists"}},
		},
	}}
	pt, err := tc.ObjectToTyped(patch)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := lt.Merge(pt)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := tc.TypedToObject(merged)
	if err != nil {
		t.Fatal(err)
	}
	spec := obj.(*unstructured.Unstructured).Object["spec"].(map[string]any)
	cs := spec["containers"].([]any)
	if len(cs) != 2 || cs[0].(map[string]any)["image"] != "app:2" || cs[1].(map[string]any)["name"] != "side" {
		t.Errorf("containers = %v", cs)
	}
	if ports := cs[0].(map[string]any)["ports"].([]any); len(ports) != 2 {
		t.Errorf("ports (keyed by containerPort and protocol) = %v", ports)
	}
	if tol := spec["tolerations"].([]any); len(tol) != 1 {
		t.Errorf("tolerations (atomic) = %v", tol)
	}
	set, err := pt.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	want := fieldpath.MakePathOrDie("spec", "containers", fieldpath.KeyByFields("name", "app"), "image")
	if !set.Has(want) {
		t.Errorf("field set lacks %v:\n%v", want, set)
	}
	_ = typed.AllowDuplicates
}

// BenchmarkTypeConverter is what the first write after start-up pays.
func BenchmarkTypeConverter(b *testing.B) {
	res := testResources()
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		tc, err := TypeConverter(res)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(tc)
	}
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "retained-B")
}
