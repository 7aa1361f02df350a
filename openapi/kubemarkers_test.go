package openapi

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/authentication"
	"github.com/corekube/corekube/registry/authorization"
	"github.com/corekube/corekube/registry/certificatesigningrequests"
	"github.com/corekube/corekube/registry/clusterrolebindings"
	"github.com/corekube/corekube/registry/clusterroles"
	flowcontrolregistry "github.com/corekube/corekube/registry/flowcontrol"
	"github.com/corekube/corekube/registry/rolebindings"
	"github.com/corekube/corekube/registry/roles"
	"github.com/corekube/corekube/registry/serviceaccounts"
	"github.com/corekube/corekube/registry/webhookconfigurations"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// kubeMarkers is testdata/kube-markers.json (see internal/kubemarkers):
// the markers of k8s.io/api and apimachinery the models must reproduce.
type kubeMarkers struct {
	Provenance  string            `json:"provenance"`
	Modules     map[string]string `json:"modules"`
	Definitions map[string]struct {
		MapType string                     `json:"mapType"`
		Fields  map[string]kubeFieldMarker `json:"fields"`
	} `json:"definitions"`
}

type kubeFieldMarker struct {
	ListType    string          `json:"listType"`
	ListMapKeys []string        `json:"listMapKeys"`
	MapType     string          `json:"mapType"`
	Default     json.RawMessage `json:"default"`
	Required    bool            `json:"required"`
	OmitEmpty   bool            `json:"omitEmpty"`
	Pointer     bool            `json:"pointer"`
}

func readKubeMarkers(t *testing.T) *kubeMarkers {
	t.Helper()
	data, err := os.ReadFile("testdata/kube-markers.json")
	if err != nil {
		t.Fatal(err)
	}
	var m kubeMarkers
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Definitions) == 0 || !strings.Contains(m.Provenance, "k8s.io/api v") {
		t.Fatalf("testdata/kube-markers.json: no definitions or provenance")
	}
	// The markers are those of the k8s.io modules built in: after an
	// upgrade, go generate ./openapi and fix what the tests then find.
	// (A test binary's build info lists no dependencies: read go.mod.)
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for mod, version := range m.Modules {
		if !regexp.MustCompile(`(?m)^\s*(require\s+)?` + regexp.QuoteMeta(mod) + `\s+` + regexp.QuoteMeta(version) + `\s*$`).Match(gomod) {
			t.Fatalf("testdata/kube-markers.json is from %s %s, go.mod requires another version: go generate ./openapi", mod, version)
		}
	}
	return &m
}

// servedResources mirrors every resource of server/resources.go (its
// newAPI table, the serviceaccounts/token subresource and the create-only
// reviews), which this package cannot import: what the server builds its
// type converter from.
func servedResources() []Resource {
	res := func(s registry.Strategy, subs ...Subresource) Resource {
		return Resource{Info: s.Info(), Object: s.New(), List: s.NewList(), Subresources: subs}
	}
	status := func(s registry.Strategy, name string) Subresource {
		info := s.Info()
		return Subresource{Name: name, Verbs: []string{"get", "patch", "update"}, Kind: info.GroupVersion().WithKind(info.Kind), Object: s.New()}
	}
	sa, csr := serviceaccounts.NewStrategy(), certificatesigningrequests.NewStrategy()
	out := testResources()
	out = append(out,
		res(sa, Subresource{Name: "token", Verbs: []string{"create"},
			Kind: authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"), Object: &authenticationv1.TokenRequest{}}),
		res(roles.NewStrategy()),
		res(clusterroles.NewStrategy()),
		res(rolebindings.NewStrategy()),
		res(clusterrolebindings.NewStrategy()),
		res(webhookconfigurations.NewMutatingStrategy()),
		res(webhookconfigurations.NewValidatingStrategy()),
		res(csr, status(csr, "status"), status(csr, "approval")),
	)
	fs, pl := flowcontrolregistry.NewFlowSchemaStrategy(), flowcontrolregistry.NewPriorityLevelStrategy()
	out = append(out, res(fs, status(fs, "status")), res(pl, status(pl, "status")))
	for _, c := range []struct {
		info registry.ResourceInfo
		obj  Resource
	}{
		{authentication.TokenReviewInfo(), Resource{Object: &authenticationv1.TokenReview{}}},
		{authentication.SelfSubjectReviewInfo(), Resource{Object: &authenticationv1.SelfSubjectReview{}}},
		{authorization.LocalSubjectAccessReviewInfo(), Resource{Object: &authorizationv1.LocalSubjectAccessReview{}}},
		{authorization.SelfSubjectAccessReviewInfo(), Resource{Object: &authorizationv1.SelfSubjectAccessReview{}}},
		{authorization.SelfSubjectRulesReviewInfo(), Resource{Object: &authorizationv1.SelfSubjectRulesReview{}}},
		{authorization.SubjectAccessReviewInfo(), Resource{Object: &authorizationv1.SubjectAccessReview{}}},
	} {
		c.obj.Info = c.info
		out = append(out, c.obj)
	}
	return out
}

// servedGroupVersionKinds are the served resources and every other kind of
// their group-versions (client-go's scheme): the tables are kept true for
// the kinds corekube may serve next too, and for the discovery and Status
// types the documents publish beside the models.
func servedGroupVersionKinds(t *testing.T) []Resource {
	out := servedResources()
	seen := map[schema.GroupVersion]bool{}
	for _, r := range out {
		gv := r.Info.GroupVersion()
		if seen[gv] {
			continue
		}
		seen[gv] = true
		for kind := range scheme.Scheme.KnownTypes(gv) {
			if kind == "List" {
				continue // core/v1 List: a metav1.List, not published
			}
			obj, err := scheme.Scheme.New(gv.WithKind(kind))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, Resource{Info: registry.ResourceInfo{Group: gv.Group, Version: gv.Version, Kind: kind}, Object: obj})
		}
	}
	return out
}

// ownForm are the definitions with their own OpenAPI form (a string, an
// int-or-string): no fields, no markers.
var ownForm = map[string]bool{
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       true,
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  true,
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   true,
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": true,
}

// TestModelsMatchKubeMarkers compares every definition the served kinds
// reach with kube's markers: x-kubernetes-list-type, -list-map-keys and
// -map-type (of lists, maps and structs), +default values and required
// fields. They decide how server-side apply merges and what it accepts.
func TestModelsMatchKubeMarkers(t *testing.T) {
	kube := readKubeMarkers(t)
	models, err := Models(servedGroupVersionKinds(t))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := models[name]
		if ownForm[name] {
			continue
		}
		k, ok := kube.Definitions[name]
		if !ok {
			t.Errorf("%s: not in kube's types", name)
			continue
		}
		if got := stringExt(m.Extensions, extMapType); got != k.MapType {
			t.Errorf("%s: x-kubernetes-map-type %q, kube %q", name, got, k.MapType)
		}
		for field := range k.Fields {
			if _, ok := m.Properties[field]; !ok {
				t.Errorf("%s.%s: not in the model", name, field)
			}
		}
		var required []string
		for field, kf := range k.Fields {
			if kf.Required {
				required = append(required, field)
			}
		}
		sort.Strings(required)
		gotRequired := append([]string(nil), m.Required...)
		sort.Strings(gotRequired)
		if strings.Join(gotRequired, ",") != strings.Join(required, ",") {
			t.Errorf("%s: required %v, kube %v", name, gotRequired, required)
		}
		for field, p := range m.Properties {
			kf, ok := k.Fields[field]
			if !ok {
				t.Errorf("%s.%s: not in kube's type", name, field)
				continue
			}
			compareField(t, name+"."+field, &p, kf)
		}
	}
}

func compareField(t *testing.T, key string, p *spec.Schema, kf kubeFieldMarker) {
	t.Helper()
	if got := stringExt(p.Extensions, extListType); got != kf.ListType {
		t.Errorf("%s: x-kubernetes-list-type %q, kube %q", key, got, kf.ListType)
	}
	var keys []string
	if v, ok := p.Extensions[extListMapKeys].([]any); ok {
		for _, k := range v {
			keys = append(keys, k.(string))
		}
	}
	if !reflect.DeepEqual(keys, kf.ListMapKeys) {
		t.Errorf("%s: x-kubernetes-list-map-keys %q, kube %q", key, keys, kf.ListMapKeys)
	}
	if got := stringExt(p.Extensions, extMapType); got != kf.MapType {
		t.Errorf("%s: x-kubernetes-map-type %q, kube %q", key, got, kf.MapType)
	}
	var want any
	if kf.Default != nil {
		if err := json.Unmarshal(kf.Default, &want); err != nil {
			t.Fatal(err)
		}
	}
	scalar := p.Ref.String() == "" && len(p.Type) == 1 && p.Format != "byte"
	if scalar && want == nil && !kf.OmitEmpty && !kf.Pointer {
		// kube's enforced default: a non-pointer scalar that is not
		// omitempty defaults to its zero value (a key of a list map
		// without +default, like a container's name, is one).
		want = map[string]any{"string": "", "integer": float64(0), "number": float64(0), "boolean": false}[p.Type[0]]
	}
	if scalar || kf.Default != nil {
		got := p.Default
		if n, ok := got.(int64); ok {
			got = float64(n)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: default %#v, kube %#v", key, p.Default, want)
		}
	}
}

func stringExt(ext spec.Extensions, key string) string {
	s, _ := ext[key].(string)
	return s
}

// TestOverrideTablesNameKubeFields keeps the override tables free of
// entries that name nothing, and each fieldDefaults entry a +default of
// kube's.
func TestOverrideTablesNameKubeFields(t *testing.T) {
	kube := readKubeMarkers(t)
	field := func(key string) (kubeFieldMarker, bool) {
		i := strings.LastIndex(key, ".")
		d, ok := kube.Definitions[key[:i]]
		if !ok {
			return kubeFieldMarker{}, false
		}
		f, ok := d.Fields[key[i+1:]]
		return f, ok
	}
	for key := range listTypeOverrides {
		if _, ok := field(key); !ok {
			t.Errorf("listTypeOverrides: %s is no field of kube's", key)
		}
	}
	for key, v := range fieldMapTypes {
		if f, ok := field(key); !ok || f.MapType != v {
			t.Errorf("fieldMapTypes: %s is no %s map or struct of kube's", key, v)
		}
	}
	for key := range optionalFields {
		if f, ok := field(key); !ok || f.Required {
			t.Errorf("optionalFields: %s is no optional field of kube's", key)
		}
	}
	for name := range atomicStructs {
		if kube.Definitions[name].MapType != "atomic" {
			t.Errorf("atomicStructs: %s is no atomic struct of kube's", name)
		}
	}
	for key, v := range fieldDefaults {
		f, ok := field(key)
		var want any
		if ok && f.Default != nil {
			if err := json.Unmarshal(f.Default, &want); err != nil {
				t.Fatal(err)
			}
		}
		if !ok || f.Default == nil || !reflect.DeepEqual(v, want) {
			t.Errorf("fieldDefaults: %s = %#v, kube's +default %s", key, v, f.Default)
		}
	}
}
