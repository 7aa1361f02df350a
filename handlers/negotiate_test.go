package handlers

import (
	"net/http/httptest"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNegotiate(t *testing.T) {
	meta := func(kind, v string) *schema.GroupVersionKind {
		return &schema.GroupVersionKind{Group: "meta.k8s.io", Version: v, Kind: kind}
	}
	const pb = "application/vnd.kubernetes.protobuf"
	cases := []struct {
		accept string
		media  mediaType
		target *schema.GroupVersionKind
		err    bool
	}{
		{"", mediaJSON, nil, false},
		{"application/json", mediaJSON, nil, false},
		{"*/*", mediaJSON, nil, false},
		{"*", mediaJSON, nil, false},
		{"application/*", mediaJSON, nil, false},
		{"application/yaml", mediaYAML, nil, false},
		{pb, mediaProtobuf, nil, false},
		{pb + ", */*", mediaProtobuf, nil, false},
		{pb + ",application/json", mediaProtobuf, nil, false},
		{pb + ";stream=watch", mediaProtobuf, nil, false},
		{"application/yaml;stream=watch,application/json", mediaJSON, nil, false},
		{"application/json;stream=other,application/yaml", mediaYAML, nil, false},
		{"application/json;sv=v1", mediaJSON, nil, false},
		{"application/json;sv=v2,application/yaml", mediaYAML, nil, false},

		// q-values: higher first, then concrete before wildcard.
		{"application/json;q=0.5, application/yaml", mediaYAML, nil, false},
		{"application/json;q=0.5, " + pb + ";q=0.9", mediaProtobuf, nil, false},
		{"*/*;q=0.1, application/yaml;q=0.2", mediaYAML, nil, false},
		{"*/*, application/yaml", mediaYAML, nil, false},
		{"application/*, " + pb, mediaProtobuf, nil, false},
		{"application/json;q=1, application/yaml;q=1.0", mediaJSON, nil, false},
		// kube 1.32 does not exclude q=0: it only sorts last.
		{"application/json;q=0", mediaJSON, nil, false},
		{"application/json;q=0, application/yaml", mediaYAML, nil, false},
		{"text/html;q=0.9, application/json;q=0", mediaJSON, nil, false},
		// A malformed q is 0, as in goautoneg.
		{"application/json;q=x, application/yaml;q=0.01", mediaYAML, nil, false},

		// Alternative forms.
		{"application/json;as=Table;v=v1;g=meta.k8s.io", mediaJSON, meta("Table", "v1"), false},
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io", mediaJSON, meta("Table", "v1beta1"), false},
		{"application/yaml;as=Table;v=v1;g=meta.k8s.io", mediaYAML, meta("Table", "v1"), false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", mediaJSON, meta("Table", "v1"), false},
		{"application/json;as=Table;v=v2;g=meta.k8s.io,application/json", mediaJSON, nil, false},
		{"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", mediaJSON, meta("PartialObjectMetadataList", "v1"), false},
		{"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", mediaJSON, meta("PartialObjectMetadata", "v1beta1"), false},
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", mediaJSON, nil, false},
		// Tables have no protobuf encoding; the metadata forms do.
		{pb + ";as=Table;v=v1;g=meta.k8s.io", mediaJSON, nil, true},
		{pb + ";as=Table;v=v1;g=meta.k8s.io, application/json", mediaJSON, nil, false},
		{"*/*;as=Table;v=v1;g=meta.k8s.io", mediaJSON, meta("Table", "v1"), false},
		{pb + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
			mediaProtobuf, meta("PartialObjectMetadataList", "v1"), false},

		// Nothing acceptable.
		{"application/json;as=Table;v=v2;g=meta.k8s.io", mediaJSON, nil, true},
		{"application/json;as=Table;v=v1", mediaJSON, nil, true},
		{"application/json;v=v1", mediaJSON, nil, true},
		{"application/yaml;as=Foo", mediaJSON, nil, true},
		{"text/html", mediaJSON, nil, true},
		{"application/", mediaJSON, nil, true},
		{"application/json/x", mediaJSON, nil, true},
		{"Application/JSON", mediaJSON, nil, true}, // kube compares as sent
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		n, err := negotiate(r)
		if n.media != c.media || !reflect.DeepEqual(n.target, c.target) || (err != nil) != c.err {
			t.Errorf("Accept %q: got %v %v %v, want %v %v error=%v", c.accept, n.media, n.target, err, c.media, c.target, c.err)
		}
	}
}

func TestNegotiateStream(t *testing.T) {
	cases := []struct {
		accept string
		media  mediaType
		err    bool
	}{
		{"", mediaJSON, false},
		{"application/vnd.kubernetes.protobuf, */*", mediaProtobuf, false},
		{"application/json, */*", mediaJSON, false},
		// The first acceptable entry decides, as kube: YAML has no stream
		// encoding, and later entries are not tried.
		{"application/yaml", mediaJSON, true},
		{"application/yaml, application/json", mediaJSON, true},
		{"application/yaml;stream=watch, application/json", mediaJSON, false},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/api/v1/pods?watch=1", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		n, err := negotiateStream(r)
		if n.media != c.media || (err != nil) != c.err {
			t.Errorf("Accept %q: got %v %v, want %v error=%v", c.accept, n.media, err, c.media, c.err)
		}
	}
}

// TestErrorNegotiation: an error is answered without a transform (kube's
// DefaultEndpointRestrictions), so a Table-only Accept header gets JSON.
func TestErrorNegotiation(t *testing.T) {
	cases := []struct {
		accept string
		media  mediaType
		ok     bool
	}{
		{"application/vnd.kubernetes.protobuf", mediaProtobuf, true},
		{"application/yaml;as=Table;v=v1;g=meta.k8s.io", 0, false},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", mediaJSON, true},
		{"application/json;sv=v1", 0, false},
	}
	for _, c := range cases {
		n, ok := plainEndpoint.negotiate(c.accept)
		if ok != c.ok || (ok && n.media != c.media) {
			t.Errorf("Accept %q: got %v %v, want %v %v", c.accept, n.media, ok, c.media, c.ok)
		}
	}
}

func TestParseAcceptOrder(t *testing.T) {
	got := parseAccept("text/*;q=0.5, */*;q=0.1, application/json;q=0.5;x=y, text/html, bad, a/b/c, image/png;q=0")
	var order []string
	for _, c := range got {
		order = append(order, c.typ+"/"+c.subtype)
	}
	// goautoneg's comparison is not a strict weak order: its insertion
	// sort moves image/png;q=0 ahead of the wildcards, q=0.5 included.
	want := []string{"text/html", "application/json", "image/png", "text/*", "*/*"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if got[1].params["x"] != "y" || got[1].q != 0.5 || len(got[1].params) != 1 {
		t.Errorf("application/json clause %+v", got[1])
	}
}
