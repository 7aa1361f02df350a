package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/getkin/kin-openapi/openapi3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Models returns the Swagger 2.0 definitions of the served kinds, as
// /openapi/v2 publishes them (same names, types, x-kubernetes-list-type,
// -list-map-keys, -map-type, -patch-* and -group-version-kind), without
// descriptions and paths: what server-side apply needs to know about the
// types, and only that. It is much cheaper than Build: the documents are
// not assembled, validated or serialized.
func Models(resources []Resource) (map[string]*spec.Schema, error) {
	b := &builder{schemas: newSchemaBuilder()}
	var gvs []schema.GroupVersion
	seenGV := map[schema.GroupVersion]bool{}
	for _, r := range resources {
		for _, obj := range []any{r.Object, r.List} {
			if obj == nil {
				continue
			}
			if _, err := b.schemas.componentRef(reflect.TypeOf(obj)); err != nil {
				return nil, fmt.Errorf("openapi: %s: %w", r.Info.Resource, err)
			}
		}
		for _, sub := range r.Subresources {
			if sub.Object == nil {
				continue
			}
			if _, err := b.schemas.componentRef(reflect.TypeOf(sub.Object)); err != nil {
				return nil, fmt.Errorf("openapi: %s/%s: %w", r.Info.Resource, sub.Name, err)
			}
		}
		if gv := r.Info.GroupVersion(); !seenGV[gv] {
			seenGV[gv] = true
			gvs = append(gvs, gv)
		}
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
	b.setKinds(resources, gvs)
	b.schemas.finish()

	defs := make(map[string]any, len(b.schemas.components))
	for name, s := range b.schemas.components {
		defs[name] = withoutDescriptions(v2Schema(&openapi3.SchemaRef{Value: s}))
	}
	// spec.Schema reads its own JSON form (refs, extensions) only through
	// its UnmarshalJSON: one round trip gives the models exactly as a
	// client of /openapi/v2 would read them.
	data, err := json.Marshal(defs)
	if err != nil {
		return nil, fmt.Errorf("openapi: encode models: %w", err)
	}
	var models map[string]*spec.Schema
	if err := json.Unmarshal(data, &models); err != nil {
		return nil, fmt.Errorf("openapi: decode models: %w", err)
	}
	return models, nil
}

// TypeConverter returns structured-merge-diff's view of the served kinds,
// from Models: what server-side apply and managedFields tracking merge and
// compare objects with, as kube-apiserver builds it from its own OpenAPI
// definitions.
func TypeConverter(resources []Resource) (managedfields.TypeConverter, error) {
	models, err := Models(resources)
	if err != nil {
		return nil, err
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, fmt.Errorf("openapi: type converter: %w", err)
	}
	return tc, nil
}

// withoutDescriptions drops the descriptions of a v2 schema and of the
// schemas inside it: the models are for machines.
func withoutDescriptions(m map[string]any) map[string]any {
	delete(m, "description")
	if props, ok := m["properties"].(map[string]any); ok {
		for _, p := range props {
			if pm, ok := p.(map[string]any); ok {
				withoutDescriptions(pm)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := m[k].(map[string]any); ok {
			withoutDescriptions(sub)
		}
	}
	return m
}
