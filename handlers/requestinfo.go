package handlers

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RequestInfo is what a request asks for, as kube's RequestInfoFactory
// parses it: the attributes authorization decides on. A request below
// /api/v1/ or /apis/{group}/{version}/ is a resource request; anything
// else is a non-resource request with the method as verb.
type RequestInfo struct {
	// IsResourceRequest is false for /healthz, /version, discovery roots and
	// the like.
	IsResourceRequest bool
	// Path is the request's URL path.
	Path string
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection for a resource request (proxy for /proxy/ paths),
	// the lower-case method for a non-resource request.
	Verb string

	APIPrefix   string // "api" or "apis"
	APIGroup    string
	APIVersion  string
	Namespace   string
	Resource    string
	Subresource string
	// Name is the object's name: from the path, or for list and watch
	// from a metadata.name field selector, as kube does so that RBAC's
	// resourceNames can allow watching one object.
	Name string
	// Parts are the path's parts from the resource on.
	Parts []string
	// FieldSelector and LabelSelector are the raw selectors of a list,
	// watch or deletecollection (empty otherwise), as kube's RequestInfo
	// keeps them for AuthorizeWithSelectors.
	FieldSelector string
	LabelSelector string
}

// namespaceSubresources are the subresources of the namespace resource
// itself; anything else after /namespaces/{ns}/ is a namespaced resource.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// NewRequestInfo parses r as kube's RequestInfoFactory.NewRequestInfo: the
// verb from the method (GET without a name is list or watch, DELETE
// without a name is deletecollection, including a path whose name is
// empty, like /pods/%2F), the resource, subresource, namespace and name
// from the path.
func NewRequestInfo(r *http.Request) *RequestInfo {
	ri := &RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return ri
	}
	ri.APIPrefix, parts = parts[0], parts[1:]
	if ri.APIPrefix == "apis" {
		if len(parts) < 3 {
			return ri
		}
		ri.APIGroup, parts = parts[0], parts[1:]
	}
	ri.IsResourceRequest = true
	ri.APIVersion, parts = parts[0], parts[1:]

	if parts[0] == "watch" || parts[0] == "proxy" {
		// kube's /{specialVerb}/... forms.
		if len(parts) < 2 {
			// kube answers such paths with an error; nothing serves them.
			ri.IsResourceRequest = false
			return ri
		}
		ri.Verb, parts = parts[0], parts[1:]
	} else {
		switch r.Method {
		case http.MethodPost:
			ri.Verb = "create"
		case http.MethodGet, http.MethodHead:
			ri.Verb = "get"
		case http.MethodPut:
			ri.Verb = "update"
		case http.MethodPatch:
			ri.Verb = "patch"
		case http.MethodDelete:
			ri.Verb = "delete"
		default:
			ri.Verb = ""
		}
	}
	ri.Namespace, ri.Parts = locate(parts)
	switch n := len(ri.Parts); {
	case n >= 3 && ri.Verb != "proxy":
		ri.Subresource = ri.Parts[2]
		fallthrough
	case n >= 2:
		ri.Name = ri.Parts[1]
		fallthrough
	case n >= 1:
		ri.Resource = ri.Parts[0]
	}
	if ri.Name == "" && ri.Verb == "get" {
		ri.Verb = "list"
		opts := metainternalversion.ListOptions{}
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
			// As kube: a query that does not parse is a list, or a watch
			// when it says so.
			opts = metainternalversion.ListOptions{}
			if v := r.URL.Query()["watch"]; len(v) > 0 && v[0] != "false" && v[0] != "0" {
				opts.Watch = true
			}
		}
		if opts.Watch {
			ri.Verb = "watch"
		}
		if opts.FieldSelector != nil {
			if name, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
				ri.Name = name
			}
		}
	}
	if ri.Name == "" && ri.Verb == "delete" {
		ri.Verb = "deletecollection"
	}
	switch ri.Verb {
	case "list", "watch", "deletecollection":
		q := r.URL.Query()
		if v := q["fieldSelector"]; len(v) > 0 {
			ri.FieldSelector = v[0]
		}
		if v := q["labelSelector"]; len(v) > 0 {
			ri.LabelSelector = v[0]
		}
	}
	return ri
}

// locate splits the parts after the version into the namespace and the
// parts from the resource on: /namespaces/{ns}/{resource}/... is a
// namespaced resource, /namespaces/{name}[/status|/finalize] the namespace
// itself.
func locate(parts []string) (namespace string, rest []string) {
	if parts[0] == "namespaces" && len(parts) > 1 {
		namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	return namespace, parts
}

type requestInfoKey struct{}

// RequestInfoContextKey is the key WithRequestInfo stores under, for a
// server whose own context node carries the RequestInfo (saving a
// context.WithValue on every request).
var RequestInfoContextKey any = requestInfoKey{}

// WithRequestInfo returns ctx carrying ri, which the server's filter
// computes once per request.
func WithRequestInfo(ctx context.Context, ri *RequestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, ri)
}

// RequestInfoFrom returns the RequestInfo ctx carries.
func RequestInfoFrom(ctx context.Context) (*RequestInfo, bool) {
	ri, ok := ctx.Value(requestInfoKey{}).(*RequestInfo)
	return ri, ok && ri != nil
}

// requestInfo is what the API dispatches on: the resource URL's parts
// (unlike RequestInfo, the name only ever from the path).
type requestInfo struct {
	Group, Version string
	Namespace      string
	Resource       string
	Name           string
	Subresource    string
	// WatchPath: the path was kube's deprecated /watch/ form
	// (/api/v1/watch/namespaces/{ns}/pods[/{name}]), a watch whatever
	// the query says.
	WatchPath bool
}

// parseRequestInfo parses paths below /api/v1/ or /apis/{group}/{version}/.
// ok is false when the path names no resource.
func parseRequestInfo(path string) (ri requestInfo, ok bool) {
	parts := splitPath(path)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		ri.Version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		ri.Group, ri.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return ri, false
	}
	if parts[0] == "watch" {
		if len(parts) < 2 {
			return ri, false
		}
		ri.WatchPath, parts = true, parts[1:]
	}
	ri.Namespace, parts = locate(parts)
	if len(parts) > 3 {
		return ri, false
	}
	ri.Resource = parts[0]
	if len(parts) > 1 {
		ri.Name = parts[1]
	}
	if len(parts) > 2 {
		ri.Subresource = parts[2]
	}
	if ri.Resource == "namespaces" {
		// /api/v1/namespaces/{name}: the namespace is the object's name.
		ri.Namespace = ""
	}
	return ri, true
}

func splitPath(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

// LongRunning is kube's BasicLongRunningRequestCheck: watches, proxies and
// the streaming subresources of pods run for as long as they need. The
// request timeout and API Priority and Fairness both ask it (the latter
// still queues a watch until it is set up).
func (ri *RequestInfo) LongRunning() bool {
	switch ri.Verb {
	case "watch", "proxy":
		return true
	}
	if !ri.IsResourceRequest {
		return false
	}
	switch ri.Subresource {
	case "attach", "exec", "proxy", "log", "portforward":
		return true
	}
	return false
}
