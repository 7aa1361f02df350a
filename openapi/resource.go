package openapi

import (
	"github.com/corekube/corekube/registry"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one served resource as the OpenAPI documents describe it.
type Resource struct {
	// Info names the resource and lists its verbs.
	Info registry.ResourceInfo
	// Object and List are empty values of the resource's Go types
	// (&v1.Pod{}, &v1.PodList{}); their schemas are generated from them.
	// List is nil for a create-only resource (tokenreviews), whose Verbs
	// are ["create"].
	Object runtime.Object
	List   runtime.Object
	// DeleteReturnsObject is true when DELETE answers the object (pods)
	// rather than a Status.
	DeleteReturnsObject bool
	// Subresources are served below /{name}/<Name>.
	Subresources []Subresource
}

// Subresource is one subresource of a Resource.
type Subresource struct {
	// Name is the last path segment: "status", "binding", "eviction".
	Name string
	// Verbs are the kube verbs served: "get", "update", "patch" for a
	// status-like subresource, "update" alone for namespaces/finalize,
	// "create" for pods/binding and pods/eviction.
	Verbs []string
	// Kind is the kind of the request and response bodies: the parent's
	// kind for status, v1 Binding for pods/binding, policy/v1 Eviction for
	// pods/eviction.
	Kind schema.GroupVersionKind
	// Object is an empty value of Kind's Go type.
	Object runtime.Object
	// Connect marks a subresource that opens a stream (pods/exec, attach,
	// portforward: kube's rest.Connecter): documented as kube documents
	// one, a GET and a POST with action "connect", GetOptions' fields as
	// query parameters, and a string answer of any media type.
	Connect bool
	// GetOptions, for a GET that takes options in its query (pods/log: an
	// empty v1.PodLogOptions), has its fields documented as query
	// parameters.
	GetOptions runtime.Object
	// Produces are the media types a GET answers in besides the encoded
	// objects' (pods/log: text/plain). When set, the GET answers a stream
	// rather than Object, documented as a string, as kube documents a
	// ProducesObject of "".
	Produces []string
}

func hasVerb(verbs []string, verb string) bool {
	for _, v := range verbs {
		if v == verb {
			return true
		}
	}
	return false
}
