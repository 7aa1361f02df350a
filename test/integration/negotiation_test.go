package integration

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestAcceptNegotiation: the Accept header is read as kube-apiserver 1.32
// reads it (goautoneg order: higher q first, then a concrete type before a
// wildcard; the first entry the endpoint can answer wins; q=0 is not
// excluded, only last), for objects, lists and errors.
func TestAcceptNegotiation(t *testing.T) {
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := "/api/v1/namespaces/" + ns + "/pods/p"
	const (
		jsonType = "application/json"
		yamlType = "application/yaml"
	)
	for _, c := range []struct {
		accept, path, contentType string
	}{
		{"application/json;q=0.5, application/yaml", pod, yamlType},
		{"application/yaml;q=0.5, application/json;q=0.6", pod, jsonType},
		{protobufType + ";q=0.9, application/json;q=0.8", pod, protobufType},
		{"application/json;q=0.8, " + protobufType + ";q=0.9", pod, protobufType},
		{"*/*;q=0.1, application/yaml", pod, yamlType},
		{"*/*, application/yaml", pod, yamlType},
		{"application/*;q=0.9, " + protobufType, pod, protobufType},
		{"text/html, */*;q=0.5", pod, jsonType},
		{"text/html, application/*", pod, jsonType},
		{"application/json;q=0", pod, jsonType},
		{"application/json;q=0, application/yaml;q=0.1", pod, yamlType},
		{"application/yaml;stream=watch, " + protobufType + ";q=0.5", pod, protobufType},
		{"application/json;as=Table;v=v2;g=meta.k8s.io;q=1, application/yaml;q=0.5", pod, yamlType},
		{"application/yaml;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io", pod, jsonType},
		{protobufType + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1;q=0.2, application/yaml;q=0.1", pod, protobufType},
		// Errors are negotiated too (protobuf included), without forms.
		{protobufType + ";q=0.9, application/json;q=0.5", pod + "-missing", protobufType},
		{"application/yaml;q=0.9, application/json;q=0.5", pod + "-missing", yamlType},
		{"application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml", pod + "-missing", yamlType},
	} {
		r := doRaw(t, "GET", c.path, nil, "Accept", c.accept)
		if got := r.Header.Get("Content-Type"); got != c.contentType {
			t.Errorf("Accept %q: %d in %q, want %q", c.accept, r.Code, got, c.contentType)
		}
	}
}

// TestNotAcceptable: nothing acceptable is kube's 406 in JSON, checked
// before anything is done (a create creates nothing).
func TestNotAcceptable(t *testing.T) {
	ns := newNamespace(t)
	const message = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	path := "/api/v1/namespaces/" + ns + "/pods"
	for _, c := range []struct{ method, path, accept string }{
		{"GET", path, "text/html"},
		{"GET", path, "text/html;q=1, image/*;q=0.5"},
		{"GET", path, protobufType + ";as=Table;v=v1;g=meta.k8s.io"},
		{"GET", path + "?watch=1", "text/plain"},
		{"POST", path, "text/html"},
		{"DELETE", path + "/p", "text/html"},
	} {
		var body []byte
		if c.method == "POST" {
			body = mustJSON(t, newPod("p", nil))
		}
		r := doRaw(t, c.method, c.path, body, "Accept", c.accept)
		st := statusMap(t, r.Body)
		if r.Code != 406 || r.Header.Get("Content-Type") != "application/json" || st["message"] != message || st["reason"] != "NotAcceptable" {
			t.Errorf("%s %s Accept %q: %d %s %s", c.method, c.path, c.accept, r.Code, r.Header.Get("Content-Type"), r.Body)
		}
		// kube's answer when even the error cannot be negotiated is
		// indented JSON (WriteRawJSON).
		if !bytes.HasPrefix(r.Body, []byte("{\n  \"kind\": \"Status\"")) {
			t.Errorf("%s %s: 406 body not indented: %s", c.method, c.path, r.Body)
		}
	}
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "p", metav1.GetOptions{}); err == nil {
		t.Error("the refused create created the pod")
	}
}

// TestWatchNotAcceptable: YAML has no watch stream encoding. As kube, the
// watch is refused after it was set up, with the stream media types in
// the message, and the error in the encoding negotiated for it: YAML.
func TestWatchNotAcceptable(t *testing.T) {
	ns := newNamespace(t)
	r := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods?watch=1", nil, "Accept", "application/yaml, application/json")
	var st metav1.Status
	if err := yaml.Unmarshal(r.Body, &st); err != nil {
		t.Fatalf("body is not YAML: %v\n%s", err, r.Body)
	}
	const message = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
	if r.Code != 406 || r.Header.Get("Content-Type") != "application/yaml" || st.Message != message || st.Reason != metav1.StatusReasonNotAcceptable {
		t.Errorf("watch as YAML: %d %s %s", r.Code, r.Header.Get("Content-Type"), r.Body)
	}
	// An error the watch meets before (a bad selector) comes first.
	r = doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods?watch=1&fieldSelector=spec.foo%3Dbar", nil, "Accept", "application/yaml")
	if r.Code != 400 || !strings.Contains(string(r.Body), "field label not supported: spec.foo") {
		t.Errorf("bad selector on a YAML watch: %d %s", r.Code, r.Body)
	}
}

// TestPrettyJSON: kube's pretty JSON (pretty=true, a curl User-Agent, or
// pretty=1 on the Accept entry) is indented without a final newline; its
// compact JSON ends with one.
func TestPrettyJSON(t *testing.T) {
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/namespaces/" + ns + "/pods/p"
	for _, r := range []rawResponse{
		doRaw(t, "GET", path+"?pretty=true", nil),
		doRaw(t, "GET", path, nil, "User-Agent", "curl/8.5.0"),
		doRaw(t, "GET", path, nil, "Accept", "application/json;pretty=1"),
	} {
		if !bytes.HasPrefix(r.Body, []byte("{\n  \"kind\": \"Pod\"")) || bytes.HasSuffix(r.Body, []byte("\n")) {
			t.Errorf("pretty: %q ... %q", r.Body[:min(len(r.Body), 20)], r.Body[max(0, len(r.Body)-5):])
		}
	}
	if r := doRaw(t, "GET", path, nil); !bytes.HasSuffix(r.Body, []byte("}\n")) || bytes.Contains(r.Body, []byte("\n  ")) {
		t.Errorf("compact: %q", r.Body[max(0, len(r.Body)-5):])
	}
}
