package openapi

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Media types, in kube's order (the v2 document lists them in this order).
const (
	mediaJSON          = "application/json"
	mediaYAML          = "application/yaml"
	mediaProtobuf      = "application/vnd.kubernetes.protobuf"
	mediaJSONWatch     = "application/json;stream=watch"
	mediaProtobufWatch = "application/vnd.kubernetes.protobuf;stream=watch"
	mediaAny           = "*/*"
	mediaText          = "text/plain"
	mediaJSONPatch     = "application/json-patch+json"
	mediaMergePatch    = "application/merge-patch+json"
	mediaStrategic     = "application/strategic-merge-patch+json"
	mediaApply         = "application/apply-patch+yaml"
)

var (
	objectMedia = []string{mediaJSON, mediaYAML, mediaProtobuf}
	listMedia   = []string{mediaJSON, mediaYAML, mediaProtobuf, mediaJSONWatch, mediaProtobufWatch}
	patchMedia  = []string{mediaJSONPatch, mediaMergePatch, mediaStrategic, mediaApply}
	// mediaOrder orders media types in the v2 document's consumes/produces.
	// A stream's own media types (pods/log's text/plain) come before the
	// object ones, as kube's installer lists them.
	mediaOrder = []string{mediaAny, mediaText, mediaJSONPatch, mediaMergePatch, mediaStrategic, mediaApply,
		mediaJSON, mediaYAML, mediaProtobuf, mediaJSONWatch, mediaProtobufWatch}
)

var statusText = map[int]string{200: "OK", 201: "Created", 202: "Accepted", 401: "Unauthorized"}

// operation is one method of one path, before its parameters are split
// between the path item and the operation.
type operation struct {
	method      string
	id          string
	description string
	action      string // x-kubernetes-action; "" for discovery
	gvk         *schema.GroupVersionKind
	tag         string
	params      []*openapi3.Parameter
	body        *openapi3.RequestBodyRef
	responses   *openapi3.Responses
}

// groupCamel is kube's name of a group in operation ids: "Core" for the
// legacy group, the dot-separated words of the group without ".k8s.io"
// otherwise ("coordination.k8s.io" → "Coordination",
// "rbac.authorization.k8s.io" → "RbacAuthorization").
func groupCamel(group string) string {
	if group == "" {
		return "Core"
	}
	group = strings.TrimSuffix(group, ".k8s.io")
	var b strings.Builder
	for _, w := range strings.FieldsFunc(group, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(upperFirst(w))
	}
	return b.String()
}

// groupTag is the tag of a group's operations: "core", "coordination".
func groupTag(group string) string { return lowerFirst(groupCamel(group)) }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// article is the article kube's operation descriptions put before a kind.
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiouAEIOU", rune(kind[0])) {
		return "an"
	}
	return "a"
}

// gvPrefix is the URL prefix of a group-version: /api/v1, /apis/policy/v1.
func gvPrefix(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

// gvDocPath is the document's name under /openapi/v3: api/v1, apis/policy/v1.
func gvDocPath(gv schema.GroupVersion) string { return strings.TrimPrefix(gvPrefix(gv), "/") }

func content(ref *openapi3.SchemaRef, media []string) openapi3.Content {
	c := openapi3.Content{}
	for _, m := range media {
		c[m] = &openapi3.MediaType{Schema: ref}
	}
	return c
}

// responses answers each code with ref in media, plus 401.
func responses(ref *openapi3.SchemaRef, media []string, codes ...int) *openapi3.Responses {
	r := openapi3.NewResponsesWithCapacity(len(codes) + 1)
	for _, code := range codes {
		desc := statusText[code]
		r.Set(fmt.Sprint(code), &openapi3.ResponseRef{Value: &openapi3.Response{Description: &desc, Content: content(ref, media)}})
	}
	unauthorized := statusText[401]
	r.Set("401", &openapi3.ResponseRef{Value: &openapi3.Response{Description: &unauthorized}})
	return r
}

func requestBody(ref *openapi3.SchemaRef, media []string, required bool) *openapi3.RequestBodyRef {
	return &openapi3.RequestBodyRef{Value: &openapi3.RequestBody{Required: required, Content: content(ref, media)}}
}

// pathsBuilder collects the paths of one OpenAPI document.
type pathsBuilder struct {
	paths *openapi3.Paths
}

func newPathsBuilder() *pathsBuilder { return &pathsBuilder{paths: openapi3.NewPaths()} }

// add adds path with its operations. Parameters every operation has move
// to the path item, as kube's builder does; the rest stay on the
// operation; both sorted by name.
func (p *pathsBuilder) add(path string, ops []operation) error {
	if p.paths.Value(path) != nil {
		return fmt.Errorf("openapi: duplicate path %s", path)
	}
	type key struct{ name, in string }
	count := map[key]int{}
	for _, op := range ops {
		seen := map[key]bool{}
		for _, prm := range op.params {
			k := key{prm.Name, prm.In}
			if seen[k] {
				return fmt.Errorf("openapi: %s %s: duplicate parameter %s", op.method, path, prm.Name)
			}
			seen[k] = true
			count[k]++
		}
	}
	item := &openapi3.PathItem{}
	var common []*openapi3.Parameter
	for i, op := range ops {
		var own []*openapi3.Parameter
		for _, prm := range op.params {
			if count[key{prm.Name, prm.In}] == len(ops) {
				if i == 0 {
					common = append(common, prm)
				}
				continue
			}
			own = append(own, prm)
		}
		sortParams(own)
		o := &openapi3.Operation{
			Tags:        []string{op.tag},
			Description: op.description,
			OperationID: op.id,
			Parameters:  toRefs(own),
			RequestBody: op.body,
			Responses:   op.responses,
		}
		if op.action != "" {
			o.Extensions = map[string]any{extAction: op.action}
			if op.gvk != nil {
				o.Extensions[extGVK] = gvkMap(*op.gvk)
			}
		}
		item.SetOperation(op.method, o)
	}
	sortParams(common)
	item.Parameters = toRefs(common)
	p.paths.Set(path, item)
	return nil
}

// resourcePaths adds the paths and operations the REST handler serves for
// one resource.
func (b *builder) resourcePaths(p *pathsBuilder, r *Resource) error {
	info := r.Info
	gv := info.GroupVersion()
	gvName := groupCamel(gv.Group) + upperFirst(gv.Version)
	tag := groupTag(gv.Group) + "_" + gv.Version
	kind := info.Kind
	gvk := gv.WithKind(kind)
	scope := ""
	if info.Namespaced {
		scope = "Namespaced"
	}

	obj, err := b.schemas.componentRef(reflect.TypeOf(r.Object))
	if err != nil {
		return err
	}
	var list *openapi3.SchemaRef
	if r.List != nil {
		if list, err = b.schemas.componentRef(reflect.TypeOf(r.List)); err != nil {
			return err
		}
	}
	status, err := b.schemas.componentRef(reflect.TypeOf(metav1.Status{}))
	if err != nil {
		return err
	}
	deleteOptions, err := b.schemas.componentRef(reflect.TypeOf(metav1.DeleteOptions{}))
	if err != nil {
		return err
	}
	patch, err := b.schemas.componentRef(reflect.TypeOf(metav1.Patch{}))
	if err != nil {
		return err
	}
	deleted := status
	if r.DeleteReturnsObject {
		deleted = obj
	}

	collection := gvPrefix(gv) + "/" + info.Resource
	var scopeParams []*openapi3.Parameter
	if info.Namespaced {
		collection = gvPrefix(gv) + "/namespaces/{namespace}/" + info.Resource
		scopeParams = []*openapi3.Parameter{pathParam("namespace", namespaceDescription)}
	}
	item := collection + "/{name}"
	withParams := func(own []*openapi3.Parameter, name string) []*openapi3.Parameter {
		out := append([]*openapi3.Parameter{}, scopeParams...)
		if name != "" {
			out = append(out, pathParam("name", "name of the "+name))
		}
		out = append(out, prettyParam())
		return append(out, own...)
	}
	verbs := info.AllVerbs()
	base := func(method, verb, action, desc, suffix string, k schema.GroupVersionKind) operation {
		k2 := k
		return operation{method: method, id: verb + gvName + suffix, action: action, description: desc, gvk: &k2, tag: tag}
	}

	var collOps []operation
	if hasVerb(verbs, "list") {
		op := base("GET", "list", "list", "list or watch objects of kind "+kind, scope+kind, gvk)
		op.params = withParams(listParams, "")
		op.responses = responses(list, listMedia, 200)
		collOps = append(collOps, op)
	}
	if hasVerb(verbs, "create") {
		op := base("POST", "create", "post", "create "+article(kind)+" "+kind, scope+kind, gvk)
		op.params = withParams(createParams, "")
		op.body = requestBody(obj, []string{mediaAny}, true)
		op.responses = responses(obj, objectMedia, 200, 201, 202)
		collOps = append(collOps, op)
	}
	if hasVerb(verbs, "deletecollection") {
		op := base("DELETE", "delete", "deletecollection", "delete collection of "+kind, "Collection"+scope+kind, gvk)
		op.params = withParams(deleteCollectionParams, "")
		op.body = requestBody(deleteOptions, []string{mediaAny}, false)
		op.responses = responses(status, objectMedia, 200)
		collOps = append(collOps, op)
	}
	if len(collOps) > 0 {
		if err := p.add(collection, collOps); err != nil {
			return err
		}
	}

	var itemOps []operation
	if hasVerb(verbs, "get") {
		op := base("GET", "read", "get", "read the specified "+kind, scope+kind, gvk)
		op.params = withParams(nil, kind)
		op.responses = responses(obj, objectMedia, 200)
		itemOps = append(itemOps, op)
	}
	if hasVerb(verbs, "update") {
		op := base("PUT", "replace", "put", "replace the specified "+kind, scope+kind, gvk)
		op.params = withParams(updateParams, kind)
		op.body = requestBody(obj, []string{mediaAny}, true)
		op.responses = responses(obj, objectMedia, 200, 201)
		itemOps = append(itemOps, op)
	}
	if hasVerb(verbs, "patch") {
		op := base("PATCH", "patch", "patch", "partially update the specified "+kind, scope+kind, gvk)
		op.params = withParams(patchParams, kind)
		op.body = requestBody(patch, patchMedia, true)
		op.responses = responses(obj, objectMedia, 200, 201)
		itemOps = append(itemOps, op)
	}
	if hasVerb(verbs, "delete") {
		op := base("DELETE", "delete", "delete", "delete "+article(kind)+" "+kind, scope+kind, gvk)
		op.params = withParams(deleteParams, kind)
		op.body = requestBody(deleteOptions, []string{mediaAny}, false)
		op.responses = responses(deleted, objectMedia, 200, 202)
		itemOps = append(itemOps, op)
	}
	if len(itemOps) > 0 {
		if err := p.add(item, itemOps); err != nil {
			return err
		}
	}

	for _, sub := range r.Subresources {
		subRef, err := b.schemas.componentRef(reflect.TypeOf(sub.Object))
		if err != nil {
			return err
		}
		suffix := scope + kind + upperFirst(sub.Name)
		var ops []operation
		if sub.Connect {
			// kube's connect operations: no pretty parameter, the
			// options' kind names the path's name parameter.
			params := append([]*openapi3.Parameter{}, scopeParams...)
			params = append(params, pathParam("name", "name of the "+sub.Kind.Kind))
			params = append(params, optionParams(sub.GetOptions)...)
			str := &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf("string")}}
			for _, m := range []struct{ method, verb string }{{"GET", "Get"}, {"POST", "Post"}} {
				op := base(m.method, "connect", "connect", "connect "+m.method+" requests to "+sub.Name+" of "+kind, "", sub.Kind)
				op.id = "connect" + gvName + m.verb + suffix
				op.params = params
				op.responses = responses(str, []string{mediaAny}, 200)
				ops = append(ops, op)
			}
			if err := p.add(item+"/"+sub.Name, ops); err != nil {
				return err
			}
			continue
		}
		if hasVerb(sub.Verbs, "get") {
			op := base("GET", "read", "get", "read "+sub.Name+" of the specified "+kind, suffix, sub.Kind)
			var options []*openapi3.Parameter
			if sub.GetOptions != nil {
				options = optionParams(sub.GetOptions)
			}
			op.params = withParams(options, sub.Kind.Kind)
			op.responses = responses(subRef, objectMedia, 200)
			if len(sub.Produces) > 0 {
				str := &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf("string")}}
				op.responses = responses(str, append(append([]string{}, sub.Produces...), objectMedia...), 200)
			}
			ops = append(ops, op)
		}
		if hasVerb(sub.Verbs, "create") {
			op := base("POST", "create", "post", "create "+sub.Name+" of "+article(kind)+" "+kind, suffix, sub.Kind)
			op.params = withParams(createParams, sub.Kind.Kind)
			op.body = requestBody(subRef, []string{mediaAny}, true)
			op.responses = responses(subRef, objectMedia, 200, 201, 202)
			ops = append(ops, op)
		}
		if hasVerb(sub.Verbs, "update") {
			op := base("PUT", "replace", "put", "replace "+sub.Name+" of the specified "+kind, suffix, sub.Kind)
			op.params = withParams(updateParams, sub.Kind.Kind)
			op.body = requestBody(subRef, []string{mediaAny}, true)
			op.responses = responses(subRef, objectMedia, 200, 201)
			ops = append(ops, op)
		}
		if hasVerb(sub.Verbs, "patch") {
			op := base("PATCH", "patch", "patch", "partially update "+sub.Name+" of the specified "+kind, suffix, sub.Kind)
			op.params = withParams(patchParams, sub.Kind.Kind)
			op.body = requestBody(patch, patchMedia, true)
			op.responses = responses(subRef, objectMedia, 200, 201)
			ops = append(ops, op)
		}
		if len(ops) == 0 {
			return fmt.Errorf("openapi: %s/%s serves no verb", info.Resource, sub.Name)
		}
		if err := p.add(item+"/"+sub.Name, ops); err != nil {
			return err
		}
	}

	if hasVerb(verbs, "watch") {
		if err := b.watchPaths(p, r, base, withParams, scope); err != nil {
			return err
		}
	}

	if info.Namespaced && hasVerb(verbs, "list") {
		op := base("GET", "list", "list", "list or watch objects of kind "+kind, kind+"ForAllNamespaces", gvk)
		op.params = append([]*openapi3.Parameter{prettyParam()}, listParams...)
		op.responses = responses(list, listMedia, 200)
		if err := p.add(gvPrefix(gv)+"/"+info.Resource, []operation{op}); err != nil {
			return err
		}
	}
	return nil
}

// watchPaths adds kube's deprecated /watch/ paths of a resource (a
// collection, one object, and for a namespaced resource every namespace),
// which kube still serves and documents: the list parameters, a stream of
// WatchEvents.
func (b *builder) watchPaths(p *pathsBuilder, r *Resource, base func(method, verb, action, desc, suffix string, k schema.GroupVersionKind) operation,
	withParams func(own []*openapi3.Parameter, name string) []*openapi3.Parameter, scope string) error {
	info := r.Info
	gv := info.GroupVersion()
	kind := info.Kind
	gvk := gv.WithKind(kind)
	event, err := b.schemas.componentRef(reflect.TypeOf(metav1.WatchEvent{}))
	if err != nil {
		return err
	}
	const deprecated = ". deprecated: use the 'watch' parameter with a list operation instead"
	collection := gvPrefix(gv) + "/watch/" + info.Resource
	if info.Namespaced {
		collection = gvPrefix(gv) + "/watch/namespaces/{namespace}/" + info.Resource
	}
	list := base("GET", "watch", "watchlist", "watch individual changes to a list of "+kind+deprecated+".", scope+kind+"List", gvk)
	list.params = withParams(listParams, "")
	list.responses = responses(event, listMedia, 200)
	if err := p.add(collection, []operation{list}); err != nil {
		return err
	}
	one := base("GET", "watch", "watch", "watch changes to an object of kind "+kind+deprecated+", filtered to a single item with the 'fieldSelector' parameter.", scope+kind, gvk)
	one.params = withParams(listParams, kind)
	one.responses = responses(event, listMedia, 200)
	if err := p.add(collection+"/{name}", []operation{one}); err != nil {
		return err
	}
	if !info.Namespaced {
		return nil
	}
	all := base("GET", "watch", "watchlist", "watch individual changes to a list of "+kind+deprecated+".", kind+"ListForAllNamespaces", gvk)
	all.params = append([]*openapi3.Parameter{prettyParam()}, listParams...)
	all.responses = responses(event, listMedia, 200)
	return p.add(gvPrefix(gv)+"/watch/"+info.Resource, []operation{all})
}

// discoveryPath adds the GET of a discovery document (/api/, /apis/,
// /apis/<group>/, /api/v1/, /apis/<group>/<version>/), as kube lists it.
func (b *builder) discoveryPath(p *pathsBuilder, path, id, description, tag string, typ any) error {
	ref, err := b.schemas.componentRef(reflect.TypeOf(typ))
	if err != nil {
		return err
	}
	return p.add(path, []operation{{
		method: "GET", id: id, description: description, tag: tag,
		responses: responses(ref, objectMedia, 200),
	}})
}
