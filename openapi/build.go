package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Document is every OpenAPI document of the served resources, built once,
// with the bytes the handlers serve.
type Document struct {
	v3Paths []string // under /openapi/v3: "api/v1", sorted
	v3Blobs map[string]*blob
	index   *blob
	v2      *blob
	built   time.Time
}

// V3 loads the OpenAPI 3 document served at /openapi/v3/<path> ("api",
// "api/v1", "apis", "apis/policy", "apis/policy/v1") with kin-openapi's
// loader, references resolved.
func (d *Document) V3(path string) (*openapi3.T, error) {
	data := d.V3JSON(path)
	if data == nil {
		return nil, fmt.Errorf("openapi: no document %q", path)
	}
	return openapi3.NewLoader().LoadFromData(data)
}

// V3Paths returns the paths of the OpenAPI 3 documents, sorted.
func (d *Document) V3Paths() []string { return append([]string(nil), d.v3Paths...) }

// V3JSON returns the bytes served at /openapi/v3/<path>, or nil.
func (d *Document) V3JSON(path string) []byte {
	if b := d.v3Blobs[path]; b != nil {
		return b.data
	}
	return nil
}

// V2JSON returns the Swagger 2.0 document served at /openapi/v2.
func (d *Document) V2JSON() []byte { return d.v2.data }

// builder builds the documents of one set of resources.
type builder struct {
	schemas *schemaBuilder
}

// Build builds the OpenAPI documents of resources: one OpenAPI 3 document
// per group-version and per discovery root, and the Swagger 2.0 document
// of everything, serialized as JSON. Every OpenAPI 3 document is
// validated with kin-openapi's validator. The protobuf and gzip forms are
// derived from the JSON once, by Warm or else on first use.
func Build(resources []Resource) (*Document, error) {
	b := &builder{schemas: newSchemaBuilder()}
	res := append([]Resource(nil), resources...)
	sort.SliceStable(res, func(i, j int) bool {
		x, y := res[i].Info, res[j].Info
		if x.Group != y.Group {
			return x.Group < y.Group
		}
		if x.Version != y.Version {
			return x.Version < y.Version
		}
		return x.Resource < y.Resource
	})

	// The group-versions, core first.
	var gvs []schema.GroupVersion
	byGV := map[schema.GroupVersion][]*Resource{}
	for i := range res {
		r := &res[i]
		// A create-only resource (tokenreviews) has no list.
		if r.Object == nil || (r.List == nil && (hasVerb(r.Info.AllVerbs(), "list") || hasVerb(r.Info.AllVerbs(), "deletecollection"))) {
			return nil, fmt.Errorf("openapi: %s: Object and List are required", r.Info.Resource)
		}
		r.Subresources = append([]Subresource(nil), r.Subresources...)
		sort.Slice(r.Subresources, func(i, j int) bool { return r.Subresources[i].Name < r.Subresources[j].Name })
		gv := r.Info.GroupVersion()
		if _, ok := byGV[gv]; !ok {
			gvs = append(gvs, gv)
		}
		byGV[gv] = append(byGV[gv], r)
	}

	type pending struct {
		path  string
		paths *pathsBuilder
	}
	var docs []pending

	// Discovery roots: /api/ and /apis/, then each group.
	hasCore, groups := false, []string{}
	seenGroup := map[string]bool{}
	for _, gv := range gvs {
		if gv.Group == "" {
			hasCore = true
		} else if !seenGroup[gv.Group] {
			seenGroup[gv.Group] = true
			groups = append(groups, gv.Group)
		}
	}
	if hasCore {
		p := newPathsBuilder()
		if err := b.discoveryPath(p, "/api/", "getCoreAPIVersions", "get available API versions", "core", metav1.APIVersions{}); err != nil {
			return nil, err
		}
		docs = append(docs, pending{"api", p})
	}
	if len(groups) > 0 {
		p := newPathsBuilder()
		if err := b.discoveryPath(p, "/apis/", "getAPIVersions", "get available API versions", "apis", metav1.APIGroupList{}); err != nil {
			return nil, err
		}
		docs = append(docs, pending{"apis", p})
	}
	for _, g := range groups {
		p := newPathsBuilder()
		if err := b.discoveryPath(p, "/apis/"+g+"/", "get"+groupCamel(g)+"APIGroup", "get information of a group", groupTag(g), metav1.APIGroup{}); err != nil {
			return nil, err
		}
		docs = append(docs, pending{"apis/" + g, p})
	}
	for _, gv := range gvs {
		p := newPathsBuilder()
		gvName := groupCamel(gv.Group) + upperFirst(gv.Version)
		tag := groupTag(gv.Group) + "_" + gv.Version
		if err := b.discoveryPath(p, gvPrefix(gv)+"/", "get"+gvName+"APIResources", "get available resources", tag, metav1.APIResourceList{}); err != nil {
			return nil, err
		}
		for _, r := range byGV[gv] {
			if err := b.resourcePaths(p, r); err != nil {
				return nil, err
			}
		}
		docs = append(docs, pending{gvDocPath(gv), p})
	}

	b.setKinds(res, gvs)
	b.schemas.finish()

	d := &Document{v3Blobs: map[string]*blob{}, built: time.Now().UTC().Truncate(time.Second)}
	var all []*openapi3.T
	for _, pd := range docs {
		doc := newV3Document(pd.paths.paths, b.schemas)
		if err := doc.Validate(context.Background()); err != nil {
			return nil, fmt.Errorf("openapi: document %s does not validate: %w", pd.path, err)
		}
		data, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("openapi: encode %s: %w", pd.path, err)
		}
		all = append(all, doc)
		d.v3Paths = append(d.v3Paths, pd.path)
		d.v3Blobs[pd.path] = newBlob(data, "application/json", v3Protobuf)
	}
	sort.Strings(d.v3Paths)

	index, err := v3Index(d)
	if err != nil {
		return nil, err
	}
	d.index = newBlob(index, "application/json", nil)

	v2, err := toV2(all)
	if err != nil {
		return nil, err
	}
	d.v2 = newBlob(v2, "application/json", v2Protobuf)
	return d, nil
}

// setKinds puts x-kubernetes-group-version-kind on the components of the
// served kinds and of the meta types kube registers.
func (b *builder) setKinds(res []Resource, gvs []schema.GroupVersion) {
	kinds := map[string][]schema.GroupVersionKind{}
	seen := map[string]map[schema.GroupVersionKind]bool{}
	add := func(obj any, gvk schema.GroupVersionKind) {
		name, ok := b.schemas.names[derefType(reflect.TypeOf(obj))]
		if !ok {
			return
		}
		if seen[name] == nil {
			seen[name] = map[schema.GroupVersionKind]bool{}
		}
		if !seen[name][gvk] {
			seen[name][gvk] = true
			kinds[name] = append(kinds[name], gvk)
		}
	}
	for _, r := range res {
		gv := r.Info.GroupVersion()
		add(r.Object, gv.WithKind(r.Info.Kind))
		if r.List != nil {
			add(r.List, gv.WithKind(r.Info.ListKind))
		}
		for _, sub := range r.Subresources {
			if sub.Connect {
				// Its kind is its options', documented as query
				// parameters only, as kube's.
				continue
			}
			add(sub.Object, sub.Kind)
		}
	}
	v1 := schema.GroupVersion{Version: "v1"}
	for _, t := range []struct {
		obj  any
		kind string
	}{
		{metav1.Status{}, "Status"}, {metav1.APIVersions{}, "APIVersions"}, {metav1.APIGroupList{}, "APIGroupList"},
		{metav1.APIGroup{}, "APIGroup"}, {metav1.APIResourceList{}, "APIResourceList"},
	} {
		add(t.obj, v1.WithKind(t.kind))
	}
	// DeleteOptions is registered in every group-version.
	add(metav1.DeleteOptions{}, v1.WithKind("DeleteOptions"))
	for _, gv := range gvs {
		add(metav1.DeleteOptions{}, gv.WithKind("DeleteOptions"))
	}
	// So is WatchEvent, which the deprecated /watch/ paths answer.
	add(metav1.WatchEvent{}, v1.WithKind("WatchEvent"))
	for _, gv := range gvs {
		add(metav1.WatchEvent{}, gv.WithKind("WatchEvent"))
	}
	for name, gvks := range kinds {
		b.schemas.setGVK(name, gvks)
	}
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// newV3Document wraps paths in a document with the schemas they reach.
func newV3Document(paths *openapi3.Paths, schemas *schemaBuilder) *openapi3.T {
	reached := map[string]*openapi3.SchemaRef{}
	var visit func(ref *openapi3.SchemaRef)
	visit = func(ref *openapi3.SchemaRef) {
		if ref == nil {
			return
		}
		if ref.Ref != "" {
			name := strings.TrimPrefix(ref.Ref, componentPrefix)
			if _, ok := reached[name]; ok {
				return
			}
			s := schemas.component(name)
			reached[name] = &openapi3.SchemaRef{Value: s}
			visitSchema(s, visit)
			return
		}
		visitSchema(ref.Value, visit)
	}
	for _, item := range paths.Map() {
		for _, prm := range item.Parameters {
			visit(prm.Value.Schema)
		}
		for _, op := range item.Operations() {
			for _, prm := range op.Parameters {
				visit(prm.Value.Schema)
			}
			if op.RequestBody != nil {
				for _, mt := range op.RequestBody.Value.Content {
					visit(mt.Schema)
				}
			}
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					visit(mt.Schema)
				}
			}
		}
	}
	components := openapi3.NewComponents()
	components.Schemas = openapi3.Schemas{}
	for name, ref := range reached {
		components.Schemas[name] = ref
	}
	components.SecuritySchemes = openapi3.SecuritySchemes{
		"BearerToken": &openapi3.SecuritySchemeRef{Value: &openapi3.SecurityScheme{
			Type: "apiKey", Description: "Bearer Token authentication", Name: "authorization", In: "header",
		}},
	}
	return &openapi3.T{
		OpenAPI:    "3.0.0",
		Info:       &openapi3.Info{Title: "Kubernetes", Version: "unversioned"},
		Paths:      paths,
		Components: &components,
	}
}

// visitSchema calls visit on every schema s refers to directly.
func visitSchema(s *openapi3.Schema, visit func(*openapi3.SchemaRef)) {
	if s == nil {
		return
	}
	for _, p := range s.Properties {
		visit(p)
	}
	visit(s.Items)
	visit(s.AdditionalProperties.Schema)
	for _, r := range s.AllOf {
		visit(r)
	}
	for _, r := range s.OneOf {
		visit(r)
	}
	for _, r := range s.AnyOf {
		visit(r)
	}
}
