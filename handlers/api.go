package handlers

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/storage/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apipath "k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Creater serves POST to a subresource that acts rather than stores
// (pods/binding, pods/eviction).
type Creater interface {
	// New returns an empty request body object (e.g. &v1.Binding{}).
	New() runtime.Object
	// GroupVersionKind is the kind the body must be.
	GroupVersionKind() schema.GroupVersionKind
	// Create acts on namespace/name with obj and returns what to answer
	// (201).
	Create(ctx context.Context, namespace, name string, obj runtime.Object, dryRun bool) (runtime.Object, error)
}

// GroupVersionAcceptor is implemented by a Creater that also takes bodies
// of its kind in other group versions with the same schema (pods/eviction
// takes policy/v1beta1 Evictions), as kube's rest.GroupVersionAcceptor.
type GroupVersionAcceptor interface {
	AcceptsGroupVersion(gv schema.GroupVersion) bool
}

// Connecter serves GET and POST on a subresource that opens a stream to
// the pod's node (pods/exec, attach, portforward): kube's rest.Connecter.
// Connect checks the request (the pod, its container, its node, the
// upgrade) and returns what serves the stream.
type Connecter interface {
	// GroupVersionKind is the kind of its options, which discovery lists
	// (v1 PodExecOptions for pods/exec).
	GroupVersionKind() schema.GroupVersionKind
	// NewConnectOptions returns an empty value of those options, whose
	// fields the OpenAPI documents describe as query parameters.
	NewConnectOptions() runtime.Object
	Connect(ctx context.Context, namespace, name string, r *http.Request) (http.Handler, error)
}

// Getter serves GET on a subresource that reads through the object to
// something else, with options from the query (pods/log): kube's
// rest.GetterWithOptions. What Get returns is answered as an object, or
// streamed when it is a ResourceStreamer (stream.go).
type Getter interface {
	// GroupVersionKind is the kind discovery lists for the subresource
	// (kube lists v1 Pod for pods/log).
	GroupVersionKind() schema.GroupVersionKind
	// NewGetOptions returns an empty value of the options the query
	// decodes to (&v1.PodLogOptions{}), whose fields the OpenAPI documents
	// describe as query parameters.
	NewGetOptions() runtime.Object
	// Get decodes and validates the options in query and returns what to
	// answer for namespace/name.
	Get(ctx context.Context, namespace, name string, query url.Values) (runtime.Object, error)
}

// Resource is one served resource: its Store and its subresources.
type Resource struct {
	Store        *registry.Store
	Subresources map[string]Subresource
}

// Subresource is either a Store that updates part of the object (status,
// finalize), a Creater that acts on POST (binding, eviction) or a Getter
// that answers GET from elsewhere (log).
type Subresource struct {
	Store     *registry.Store
	Creater   Creater
	Getter    Getter
	Connecter Connecter
	// UpdateOnly restricts a Store subresource to PUT (namespaces/finalize).
	UpdateOnly bool
}

// verbs lists what a subresource answers, for discovery and routing.
func (s Subresource) verbs() []string {
	switch {
	case s.Creater != nil:
		return []string{"create"}
	case s.Getter != nil:
		return []string{"get"}
	case s.Connecter != nil:
		return []string{"create", "get"}
	case s.UpdateOnly:
		return []string{"update"}
	default:
		return []string{"get", "patch", "update"}
	}
}

// kind is the kind discovery lists for the subresource when it is not the
// parent's: a Creater's body kind, a Getter's kind.
func (s Subresource) kind() (schema.GroupVersionKind, bool) {
	switch {
	case s.Creater != nil:
		return s.Creater.GroupVersionKind(), true
	case s.Getter != nil:
		return s.Getter.GroupVersionKind(), true
	case s.Connecter != nil:
		return s.Connecter.GroupVersionKind(), true
	}
	return schema.GroupVersionKind{}, false
}

// subresourceNames returns the names of r's subresources, sorted, the
// order discovery lists them in.
func (r *Resource) subresourceNames() []string {
	names := make([]string, 0, len(r.Subresources))
	for name := range r.Subresources {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// discoveryKind is the kind discovery lists for the subresource name of r:
// the resource's own kind, or its Creater's or Getter's, with group and
// version only when they differ from the resource's (pods/eviction is a
// policy/v1 Eviction).
func (r *Resource) discoveryKind(name string) metav1.GroupVersionKind {
	info := r.Store.Info()
	gvk, ok := r.Subresources[name].kind()
	if !ok {
		return metav1.GroupVersionKind{Kind: info.Kind}
	}
	kind := metav1.GroupVersionKind{Kind: gvk.Kind}
	if gvk.GroupVersion() != info.GroupVersion() {
		kind.Group, kind.Version = gvk.Group, gvk.Version
	}
	return kind
}

type resourceKey struct{ group, version, resource string }

// API serves every registered resource below /api and /apis.
type API struct {
	resources  map[resourceKey]*Resource
	createOnly map[resourceKey]*CreateOnly
	// admission admits the creates of create-only resources (the stored
	// ones are admitted by their Stores).
	admission *admission.Chain
}

// SetAdmission sets the chain that admits creates of the create-only
// resources, as kube admits a TokenReview or a SubjectAccessReview. It is
// called while building the API, before it serves.
func (a *API) SetAdmission(c *admission.Chain) { a.admission = c }

// NewAPI returns an API serving the given resources.
func NewAPI(resources ...*Resource) *API {
	a := &API{resources: make(map[resourceKey]*Resource)}
	for _, r := range resources {
		info := r.Store.Info()
		a.resources[resourceKey{info.Group, info.Version, info.Resource}] = r
	}
	return a
}

// Resources returns the served resources that have a Store (not the
// create-only ones: see CreateOnly), sorted by group, version, name.
func (a *API) Resources() []*Resource {
	out := make([]*Resource, 0, len(a.resources))
	for _, r := range a.resources {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return lessInfo(out[i].Store.Info(), out[j].Store.Info()) })
	return out
}

var errNotFound = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
	Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{},
}}

var errMethodNotAllowed = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed,
	Message: "the server does not allow this method on the requested resource", Details: &metav1.StatusDetails{},
}}

// ServeHTTP dispatches a resource request to its verb.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ri, ok := parseRequestInfo(r.URL.Path)
	if !ok {
		WriteError(w, r, errNotFound)
		return
	}
	key := resourceKey{ri.Group, ri.Version, ri.Resource}
	if c := a.createOnly[key]; c != nil {
		trace.From(r.Context()).Served()
		a.serveCreateOnly(w, r, ri, c)
		return
	}
	res := a.resources[key]
	if res == nil {
		WriteError(w, r, errNotFound)
		return
	}
	if _, ok := res.Subresources[ri.Subresource]; ok || ri.Subresource == "" {
		// A resource's handler takes the request: the request metrics
		// count it (kube's count those its REST routes serve, not the
		// 404 of an unknown resource).
		trace.From(r.Context()).Served()
	}
	a.serveResource(w, r, ri, storeREST{res.Store}, res)
}

// serveResource serves a request to store, the storage of res (nil in the
// handlers' unit tests, which have no subresources), after the checks of
// the path's namespace and name.
func (a *API) serveResource(w http.ResponseWriter, r *http.Request, ri requestInfo, store restResource, res *Resource) {
	info := store.Info()
	if !info.Namespaced && ri.Namespace != "" {
		WriteError(w, r, errNotFound)
		return
	}
	if info.Namespaced && ri.Name != "" && ri.Namespace == "" {
		WriteError(w, r, errNotFound)
		return
	}
	if ri.Name != "" {
		// kube's storage key functions refuse these names before any read
		// or write: ".." and "." would name other keys, "%" is not
		// allowed in a path segment name.
		if msgs := apipath.IsValidPathSegmentName(ri.Name); len(msgs) > 0 {
			WriteError(w, r, badRequest("Name parameter invalid: %q: %s", ri.Name, strings.Join(msgs, ";")))
			return
		}
	}
	req := &request{w: w, r: r, info: ri, store: store}
	if ri.WatchPath {
		// kube serves only GET on the /watch/ paths, of a collection or
		// of one object, never of a subresource.
		switch {
		case ri.Subresource != "" || !info.HasVerb("watch"):
			WriteError(w, r, errNotFound)
		case r.Method != http.MethodGet:
			WriteError(w, r, errMethodNotAllowed)
		default:
			req.watchPath()
		}
		return
	}
	if ri.Subresource != "" {
		if res == nil {
			WriteError(w, r, errNotFound)
			return
		}
		a.serveSubresource(req, res)
		return
	}
	req.serveVerb()
}

// serveVerb dispatches a request to a resource (not a subresource) to its
// verb.
func (q *request) serveVerb() {
	w, r, ri, info := q.w, q.r, q.info, q.store.Info()
	switch {
	case r.Method == http.MethodGet && ri.Name != "":
		q.get()
	case r.Method == http.MethodGet:
		q.list()
	case r.Method == http.MethodPost && ri.Name == "":
		q.create()
	case r.Method == http.MethodPut && ri.Name != "":
		q.update()
	case r.Method == http.MethodPatch && ri.Name != "":
		q.patch()
	case r.Method == http.MethodDelete && ri.Name != "":
		q.delete()
	case r.Method == http.MethodDelete && info.HasVerb("deletecollection"):
		q.deleteCollection()
	default:
		WriteError(w, r, errMethodNotAllowed)
	}
}

func (a *API) serveSubresource(req *request, res *Resource) {
	sub, ok := res.Subresources[req.info.Subresource]
	if !ok || req.info.Name == "" {
		WriteError(req.w, req.r, errNotFound)
		return
	}
	if sub.Creater != nil {
		if req.r.Method != http.MethodPost {
			WriteError(req.w, req.r, errMethodNotAllowed)
			return
		}
		// A subresource of a stored resource (pods/binding, pods/eviction,
		// serviceaccounts/token) is admitted as a CREATE of its own
		// object, as in kube.
		req.createSubresource(sub.Creater, func(ctx context.Context, obj runtime.Object, dryRun bool) error {
			return res.Store.AdmitCreate(ctx, req.info.Subresource, sub.Creater.GroupVersionKind(), req.info.Namespace, req.info.Name, obj, dryRun)
		})
		return
	}
	if sub.Connecter != nil {
		if req.r.Method != http.MethodGet && req.r.Method != http.MethodPost {
			WriteError(req.w, req.r, errMethodNotAllowed)
			return
		}
		h, err := sub.Connecter.Connect(req.ctx(), req.info.Namespace, req.info.Name, req.r)
		if err != nil {
			req.fail(err)
			return
		}
		h.ServeHTTP(req.w, req.r)
		return
	}
	if sub.Getter != nil {
		if req.r.Method != http.MethodGet {
			WriteError(req.w, req.r, errMethodNotAllowed)
			return
		}
		req.getSubresource(sub.Getter)
		return
	}
	req.store = storeREST{sub.Store}
	req.serveStoreSubresource(sub.UpdateOnly)
}

// serveStoreSubresource dispatches a request to a subresource that updates
// part of the object (status; finalize, which is updateOnly) to its verb.
func (q *request) serveStoreSubresource(updateOnly bool) {
	switch {
	case q.r.Method == http.MethodPut:
		q.update()
	case q.r.Method == http.MethodGet && !updateOnly:
		q.get()
	case q.r.Method == http.MethodPatch && !updateOnly:
		q.patch()
	default:
		WriteError(q.w, q.r, errMethodNotAllowed)
	}
}

// NotFound answers kube's 404 for a path that names nothing.
func NotFound(w http.ResponseWriter, r *http.Request) { WriteError(w, r, errNotFound) }
