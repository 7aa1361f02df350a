package openapi

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
)

// TestPodLogOperation checks GET pods/{name}/log against kube v1.32's
// documents: the PodLogOptions fields as query parameters (sinceTime is
// structured, so kube leaves it out), all of them on the path item as the
// only operation's, and a string answered as text/plain or an object media
// type.
func TestPodLogOperation(t *testing.T) {
	doc := loadV3(t, "api/v1")
	const path = "/api/v1/namespaces/{namespace}/pods/{name}/log"
	item := doc.Paths.Value(path)
	if item == nil {
		t.Fatalf("no path %s", path)
	}
	if len(item.Operations()) != 1 || item.Get == nil {
		t.Fatalf("%s: operations %v, want GET only", path, item.Operations())
	}
	if len(item.Get.Parameters) != 0 {
		t.Errorf("GET has parameters of its own: %v", item.Get.Parameters)
	}
	types := map[string]string{}
	var names []string
	for _, p := range item.Parameters {
		names = append(names, p.Value.Name)
		types[p.Value.Name] = p.Value.Schema.Value.Type.Slice()[0]
		if p.Value.Description == "" {
			t.Errorf("parameter %s undocumented", p.Value.Name)
		}
	}
	wantNames := []string{"container", "follow", "insecureSkipTLSVerifyBackend", "limitBytes", "name", "namespace", "pretty", "previous", "sinceSeconds", "stream", "tailLines", "timestamps"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("parameters %v\nwant %v", names, wantNames)
	}
	for name, typ := range map[string]string{"follow": "boolean", "tailLines": "integer", "limitBytes": "integer", "sinceSeconds": "integer", "container": "string"} {
		if types[name] != typ {
			t.Errorf("%s is %s, want %s", name, types[name], typ)
		}
	}
	ok := item.Get.Responses.Value("200").Value
	var media []string
	for m, mt := range ok.Content {
		media = append(media, m)
		if mt.Schema.Ref != "" || !mt.Schema.Value.Type.Is("string") {
			t.Errorf("%s answers %+v, want a string", m, mt.Schema)
		}
	}
	sort.Strings(media)
	if want := []string{mediaJSON, mediaProtobuf, mediaYAML, mediaText}; !reflect.DeepEqual(media, want) {
		t.Errorf("200 media %v, want %v", media, want)
	}

	var v2 struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(buildTestDocument(t).V2JSON(), &v2); err != nil {
		t.Fatal(err)
	}
	var get struct {
		Produces  []string `json:"produces"`
		Responses map[string]struct {
			Schema map[string]any `json:"schema"`
		} `json:"responses"`
	}
	if err := json.Unmarshal(v2.Paths[path]["get"], &get); err != nil {
		t.Fatal(err)
	}
	if want := []string{mediaText, mediaJSON, mediaYAML, mediaProtobuf}; !reflect.DeepEqual(get.Produces, want) {
		t.Errorf("v2 produces %v, want %v", get.Produces, want)
	}
	if s := get.Responses["200"].Schema; s["type"] != "string" {
		t.Errorf("v2 200 schema %v", s)
	}
}
