package handlers

import (
	"context"
	"net/http"
	"sort"

	"github.com/corekube/corekube/admission"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

// CreateOnly is a resource that is never stored: a POST to its collection
// asks a question or asks for an action, and the answer is the posted
// object with its status filled in (kube's storage that is only a
// rest.Creater: tokenreviews, selfsubjectreviews, subjectaccessreviews).
// Discovery lists it with the one verb create; nothing can be read, listed
// or watched, so it has no Store and no watch cache.
type CreateOnly struct {
	// Info names the resource as discovery shows it; its Verbs are
	// ["create"] whatever they say.
	Info registry.ResourceInfo
	// Creater answers the POST. Its Create gets the URL's namespace (for a
	// namespaced resource, as localsubjectaccessreviews) and no name.
	Creater Creater
}

// AddCreateOnly serves the create-only resources rs beside the stored
// ones. It is called while building the API, before it serves.
func (a *API) AddCreateOnly(rs ...*CreateOnly) {
	if a.createOnly == nil {
		a.createOnly = map[resourceKey]*CreateOnly{}
	}
	for _, r := range rs {
		r.Info.Verbs = []string{"create"}
		a.createOnly[resourceKey{r.Info.Group, r.Info.Version, r.Info.Resource}] = r
	}
}

// CreateOnly returns the create-only resources, sorted as Resources.
func (a *API) CreateOnly() []*CreateOnly {
	out := make([]*CreateOnly, 0, len(a.createOnly))
	for _, r := range a.createOnly {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return lessInfo(out[i].Info, out[j].Info) })
	return out
}

// serveCreateOnly answers a request for a create-only resource: POST to
// the collection, nothing else (kube has no route for an item: 404; other
// methods on the collection: 405).
func (a *API) serveCreateOnly(w http.ResponseWriter, r *http.Request, ri requestInfo, res *CreateOnly) {
	switch {
	case ri.Name != "" || res.Info.Namespaced != (ri.Namespace != ""):
		WriteError(w, r, errNotFound)
	case r.Method != http.MethodPost:
		WriteError(w, r, errMethodNotAllowed)
	default:
		req := &request{w: w, r: r, info: ri}
		req.createSubresource(res.Creater, func(ctx context.Context, obj runtime.Object, dryRun bool) error {
			return a.admitCreateOnly(ctx, res, ri, obj, dryRun)
		})
	}
}

// admitCreateOnly runs the admission chain on the create of a create-only
// resource, named as its object names itself (usually not at all).
func (a *API) admitCreateOnly(ctx context.Context, res *CreateOnly, ri requestInfo, obj runtime.Object, dryRun bool) error {
	if a.admission == nil {
		return nil
	}
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetName()
	}
	opts := &metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return a.admission.Admit(ctx, &admission.Attributes{
		Operation: admission.Create,
		Kind:      res.Creater.GroupVersionKind(),
		Resource:  res.Info.GroupVersion().WithResource(res.Info.Resource),
		Namespace: ri.Namespace,
		Name:      name,
		Object:    obj,
		DryRun:    dryRun,
		Options:   opts,
	})
}

func lessInfo(x, y registry.ResourceInfo) bool {
	if x.Group != y.Group {
		return x.Group < y.Group
	}
	if x.Version != y.Version {
		return x.Version < y.Version
	}
	return x.Resource < y.Resource
}

// discoverable is one resource as discovery lists it: a stored Resource
// (res) or a create-only one (res nil).
type discoverable struct {
	info registry.ResourceInfo
	res  *Resource
}

// discoverables returns every served resource, stored or create-only,
// sorted by group, version and name.
func (a *API) discoverables() []discoverable {
	out := make([]discoverable, 0, len(a.resources)+len(a.createOnly))
	for _, r := range a.resources {
		out = append(out, discoverable{info: r.Store.Info(), res: r})
	}
	for _, r := range a.createOnly {
		out = append(out, discoverable{info: r.Info})
	}
	sort.Slice(out, func(i, j int) bool { return lessInfo(out[i].info, out[j].info) })
	return out
}

// subresourceNames returns the names of d's subresources in discovery's
// order (none for a create-only resource).
func (d discoverable) subresourceNames() []string {
	if d.res == nil {
		return nil
	}
	return d.res.subresourceNames()
}

// Resource returns the stored resource group/version/resource, or nil:
// for wiring that adds to a resource once the API is built (the
// serviceaccounts/token subresource needs the pod and node stores).
func (a *API) Resource(group, version, resource string) *Resource {
	return a.resources[resourceKey{group, version, resource}]
}
