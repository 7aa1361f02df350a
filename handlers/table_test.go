package handlers

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/leases"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNegotiateTarget(t *testing.T) {
	table := func(v string) *schema.GroupVersionKind {
		return &schema.GroupVersionKind{Group: "meta.k8s.io", Version: v, Kind: "Table"}
	}
	cases := []struct {
		accept string
		media  mediaType
		target *schema.GroupVersionKind
		err    bool
	}{
		{"", mediaJSON, nil, false},
		{"application/json", mediaJSON, nil, false},
		{"*/*", mediaJSON, nil, false},
		{"application/yaml", mediaYAML, nil, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", mediaJSON, table("v1"), false},
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io", mediaJSON, table("v1beta1"), false},
		{"application/yaml;as=Table;v=v1;g=meta.k8s.io", mediaYAML, table("v1"), false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", mediaJSON, table("v1"), false},
		{"application/json;as=Table;v=v2;g=meta.k8s.io,application/json", mediaJSON, nil, false},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
			mediaJSON, &schema.GroupVersionKind{Group: "meta.k8s.io", Version: "v1", Kind: "PartialObjectMetadataList"}, false},
		{"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", mediaJSON,
			&schema.GroupVersionKind{Group: "meta.k8s.io", Version: "v1beta1", Kind: "PartialObjectMetadata"}, false},
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", mediaJSON, nil, false},
		{"application/json;as=Table;v=v2;g=meta.k8s.io", mediaJSON, nil, true},
		{"application/json;as=Table;v=v1", mediaJSON, nil, true},
		{"application/json;v=v1", mediaJSON, nil, true},
		{"application/yaml;as=Foo", mediaJSON, nil, true},
		{"application/vnd.kubernetes.protobuf", mediaJSON, nil, true},
		{"text/html", mediaJSON, nil, true},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		media, target, err := negotiateTarget(r)
		if media != c.media || !reflect.DeepEqual(target, c.target) || (err != nil) != c.err {
			t.Errorf("Accept %q: got %v %v %v, want %v %v error=%v", c.accept, media, target, err, c.media, c.target, c.err)
		}
	}
}

// plainStrategy hides a strategy's printer: the resource gets kube's
// default table.
type plainStrategy struct{ registry.Strategy }

func TestDefaultTable(t *testing.T) {
	store := registry.NewStore(nil, plainStrategy{leases.NewStrategy()}, registry.Options{})
	created := metav1.NewTime(time.Date(2026, 11, 21, 20, 16, 18, 0, time.UTC))
	tr := &transformer{
		target:  &schema.GroupVersionKind{Group: "meta.k8s.io", Version: "v1", Kind: "Table"},
		options: &metav1.TableOptions{},
		store:   store,
		now:     func() time.Time { return created.Add(time.Hour) },
	}
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []coordinationv1.Lease{}}
	out, err := tr.transform(list)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(out)
	want := `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"},"columnDefinitions":[` +
		`{"name":"Name","type":"string","format":"name","description":` + mustQuote(metav1.ObjectMeta{}.SwaggerDoc()["name"]) + `,"priority":0},` +
		`{"name":"Created At","type":"date","format":"","description":` + mustQuote(metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]) + `,"priority":0}],` +
		`"rows":null}`
	if string(data) != want {
		t.Errorf("empty list:\n got %s\nwant %s", data, want)
	}

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns", ResourceVersion: "7", CreationTimestamp: created}}
	tr.options = &metav1.TableOptions{NoHeaders: true, IncludeObject: metav1.IncludeNone}
	out, err = tr.transform(lease)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(out)
	want = `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},"columnDefinitions":null,` +
		`"rows":[{"cells":["l","2026-11-21T20:16:18Z"],"object":null}]}`
	if string(data) != want {
		t.Errorf("one lease:\n got %s\nwant %s", data, want)
	}
}

func mustQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
