package openapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
)

const definitionPrefix = "#/definitions/"

// toV2 converts OpenAPI 3 documents to one Swagger 2.0 document, the way
// kube serves /openapi/v2: definitions instead of components, a body
// parameter instead of requestBody, consumes/produces lists, and a plain
// $ref with description beside it where OpenAPI 3 wraps it in allOf.
func toV2(docs []*openapi3.T) ([]byte, error) {
	paths := map[string]any{}
	definitions := map[string]any{}
	for _, doc := range docs {
		for name, ref := range doc.Components.Schemas {
			if _, ok := definitions[name]; !ok {
				definitions[name] = v2Schema(&openapi3.SchemaRef{Value: ref.Value})
			}
		}
		for path, item := range doc.Paths.Map() {
			if _, ok := paths[path]; ok {
				return nil, fmt.Errorf("openapi: path %s in two documents", path)
			}
			v, err := v2PathItem(item)
			if err != nil {
				return nil, fmt.Errorf("openapi: %s: %w", path, err)
			}
			paths[path] = v
		}
	}
	return json.Marshal(map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": "Kubernetes", "version": "unversioned"},
		"paths":       paths,
		"definitions": definitions,
		"securityDefinitions": map[string]any{
			"BearerToken": map[string]any{"type": "apiKey", "name": "authorization", "in": "header", "description": "Bearer Token authentication"},
		},
		"security": []any{map[string]any{"BearerToken": []any{}}},
	})
}

func v2Ref(ref string) string {
	return definitionPrefix + strings.TrimPrefix(ref, componentPrefix)
}

// v2Schema converts the subset of OpenAPI 3 schemas the schema builder
// makes.
func v2Schema(ref *openapi3.SchemaRef) map[string]any {
	if ref == nil {
		return nil
	}
	if ref.Ref != "" {
		return map[string]any{"$ref": v2Ref(ref.Ref)}
	}
	s := ref.Value
	m := map[string]any{}
	for k, v := range s.Extensions {
		m[k] = v
	}
	switch {
	case len(s.AllOf) == 1 && s.AllOf[0].Ref != "" && s.Type.IsEmpty():
		m["$ref"] = v2Ref(s.AllOf[0].Ref)
	case len(s.OneOf) > 0 && s.Type.IsEmpty():
		// int-or-string, quantity: a string in Swagger 2.0
		m["type"] = "string"
	case !s.Type.IsEmpty():
		m["type"] = s.Type.Slice()[0]
	}
	if s.Format != "" {
		m["format"] = s.Format
	}
	if s.Description != "" {
		m["description"] = s.Description
	}
	if s.Default != nil {
		m["default"] = s.Default
	}
	if len(s.Enum) > 0 {
		m["enum"] = s.Enum
	}
	if len(s.Required) > 0 {
		m["required"] = s.Required
	}
	if len(s.Properties) > 0 {
		props := map[string]any{}
		for name, p := range s.Properties {
			props[name] = v2Schema(p)
		}
		m["properties"] = props
	}
	if s.Items != nil {
		m["items"] = v2Schema(s.Items)
	}
	if s.AdditionalProperties.Schema != nil {
		m["additionalProperties"] = v2Schema(s.AdditionalProperties.Schema)
	}
	return m
}

func v2Parameter(p *openapi3.Parameter) map[string]any {
	m := map[string]any{"name": p.Name, "in": p.In, "uniqueItems": true}
	if p.Description != "" {
		m["description"] = p.Description
	}
	if p.Required {
		m["required"] = true
	}
	if p.Schema != nil && p.Schema.Value != nil && !p.Schema.Value.Type.IsEmpty() {
		m["type"] = p.Schema.Value.Type.Slice()[0]
	}
	return m
}

func v2Parameters(params openapi3.Parameters) []any {
	out := []any{}
	for _, p := range params {
		out = append(out, v2Parameter(p.Value))
	}
	return out
}

// orderedMedia returns the media types of c in kube's order.
func orderedMedia(keys []string) []string {
	rank := func(m string) int {
		for i, o := range mediaOrder {
			if o == m {
				return i
			}
		}
		return len(mediaOrder)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if rank(keys[i]) != rank(keys[j]) {
			return rank(keys[i]) < rank(keys[j])
		}
		return keys[i] < keys[j]
	})
	return keys
}

func v2PathItem(item *openapi3.PathItem) (map[string]any, error) {
	out := map[string]any{}
	if len(item.Parameters) > 0 {
		out["parameters"] = v2Parameters(item.Parameters)
	}
	for method, op := range item.Operations() {
		o := map[string]any{
			"description": op.Description,
			"operationId": op.OperationID,
			"schemes":     []string{"https"},
			"tags":        op.Tags,
		}
		for k, v := range op.Extensions {
			o[k] = v
		}
		params := v2Parameters(op.Parameters)
		consumes := []string{mediaAny}
		if op.RequestBody != nil {
			body := op.RequestBody.Value
			var keys []string
			for k := range body.Content {
				keys = append(keys, k)
			}
			consumes = orderedMedia(keys)
			bp := map[string]any{"name": "body", "in": "body", "schema": v2Schema(body.Content[consumes[0]].Schema)}
			if body.Required {
				bp["required"] = true
			}
			params = append(params, bp)
			sort.SliceStable(params, func(i, j int) bool {
				return params[i].(map[string]any)["name"].(string) < params[j].(map[string]any)["name"].(string)
			})
		}
		o["consumes"] = consumes
		if len(params) > 0 {
			o["parameters"] = params
		}
		produces := map[string]bool{}
		resps := map[string]any{}
		for code, r := range op.Responses.Map() {
			resp := map[string]any{}
			if r.Value.Description != nil {
				resp["description"] = *r.Value.Description
			}
			for media, mt := range r.Value.Content {
				produces[media] = true
				resp["schema"] = v2Schema(mt.Schema)
			}
			resps[code] = resp
		}
		var keys []string
		for k := range produces {
			keys = append(keys, k)
		}
		o["produces"] = orderedMedia(keys)
		o["responses"] = resps
		out[strings.ToLower(method)] = o
	}
	return out, nil
}

// v2Protobuf converts the Swagger 2.0 JSON to gnostic's protobuf form,
// as kube serves it for kubectl.
func v2Protobuf(data []byte) ([]byte, error) {
	doc, err := openapi_v2.ParseDocument(data)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(doc)
}

// v3Protobuf converts an OpenAPI 3 document's JSON to gnostic's protobuf
// form.
func v3Protobuf(data []byte) ([]byte, error) {
	doc, err := openapi_v3.ParseDocument(data)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(doc)
}
