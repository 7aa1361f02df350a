package openapi

import (
	"reflect"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const prettyDescription = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."

const namespaceDescription = "object name and auth scope, such as for teams and projects"

// The query parameters of each kind of request, generated from the options
// types the way kube's installer does, with their SwaggerDoc descriptions.
var (
	listParams   = optionParams(metav1.ListOptions{})
	createParams = optionParams(metav1.CreateOptions{})
	updateParams = optionParams(metav1.UpdateOptions{})
	patchParams  = optionParams(metav1.PatchOptions{})
	deleteParams = optionParams(metav1.DeleteOptions{})
	// deletecollection takes the list options except the watch ones, and
	// the delete options.
	deleteCollectionParams = func() []*openapi3.Parameter {
		var out []*openapi3.Parameter
		for _, p := range listParams {
			if p.Name != "watch" && p.Name != "allowWatchBookmarks" {
				out = append(out, p)
			}
		}
		return append(out, deleteParams...)
	}()
)

// optionParams returns one query parameter per JSON field of an options
// struct or pointer to one (skipping TypeMeta and structured fields such
// as preconditions or PodLogOptions' sinceTime, as kube does), described
// by its SwaggerDoc when it has one.
func optionParams(options any) []*openapi3.Parameter {
	var docs map[string]string
	if d, ok := options.(swaggerDocer); ok {
		docs = d.SwaggerDoc()
	}
	t := derefType(reflect.TypeOf(options))
	var out []*openapi3.Parameter
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		var typ string
		switch ft.Kind() {
		case reflect.Bool:
			typ = "boolean"
		case reflect.Int, reflect.Int32, reflect.Int64:
			typ = "integer"
		case reflect.String:
			typ = "string"
		case reflect.Slice:
			// dryRun: kube documents the repeated parameter as a string;
			// portforward's ports as an integer.
			switch ft.Elem().Kind() {
			case reflect.String:
				typ = "string"
			case reflect.Int, reflect.Int32, reflect.Int64:
				typ = "integer"
			default:
				continue
			}
		default:
			continue
		}
		out = append(out, queryParam(name, docs[name], typ))
	}
	return out
}

func queryParam(name, description, typ string) *openapi3.Parameter {
	return &openapi3.Parameter{
		Name:        name,
		In:          openapi3.ParameterInQuery,
		Description: description,
		Schema:      &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf(typ), UniqueItems: true}},
	}
}

func pathParam(name, description string) *openapi3.Parameter {
	return &openapi3.Parameter{
		Name:        name,
		In:          openapi3.ParameterInPath,
		Description: description,
		Required:    true,
		Schema:      &openapi3.SchemaRef{Value: &openapi3.Schema{Type: typesOf("string"), UniqueItems: true}},
	}
}

func prettyParam() *openapi3.Parameter { return queryParam("pretty", prettyDescription, "string") }

func sortParams(params []*openapi3.Parameter) {
	sort.SliceStable(params, func(i, j int) bool {
		if params[i].Name != params[j].Name {
			return params[i].Name < params[j].Name
		}
		return params[i].In < params[j].In
	})
}

func toRefs(params []*openapi3.Parameter) openapi3.Parameters {
	if len(params) == 0 {
		return nil
	}
	out := make(openapi3.Parameters, len(params))
	for i, p := range params {
		out[i] = &openapi3.ParameterRef{Value: p}
	}
	return out
}
