package openapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi/cached"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
)

// newTestServer serves the documents as server/routes.go mounts them.
func newTestServer(t *testing.T) (*Document, *httptest.Server) {
	t.Helper()
	d := buildTestDocument(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/openapi/v2", d.ServeV2)
	mux.HandleFunc("/openapi/v3", d.ServeV3Index)
	mux.HandleFunc("/openapi/v3/", d.ServeV3)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return d, srv
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// No transparent gzip: the test sees what is on the wire.
	client := &http.Client{
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestV3Index(t *testing.T) {
	d, srv := newTestServer(t)
	resp, body := get(t, srv.URL+"/openapi/v3", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi/v3: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var idx struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Paths) != len(d.V3Paths()) {
		t.Errorf("index has %d paths, want %d", len(idx.Paths), len(d.V3Paths()))
	}
	hash := regexp.MustCompile(`^/openapi/v3/apis/policy/v1\?hash=[0-9A-F]{128}$`)
	if u := idx.Paths["apis/policy/v1"].ServerRelativeURL; !hash.MatchString(u) {
		t.Errorf("serverRelativeURL = %q", u)
	}
	for p, gv := range idx.Paths {
		resp, body := get(t, srv.URL+gv.ServerRelativeURL, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, d.V3JSON(p)) {
			t.Errorf("GET %s: %d", gv.ServerRelativeURL, resp.StatusCode)
		}
	}
}

func TestV3ETagAndCaching(t *testing.T) {
	d, srv := newTestServer(t)
	url := srv.URL + "/openapi/v3/api/v1"
	resp, body := get(t, url, nil)
	etag := resp.Header.Get("Etag")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, d.V3JSON("api/v1")) {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	if etag != strconv.Quote(d.v3Blobs["api/v1"].hash) || resp.Header.Get("Cache-Control") != "no-cache, private" {
		t.Errorf("Etag %q, Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
	}
	if resp, body := get(t, url, map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := get(t, url, map[string]string{"If-None-Match": `"other"`}); resp.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match other: %d", resp.StatusCode)
	}

	hashed := url + "?hash=" + d.v3Blobs["api/v1"].hash
	resp, _ = get(t, hashed, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" || resp.Header.Get("Expires") == "" {
		t.Errorf("hashed GET: %d, Cache-Control %q, Expires %q", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Expires"))
	}
	resp, _ = get(t, url+"?hash=0123", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != strings.TrimPrefix(hashed, srv.URL) {
		t.Errorf("stale hash: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	resp, body = get(t, url, map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/"+v3ProtobufSubtype || resp.Header.Get("Etag") != etag || len(body) == 0 {
		t.Errorf("v3 protobuf: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Etag"))
	}
	if resp, _ := get(t, url, map[string]string{"Accept": "text/html"}); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("Accept text/html: %d", resp.StatusCode)
	}
	if resp, _ := get(t, srv.URL+"/openapi/v3/apis/apps/v1", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown group-version: %d", resp.StatusCode)
	}

	resp, body = get(t, url, map[string]string{"Accept-Encoding": "gzip"})
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Etag") != etag {
		t.Fatalf("gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, d.V3JSON("api/v1")) {
		t.Errorf("gunzipped body differs (%v)", err)
	}
}

func TestV2Handler(t *testing.T) {
	d, srv := newTestServer(t)
	url := srv.URL + "/openapi/v2"
	resp, body := get(t, url, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, d.V2JSON()) {
		t.Fatalf("GET /openapi/v2: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	etag := resp.Header.Get("Etag")
	if len(etag) != 130 || resp.Header.Get("Cache-Control") != "no-cache, private" {
		t.Errorf("Etag %q, Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
	}

	for _, accept := range []string{
		"application/com.github.proto-openapi.spec.v2@v1.0+protobuf", // kubectl
		"application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
		"application/com.github.proto-openapi.spec.v2@v1.0+protobuf;q=1, application/json;q=0.5",
	} {
		resp, body := get(t, url, map[string]string{"Accept": accept})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
			t.Errorf("Accept %s: %d %q", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
			continue
		}
		if resp.Header.Get("Etag") != etag {
			t.Errorf("protobuf Etag %q, JSON's %q", resp.Header.Get("Etag"), etag)
		}
		var doc openapi_v2.Document
		if err := proto.Unmarshal(body, &doc); err != nil || doc.Swagger != "2.0" {
			t.Errorf("protobuf body: %v, swagger %q", err, doc.Swagger)
		}
		if resp, _ := get(t, url, map[string]string{"Accept": accept, "If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
			t.Errorf("protobuf If-None-Match: %d", resp.StatusCode)
		}
	}
	if resp, _ := get(t, url, map[string]string{"Accept": "application/json;q=0.1, application/com.github.proto-openapi.spec.v2@v1.0+protobuf;q=0.9"}); resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Errorf("quality ignored: %q", resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, url, map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, _ := get(t, url, map[string]string{"Accept": "application/xml"}); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("Accept application/xml: %d", resp.StatusCode)
	}
}

// TestKubectlClients reads the documents through client-go's discovery
// and OpenAPI clients, as kubectl does, and computes a client-side apply
// patch from the OpenAPI v3 schema, as kubectl apply does.
func TestKubectlClients(t *testing.T) {
	_, srv := newTestServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := dc.OpenAPISchema() // protobuf, kubectl's default
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	if len(v2.GetDefinitions().GetAdditionalProperties()) == 0 {
		t.Error("v2 document has no definitions")
	}

	root := openapi3.NewRoot(cached.NewClient(dc.OpenAPIV3()))
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	if len(gvs) != 3 {
		t.Errorf("group versions %v", gvs)
	}
	spec, err := root.GVSpec(schema.GroupVersion{Version: "v1"})
	if err != nil {
		t.Fatalf("GVSpec: %v", err)
	}
	pod := spec.Components.Schemas["io.k8s.api.core.v1.Pod"]
	if pod == nil {
		t.Fatal("no Pod schema")
	}
	meta := strategicpatch.PatchMetaFromOpenAPIV3{Schema: pod, SchemaList: spec.Components.Schemas}
	original := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}}`)
	modified := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"a:2"},{"name":"b","image":"b:1"}]}}`)
	patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, original, meta, false)
	if err != nil {
		t.Fatalf("three-way merge patch from the v3 schema: %v", err)
	}
	// With the merge key the patch names the container instead of
	// replacing the list.
	want := `{"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"containers":[{"image":"a:2","name":"a"}]}}`
	if string(patch) != want {
		t.Errorf("patch = %s, want %s", patch, want)
	}
}
