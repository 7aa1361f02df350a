package openapi

import (
	"encoding/json"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

func TestV2Document(t *testing.T) {
	d := buildTestDocument(t)
	var doc struct {
		Swagger     string                    `json:"swagger"`
		Paths       map[string]map[string]any `json:"paths"`
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(d.V2JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Swagger != "2.0" {
		t.Errorf("swagger = %q", doc.Swagger)
	}
	if strings.Contains(string(d.V2JSON()), "#/components/") || strings.Contains(string(d.V2JSON()), `"allOf"`) {
		t.Error("v2 document refers to OpenAPI 3 components or uses allOf")
	}
	paths := 0
	for _, p := range d.V3Paths() {
		doc, err := d.V3(p)
		if err != nil {
			t.Fatal(err)
		}
		paths += doc.Paths.Len()
	}
	if len(doc.Paths) != paths {
		t.Errorf("v2 has %d paths, the v3 documents %d", len(doc.Paths), paths)
	}

	// $ref with the field's description beside it, as kube's v2.
	spec := doc.Definitions["io.k8s.api.core.v1.Pod"]["properties"].(map[string]any)["spec"].(map[string]any)
	if spec["$ref"] != "#/definitions/io.k8s.api.core.v1.PodSpec" || spec["description"] == nil {
		t.Errorf("Pod.spec = %v", spec)
	}
	containers := doc.Definitions["io.k8s.api.core.v1.PodSpec"]["properties"].(map[string]any)["containers"].(map[string]any)
	if containers["x-kubernetes-patch-merge-key"] != "name" || containers["items"].(map[string]any)["$ref"] != "#/definitions/io.k8s.api.core.v1.Container" {
		t.Errorf("PodSpec.containers = %v", containers)
	}
	ios := doc.Definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
	if ios["type"] != "string" || ios["format"] != "int-or-string" {
		t.Errorf("IntOrString = %v", ios)
	}
	if q := doc.Definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"]; q["type"] != "string" {
		t.Errorf("Quantity = %v", q)
	}

	patch := doc.Paths["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].(map[string]any)
	if patch["operationId"] != "patchCoreV1NamespacedPod" || patch["x-kubernetes-action"] != "patch" {
		t.Errorf("patch pod = %v", patch)
	}
	consumes, _ := json.Marshal(patch["consumes"])
	if string(consumes) != `["application/json-patch+json","application/merge-patch+json","application/strategic-merge-patch+json","application/apply-patch+yaml"]` {
		t.Errorf("patch consumes %s", consumes)
	}
	var body, fieldValidation bool
	for _, p := range patch["parameters"].([]any) {
		p := p.(map[string]any)
		body = body || (p["in"] == "body" && p["schema"].(map[string]any)["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch")
		fieldValidation = fieldValidation || (p["name"] == "fieldValidation" && p["in"] == "query" && p["type"] == "string")
	}
	if !body || !fieldValidation {
		t.Errorf("patch pod parameters = %v", patch["parameters"])
	}
	list := doc.Paths["/api/v1/namespaces/{namespace}/pods"]["get"].(map[string]any)
	produces, _ := json.Marshal(list["produces"])
	if string(produces) != `["application/json","application/yaml","application/vnd.kubernetes.protobuf","application/json;stream=watch","application/vnd.kubernetes.protobuf;stream=watch"]` {
		t.Errorf("list produces %s", produces)
	}
	resp := list["responses"].(map[string]any)["200"].(map[string]any)["schema"].(map[string]any)
	if resp["$ref"] != "#/definitions/io.k8s.api.core.v1.PodList" {
		t.Errorf("list response = %v", resp)
	}
}

// TestV2Protobuf checks that the v2 document survives gnostic's parser and
// a protobuf round trip, as kubectl reads it.
func TestV2Protobuf(t *testing.T) {
	d := buildTestDocument(t)
	parsed, err := openapi_v2.ParseDocument(d.V2JSON())
	if err != nil {
		t.Fatalf("gnostic ParseDocument: %v", err)
	}
	pb, err := d.v2.protobuf("application/" + v2ProtobufSubtype)
	if err != nil {
		t.Fatal(err)
	}
	var got openapi_v2.Document
	if err := proto.Unmarshal(pb.data, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, parsed) {
		t.Error("protobuf round trip differs from the parsed JSON")
	}
	if got.Swagger != "2.0" {
		t.Errorf("swagger = %q", got.Swagger)
	}
	var pod *openapi_v2.Schema
	for _, def := range got.GetDefinitions().GetAdditionalProperties() {
		if def.Name == "io.k8s.api.core.v1.Pod" {
			pod = def.Value
		}
	}
	if pod == nil || !strings.HasPrefix(pod.Description, "Pod is a collection") {
		t.Fatalf("no Pod definition in the protobuf document")
	}
	var gvk bool
	for _, ext := range pod.GetVendorExtension() {
		gvk = gvk || (ext.Name == extGVK && strings.Contains(ext.Value.GetYaml(), "kind: Pod"))
	}
	if !gvk {
		t.Errorf("Pod definition lacks %s: %v", extGVK, pod.GetVendorExtension())
	}
	var patchOp *openapi_v2.Operation
	for _, p := range got.GetPaths().GetPath() {
		if p.Name == "/api/v1/namespaces/{namespace}/pods/{name}" {
			patchOp = p.Value.Patch
		}
	}
	if patchOp.GetOperationId() != "patchCoreV1NamespacedPod" {
		t.Errorf("patch pod operation = %v", patchOp)
	}
}
