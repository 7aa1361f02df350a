package openapi

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDocumentsValidate loads every served OpenAPI 3 document with
// kin-openapi's loader and validates it with kin-openapi's validator,
// default options.
func TestDocumentsValidate(t *testing.T) {
	d := buildTestDocument(t)
	want := []string{"api", "api/v1", "apis", "apis/coordination.k8s.io", "apis/coordination.k8s.io/v1", "apis/policy", "apis/policy/v1"}
	if got := d.V3Paths(); !reflect.DeepEqual(got, want) {
		t.Fatalf("V3Paths = %v, want %v", got, want)
	}
	for _, p := range want {
		doc, err := d.V3(p)
		if err != nil {
			t.Fatalf("load %s: %v", p, err)
		}
		if err := doc.Validate(context.Background()); err != nil {
			t.Errorf("%s does not validate: %v", p, err)
		}
		if doc.OpenAPI != "3.0.0" || doc.Info.Title != "Kubernetes" {
			t.Errorf("%s: openapi %q, title %q", p, doc.OpenAPI, doc.Info.Title)
		}
		// Every $ref must name a schema of the same document.
		for _, ref := range refsIn(t, d.V3JSON(p)) {
			name, ok := strings.CutPrefix(ref, componentPrefix)
			if !ok || doc.Components.Schemas[name] == nil {
				t.Errorf("%s: dangling $ref %s", p, ref)
			}
		}
	}
}

// refsIn returns every "$ref" value in a JSON document.
func refsIn(t *testing.T, data []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "$ref" {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

func loadV3(t *testing.T, path string) *openapi3.T {
	t.Helper()
	doc, err := buildTestDocument(t).V3(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func component(t *testing.T, doc *openapi3.T, name string) *openapi3.Schema {
	t.Helper()
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("no component %s", name)
	}
	return ref.Value
}

func property(t *testing.T, s *openapi3.Schema, name string) *openapi3.SchemaRef {
	t.Helper()
	p := s.Properties[name]
	if p == nil {
		t.Fatalf("no property %s", name)
	}
	return p
}

// target returns the component a property refers to, directly or through
// kube's allOf wrapper.
func target(p *openapi3.SchemaRef) string {
	if p.Ref != "" {
		return strings.TrimPrefix(p.Ref, componentPrefix)
	}
	if len(p.Value.AllOf) == 1 {
		return strings.TrimPrefix(p.Value.AllOf[0].Ref, componentPrefix)
	}
	return ""
}

func TestPodSchema(t *testing.T) {
	doc := loadV3(t, "api/v1")
	pod := component(t, doc, "io.k8s.api.core.v1.Pod")
	if !strings.HasPrefix(pod.Description, "Pod is a collection of containers") {
		t.Errorf("Pod description = %q", pod.Description)
	}
	gvk, _ := json.Marshal(pod.Extensions[extGVK])
	if string(gvk) != `[{"group":"","kind":"Pod","version":"v1"}]` {
		t.Errorf("Pod %s = %s", extGVK, gvk)
	}
	meta := property(t, pod, "metadata")
	if target(meta) != "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" || !strings.HasPrefix(meta.Value.Description, "Standard object's metadata") {
		t.Errorf("Pod.metadata = %+v", meta.Value)
	}
	if target(property(t, pod, "spec")) != "io.k8s.api.core.v1.PodSpec" {
		t.Errorf("Pod.spec does not refer to PodSpec")
	}

	spec := component(t, doc, "io.k8s.api.core.v1.PodSpec")
	if !contains(spec.Required, "containers") {
		t.Errorf("PodSpec.required = %v, want containers", spec.Required)
	}
	containers := property(t, spec, "containers").Value
	if !containers.Type.Is("array") || target(containers.Items) != "io.k8s.api.core.v1.Container" {
		t.Errorf("PodSpec.containers is not an array of Container: %+v", containers)
	}
	wantExt := map[string]any{
		extPatchMergeKey: "name", extPatchStrategy: "merge",
		extListType: "map", extListMapKeys: []any{"name"},
	}
	for k, v := range wantExt {
		if !reflect.DeepEqual(containers.Extensions[k], v) {
			t.Errorf("PodSpec.containers %s = %#v, want %#v", k, containers.Extensions[k], v)
		}
	}
	if containers.Description == "" {
		t.Error("PodSpec.containers has no description")
	}

	container := component(t, doc, "io.k8s.api.core.v1.Container")
	if !contains(container.Required, "name") {
		t.Errorf("Container.required = %v, want name", container.Required)
	}
	ports := property(t, container, "ports").Value
	if !reflect.DeepEqual(ports.Extensions[extListMapKeys], []any{"containerPort", "protocol"}) || ports.Extensions[extPatchMergeKey] != "containerPort" {
		t.Errorf("Container.ports extensions = %v", ports.Extensions)
	}
	if got := property(t, container, "command").Value.Extensions[extListType]; got != "atomic" {
		t.Errorf("Container.command list type = %v, want atomic", got)
	}
	limits := property(t, component(t, doc, "io.k8s.api.core.v1.ResourceRequirements"), "limits").Value
	if !limits.Type.Is("object") || target(limits.AdditionalProperties.Schema) != "io.k8s.apimachinery.pkg.api.resource.Quantity" {
		t.Errorf("ResourceRequirements.limits = %+v", limits)
	}

	objectMeta := component(t, doc, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
	if got := property(t, objectMeta, "finalizers").Value.Extensions; got[extListType] != "set" || got[extPatchStrategy] != "merge" {
		t.Errorf("ObjectMeta.finalizers extensions = %v", got)
	}
	labels := property(t, objectMeta, "labels").Value
	if !labels.Type.Is("object") || !labels.AdditionalProperties.Schema.Value.Type.Is("string") {
		t.Errorf("ObjectMeta.labels = %+v", labels)
	}
	if ts := property(t, objectMeta, "creationTimestamp"); target(ts) != "io.k8s.apimachinery.pkg.apis.meta.v1.Time" {
		t.Errorf("ObjectMeta.creationTimestamp does not refer to Time")
	}
	if tm := component(t, doc, "io.k8s.apimachinery.pkg.apis.meta.v1.Time"); !tm.Type.Is("string") || tm.Format != "date-time" {
		t.Errorf("Time = %+v", tm)
	}
	ios := component(t, doc, "io.k8s.apimachinery.pkg.util.intstr.IntOrString")
	if ios.Format != "int-or-string" || len(ios.OneOf) != 2 || !ios.OneOf[0].Value.Type.Is("integer") || !ios.OneOf[1].Value.Type.Is("string") {
		t.Errorf("IntOrString = %+v", ios)
	}
	q := component(t, doc, "io.k8s.apimachinery.pkg.api.resource.Quantity")
	if len(q.OneOf) != 2 || !q.OneOf[0].Value.Type.Is("string") || !q.OneOf[1].Value.Type.Is("number") || q.Description == "" {
		t.Errorf("Quantity = %+v", q)
	}
	if s := component(t, doc, "io.k8s.api.core.v1.ObjectReference"); s.Extensions[extMapType] != "atomic" {
		t.Errorf("ObjectReference is not atomic")
	}
	if f := property(t, component(t, doc, "io.k8s.api.core.v1.PodStatus"), "startTime"); target(f) != "io.k8s.apimachinery.pkg.apis.meta.v1.Time" {
		t.Errorf("PodStatus.startTime does not refer to Time")
	}
	// Inline (embedded) fields are flattened: Volume has VolumeSource's.
	if component(t, doc, "io.k8s.api.core.v1.Volume").Properties["emptyDir"] == nil {
		t.Error("Volume lacks the inline VolumeSource fields")
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.core.v1.VolumeSource"]; ok {
		t.Error("inline VolumeSource is a component")
	}
	// Required as kube marks it, including +optional fields without omitempty.
	event := component(t, doc, "io.k8s.api.core.v1.Event")
	if !reflect.DeepEqual(event.Required, []string{"metadata", "involvedObject"}) {
		t.Errorf("Event.required = %v", event.Required)
	}
	status := component(t, doc, "io.k8s.api.core.v1.ContainerStatus")
	if !reflect.DeepEqual(status.Required, []string{"name", "ready", "restartCount", "image", "imageID"}) {
		t.Errorf("ContainerStatus.required = %v", status.Required)
	}
	if eviction := component(t, doc, "io.k8s.api.policy.v1.Eviction"); eviction.Extensions[extGVK] == nil {
		t.Error("Eviction has no group-version-kind")
	}
}

func TestPolicyAndCoordinationSchemas(t *testing.T) {
	doc := loadV3(t, "apis/policy/v1")
	spec := component(t, doc, "io.k8s.api.policy.v1.PodDisruptionBudgetSpec")
	sel := property(t, spec, "selector")
	if target(sel) != "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector" || sel.Value.Extensions[extPatchStrategy] != "replace" {
		t.Errorf("PodDisruptionBudgetSpec.selector = %+v", sel.Value)
	}
	if target(property(t, spec, "minAvailable")) != "io.k8s.apimachinery.pkg.util.intstr.IntOrString" {
		t.Error("minAvailable is not an IntOrString")
	}
	status := component(t, doc, "io.k8s.api.policy.v1.PodDisruptionBudgetStatus")
	if !reflect.DeepEqual(status.Required, []string{"disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"}) {
		t.Errorf("PodDisruptionBudgetStatus.required = %v", status.Required)
	}
	if d := property(t, status, "currentHealthy").Value.Default; d != float64(0) {
		t.Errorf("currentHealthy default = %#v", d)
	}
	cond := property(t, status, "conditions").Value
	if cond.Extensions[extListType] != "map" || !reflect.DeepEqual(cond.Extensions[extListMapKeys], []any{"type"}) {
		t.Errorf("PodDisruptionBudgetStatus.conditions = %v", cond.Extensions)
	}
	list := component(t, doc, "io.k8s.api.policy.v1.PodDisruptionBudgetList")
	if !reflect.DeepEqual(list.Required, []string{"items"}) || property(t, list, "items").Value.Extensions[extListType] != nil {
		t.Errorf("PodDisruptionBudgetList: required %v, items %v", list.Required, property(t, list, "items").Value.Extensions)
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.core.v1.Pod"]; ok {
		t.Error("policy/v1 carries core/v1 Pod: components must be what its paths reach")
	}
	lease := component(t, loadV3(t, "apis/coordination.k8s.io/v1"), "io.k8s.api.coordination.v1.LeaseSpec")
	if target(property(t, lease, "renewTime")) != "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" {
		t.Error("LeaseSpec.renewTime is not a MicroTime")
	}
}

type wantOp struct {
	doc, path, method, id, action string
	gvk                           schema.GroupVersionKind
}

var corePod = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

var wantOps = []wantOp{
	{"api/v1", "/api/v1/namespaces/{namespace}/pods", "GET", "listCoreV1NamespacedPod", "list", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods", "POST", "createCoreV1NamespacedPod", "post", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods", "DELETE", "deleteCoreV1CollectionNamespacedPod", "deletecollection", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}", "GET", "readCoreV1NamespacedPod", "get", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}", "PUT", "replaceCoreV1NamespacedPod", "put", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}", "PATCH", "patchCoreV1NamespacedPod", "patch", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}", "DELETE", "deleteCoreV1NamespacedPod", "delete", corePod},
	{"api/v1", "/api/v1/pods", "GET", "listCoreV1PodForAllNamespaces", "list", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/status", "GET", "readCoreV1NamespacedPodStatus", "get", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/status", "PUT", "replaceCoreV1NamespacedPodStatus", "put", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/status", "PATCH", "patchCoreV1NamespacedPodStatus", "patch", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/binding", "POST", "createCoreV1NamespacedPodBinding", "post", schema.GroupVersionKind{Version: "v1", Kind: "Binding"}},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/eviction", "POST", "createCoreV1NamespacedPodEviction", "post", schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/log", "GET", "readCoreV1NamespacedPodLog", "get", corePod},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/exec", "GET", "connectCoreV1GetNamespacedPodExec", "connect", schema.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/exec", "POST", "connectCoreV1PostNamespacedPodExec", "connect", schema.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}},
	{"api/v1", "/api/v1/namespaces/{namespace}/pods/{name}/portforward", "POST", "connectCoreV1PostNamespacedPodPortforward", "connect", schema.GroupVersionKind{Version: "v1", Kind: "PodPortForwardOptions"}},
	// kube's deprecated /watch/ paths.
	{"api/v1", "/api/v1/watch/namespaces/{namespace}/pods", "GET", "watchCoreV1NamespacedPodList", "watchlist", corePod},
	{"api/v1", "/api/v1/watch/namespaces/{namespace}/pods/{name}", "GET", "watchCoreV1NamespacedPod", "watch", corePod},
	{"api/v1", "/api/v1/watch/pods", "GET", "watchCoreV1PodListForAllNamespaces", "watchlist", corePod},
	{"api/v1", "/api/v1/watch/nodes", "GET", "watchCoreV1NodeList", "watchlist", schema.GroupVersionKind{Version: "v1", Kind: "Node"}},
	{"api/v1", "/api/v1/watch/nodes/{name}", "GET", "watchCoreV1Node", "watch", schema.GroupVersionKind{Version: "v1", Kind: "Node"}},
	{"apis/coordination.k8s.io/v1", "/apis/coordination.k8s.io/v1/watch/leases", "GET", "watchCoordinationV1LeaseListForAllNamespaces", "watchlist", schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}},
	{"api/v1", "/api/v1/nodes", "GET", "listCoreV1Node", "list", schema.GroupVersionKind{Version: "v1", Kind: "Node"}},
	{"api/v1", "/api/v1/nodes/{name}/status", "PATCH", "patchCoreV1NodeStatus", "patch", schema.GroupVersionKind{Version: "v1", Kind: "Node"}},
	{"api/v1", "/api/v1/namespaces", "POST", "createCoreV1Namespace", "post", schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}},
	{"api/v1", "/api/v1/namespaces/{name}", "DELETE", "deleteCoreV1Namespace", "delete", schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}},
	{"api/v1", "/api/v1/namespaces/{name}/finalize", "PUT", "replaceCoreV1NamespaceFinalize", "put", schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}},
	{"api/v1", "/api/v1/namespaces/{name}/status", "GET", "readCoreV1NamespaceStatus", "get", schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}},
	{"api/v1", "/api/v1/events", "GET", "listCoreV1EventForAllNamespaces", "list", schema.GroupVersionKind{Version: "v1", Kind: "Event"}},
	{"api/v1", "/api/v1/namespaces/{namespace}/events/{name}", "DELETE", "deleteCoreV1NamespacedEvent", "delete", schema.GroupVersionKind{Version: "v1", Kind: "Event"}},
	{"apis/policy/v1", "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", "GET", "listPolicyV1NamespacedPodDisruptionBudget", "list", schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}},
	{"apis/policy/v1", "/apis/policy/v1/poddisruptionbudgets", "GET", "listPolicyV1PodDisruptionBudgetForAllNamespaces", "list", schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}},
	{"apis/policy/v1", "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}/status", "PUT", "replacePolicyV1NamespacedPodDisruptionBudgetStatus", "put", schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}},
	{"apis/coordination.k8s.io/v1", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "PATCH", "patchCoordinationV1NamespacedLease", "patch", schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}},
	{"apis/coordination.k8s.io/v1", "/apis/coordination.k8s.io/v1/leases", "GET", "listCoordinationV1LeaseForAllNamespaces", "list", schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}},
	{"api/v1", "/api/v1/", "GET", "getCoreV1APIResources", "", schema.GroupVersionKind{}},
	{"apis/policy/v1", "/apis/policy/v1/", "GET", "getPolicyV1APIResources", "", schema.GroupVersionKind{}},
	{"apis/policy", "/apis/policy/", "GET", "getPolicyAPIGroup", "", schema.GroupVersionKind{}},
	{"apis", "/apis/", "GET", "getAPIVersions", "", schema.GroupVersionKind{}},
	{"api", "/api/", "GET", "getCoreAPIVersions", "", schema.GroupVersionKind{}},
}

func TestOperations(t *testing.T) {
	docs := map[string]*openapi3.T{}
	for _, w := range wantOps {
		doc := docs[w.doc]
		if doc == nil {
			doc = loadV3(t, w.doc)
			docs[w.doc] = doc
		}
		item := doc.Paths.Value(w.path)
		if item == nil {
			t.Errorf("%s: no path %s", w.doc, w.path)
			continue
		}
		op := item.GetOperation(w.method)
		if op == nil {
			t.Errorf("%s %s: no operation", w.method, w.path)
			continue
		}
		if op.OperationID != w.id {
			t.Errorf("%s %s: operationId %s, want %s", w.method, w.path, op.OperationID, w.id)
		}
		if w.action == "" {
			if op.Extensions[extAction] != nil || op.Extensions[extGVK] != nil {
				t.Errorf("%s: discovery operation has kube extensions", w.id)
			}
			continue
		}
		if op.Extensions[extAction] != w.action {
			t.Errorf("%s: action %v, want %s", w.id, op.Extensions[extAction], w.action)
		}
		want := map[string]any{"group": w.gvk.Group, "version": w.gvk.Version, "kind": w.gvk.Kind}
		if !reflect.DeepEqual(op.Extensions[extGVK], want) {
			t.Errorf("%s: gvk %v, want %v", w.id, op.Extensions[extGVK], want)
		}
	}

	// Namespaces have no deletecollection; nothing else is served.
	if op := docs["api/v1"].Paths.Value("/api/v1/namespaces").Delete; op != nil {
		t.Errorf("namespaces serve %s", op.OperationID)
	}
	// 18, 10 /watch/ paths (pods 3, events 3, namespaces 2, nodes 2)
	// and pods/exec and pods/portforward.
	if n := docs["api/v1"].Paths.Len(); n != 30 {
		t.Errorf("api/v1 has %d paths, want 30", n)
	}
}

func TestParametersAndBodies(t *testing.T) {
	d := buildTestDocument(t)
	ids := map[string]string{}
	for _, p := range d.V3Paths() {
		doc := loadV3(t, p)
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				if other, ok := ids[op.OperationID]; ok {
					t.Errorf("operationId %s on %s and %s", op.OperationID, other, path)
				}
				ids[op.OperationID] = path
				params := map[string]*openapi3.Parameter{}
				for _, prm := range append(append(openapi3.Parameters{}, item.Parameters...), op.Parameters...) {
					params[prm.Value.Name] = prm.Value
				}
				action, _ := op.Extensions[extAction].(string)
				var want []string
				switch action {
				case "":
					continue
				case "list", "watch", "watchlist":
					want = []string{"pretty", "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch", "allowWatchBookmarks"}
				case "post", "put":
					want = []string{"pretty", "dryRun", "fieldManager", "fieldValidation"}
				case "patch":
					want = []string{"pretty", "dryRun", "fieldManager", "fieldValidation", "force"}
				case "delete":
					want = []string{"pretty", "dryRun", "gracePeriodSeconds", "propagationPolicy", "orphanDependents"}
				case "deletecollection":
					want = []string{"pretty", "dryRun", "gracePeriodSeconds", "propagationPolicy", "orphanDependents", "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "timeoutSeconds"}
				case "get":
					want = []string{"pretty"}
				case "connect":
					// The options' fields, and no pretty (kube's).
					if params["pretty"] != nil {
						t.Errorf("%s: a connect operation has pretty", op.OperationID)
					}
					want = []string{"container", "command", "stdin"}
					if strings.HasSuffix(op.OperationID, "Portforward") {
						want = []string{"ports"}
					}
				}
				for _, name := range want {
					prm := params[name]
					if prm == nil || prm.In != "query" || prm.Description == "" {
						t.Errorf("%s: query parameter %s missing or undocumented", op.OperationID, name)
					}
				}
				for _, seg := range []string{"name", "namespace"} {
					if strings.Contains(path, "{"+seg+"}") && (params[seg] == nil || params[seg].In != "path" || !params[seg].Required) {
						t.Errorf("%s: path parameter %s missing", op.OperationID, seg)
					}
				}
				if params["watch"] != nil && !params["watch"].Schema.Value.Type.Is("boolean") {
					t.Errorf("%s: watch is not boolean", op.OperationID)
				}
				if params["limit"] != nil && !params["limit"].Schema.Value.Type.Is("integer") {
					t.Errorf("%s: limit is not an integer", op.OperationID)
				}

				var body []string
				if op.RequestBody != nil {
					for m := range op.RequestBody.Value.Content {
						body = append(body, m)
					}
					sort.Strings(body)
				}
				switch action {
				case "patch":
					if !reflect.DeepEqual(body, []string{mediaApply, mediaJSONPatch, mediaMergePatch, mediaStrategic}) || !op.RequestBody.Value.Required {
						t.Errorf("%s: patch body %v", op.OperationID, body)
					}
				case "post", "put", "delete", "deletecollection":
					if !reflect.DeepEqual(body, []string{mediaAny}) {
						t.Errorf("%s: body %v", op.OperationID, body)
					}
				default:
					if body != nil {
						t.Errorf("%s %s: unexpected body", method, op.OperationID)
					}
				}
				codes := map[string][]string{
					"get": {"200", "401"}, "list": {"200", "401"}, "post": {"200", "201", "202", "401"},
					"put": {"200", "201", "401"}, "patch": {"200", "201", "401"},
					"delete": {"200", "202", "401"}, "deletecollection": {"200", "401"},
					"watch": {"200", "401"}, "watchlist": {"200", "401"}, "connect": {"200", "401"},
				}[action]
				var got []string
				for code, resp := range op.Responses.Map() {
					got = append(got, code)
					if action == "connect" {
						if code != "401" && resp.Value.Content[mediaAny] == nil {
							t.Errorf("%s: %s has no */* schema", op.OperationID, code)
						}
						continue
					}
					if code != "401" && resp.Value.Content[mediaJSON] == nil {
						t.Errorf("%s: %s has no application/json schema", op.OperationID, code)
					}
				}
				sort.Strings(got)
				if !reflect.DeepEqual(got, codes) {
					t.Errorf("%s: responses %v, want %v", op.OperationID, got, codes)
				}
			}
		}
	}
	// list answers with the List kind, also as a watch stream.
	doc := loadV3(t, "api/v1")
	list := doc.Paths.Value("/api/v1/namespaces/{namespace}/pods").Get.Responses.Value("200").Value.Content
	if list[mediaJSONWatch] == nil || list[mediaJSON].Schema.Ref != componentPrefix+"io.k8s.api.core.v1.PodList" {
		t.Errorf("list pods content = %v", list)
	}
	// The deprecated /watch/ paths answer a stream of WatchEvents.
	if ref := doc.Paths.Value("/api/v1/watch/namespaces/{namespace}/pods").Get.Responses.Value("200").Value.Content[mediaJSONWatch].Schema.Ref; ref != componentPrefix+"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent" {
		t.Errorf("watch pods answers %s", ref)
	}
	// pods answer DELETE with the pod, other resources with a Status.
	if ref := doc.Paths.Value("/api/v1/namespaces/{namespace}/pods/{name}").Delete.Responses.Value("200").Value.Content[mediaJSON].Schema.Ref; ref != componentPrefix+"io.k8s.api.core.v1.Pod" {
		t.Errorf("delete pod answers %s", ref)
	}
	if ref := doc.Paths.Value("/api/v1/nodes/{name}").Delete.Responses.Value("200").Value.Content[mediaJSON].Schema.Ref; ref != componentPrefix+"io.k8s.apimachinery.pkg.apis.meta.v1.Status" {
		t.Errorf("delete node answers %s", ref)
	}
}

// TestFieldValidationAdvertised checks what kubectl's query param verifier
// (cli-runtime QueryParamVerifierV3) checks before relying on server-side
// field validation: a PATCH operation with the kind's
// x-kubernetes-group-version-kind has a fieldValidation query parameter
// among its own parameters.
func TestFieldValidationAdvertised(t *testing.T) {
	for _, r := range testResources() {
		gv := r.Info.GroupVersion()
		doc := loadV3(t, gvDocPath(gv))
		want := map[string]any{"group": gv.Group, "version": gv.Version, "kind": r.Info.Kind}
		found := 0
		for path, item := range doc.Paths.Map() {
			if item.Patch == nil || !reflect.DeepEqual(item.Patch.Extensions[extGVK], want) {
				continue
			}
			found++
			ok := false
			for _, p := range item.Patch.Parameters {
				ok = ok || (p.Value.Name == "fieldValidation" && p.Value.In == "query")
			}
			if !ok {
				t.Errorf("PATCH %s does not advertise fieldValidation", path)
			}
		}
		if found == 0 {
			t.Errorf("no PATCH operation for %s", r.Info.Kind)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
