package integration

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestListEncodings: the compact JSON list (assembled from the watch
// cache's encodings), the pretty JSON and the YAML list (encoded from the
// typed list) carry the same document, shaped like kube's: items without
// kind and apiVersion.
func TestListEncodings(t *testing.T) {
	ns := newNamespace(t)
	createPods(t, ns, map[string]string{"app": "enc"}, "a", "b", "c")
	path := "/api/v1/namespaces/" + ns + "/pods"
	compact := doRaw(t, "GET", path, nil)
	pretty := doRaw(t, "GET", path+"?pretty=true", nil)
	asYAML := doRaw(t, "GET", path, nil, "Accept", "application/yaml")
	if compact.Code != 200 || pretty.Code != 200 || asYAML.Code != 200 {
		t.Fatalf("codes %d %d %d", compact.Code, pretty.Code, asYAML.Code)
	}
	if !strings.HasPrefix(string(compact.Body), `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"`) {
		t.Errorf("compact list starts %.80s", compact.Body)
	}
	var c, p, y map[string]any
	if err := json.Unmarshal(compact.Body, &c); err != nil {
		t.Fatalf("compact list is not JSON: %v\n%s", err, compact.Body)
	}
	if err := json.Unmarshal(pretty.Body, &p); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(asYAML.Body, &y); err != nil {
		t.Fatal(err)
	}
	items := c["items"].([]any)
	if len(items) != 3 {
		t.Fatalf("%d items, want 3", len(items))
	}
	for _, item := range items {
		m := item.(map[string]any)
		if _, ok := m["kind"]; ok {
			t.Errorf("list item carries kind: %v", m["kind"])
		}
		if _, ok := m["apiVersion"]; ok {
			t.Errorf("list item carries apiVersion: %v", m["apiVersion"])
		}
	}
	// The YAML and pretty lists may be read at a later revision; compare
	// the items, which did not change.
	if !reflect.DeepEqual(c["items"], p["items"]) {
		t.Errorf("compact and pretty items differ:\n%v\n%v", c["items"], p["items"])
	}
	if !reflect.DeepEqual(c["items"], y["items"]) {
		t.Errorf("compact and YAML items differ:\n%v\n%v", c["items"], y["items"])
	}
}
