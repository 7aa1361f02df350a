package handlers

import (
	"net/http"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Discovery serves the legacy discovery documents (/api, /api/v1, /apis,
// /apis/{group}, /apis/{group}/{version}) built from the registered
// resources, so that a new resource appears without editing this file.
type Discovery struct {
	api *API
}

// NewDiscovery returns the discovery handlers of api.
func NewDiscovery(api *API) *Discovery { return &Discovery{api: api} }

// groupVersions returns the served group/versions, core first, then groups
// in name order.
func (d *Discovery) groupVersions() []metav1.GroupVersionForDiscovery {
	seen := map[string]bool{}
	var out []metav1.GroupVersionForDiscovery
	for _, r := range d.api.discoverables() {
		info := r.info
		gv := info.APIVersion()
		if info.Group == "" || seen[gv] {
			continue
		}
		seen[gv] = true
		out = append(out, metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: info.Version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupVersion < out[j].GroupVersion })
	return out
}

// Versions answers GET /api.
func (d *Discovery) Versions(w http.ResponseWriter, r *http.Request) {
	if !allowGet(w, r) {
		return
	}
	if v := aggregatedVersion(r); v != "" {
		d.serveAggregated(w, r, v, true)
		return
	}
	writeObject(w, r, http.StatusOK, &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
		},
	})
}

// Groups answers GET /apis.
func (d *Discovery) Groups(w http.ResponseWriter, r *http.Request) {
	if !allowGet(w, r) {
		return
	}
	if v := aggregatedVersion(r); v != "" {
		d.serveAggregated(w, r, v, false)
		return
	}
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, gv := range d.groupVersions() {
		g := apiGroup(gv)
		g.TypeMeta = metav1.TypeMeta{} // kube leaves it out inside the list
		list.Groups = append(list.Groups, g)
	}
	writeObject(w, r, http.StatusOK, list)
}

func apiGroup(gv metav1.GroupVersionForDiscovery) metav1.APIGroup {
	name := strings.TrimSuffix(gv.GroupVersion, "/"+gv.Version)
	return metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             name,
		Versions:         []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv,
	}
}

// Group answers GET /apis/{group}.
func (d *Discovery) Group(w http.ResponseWriter, r *http.Request, group string) {
	for _, gv := range d.groupVersions() {
		if strings.TrimSuffix(gv.GroupVersion, "/"+gv.Version) == group {
			if allowGet(w, r) {
				writeObject(w, r, http.StatusOK, ptr(apiGroup(gv)))
			}
			return
		}
	}
	WriteError(w, r, errNotFound)
}

// Resources answers GET /api/v1 and /apis/{group}/{version}.
func (d *Discovery) Resources(w http.ResponseWriter, r *http.Request, group, version string) {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}}
	list.GroupVersion = version
	if group != "" {
		list.GroupVersion = group + "/" + version
	} else {
		list.APIVersion = "" // kube's /api/v1 has none
	}
	for _, res := range d.api.discoverables() {
		info := res.info
		if info.Group != group || info.Version != version {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name:         info.Resource,
			SingularName: info.Singular,
			Namespaced:   info.Namespaced,
			Kind:         info.Kind,
			Verbs:        info.AllVerbs(),
			ShortNames:   info.ShortNames,
			Categories:   info.Categories,
		})
		for _, name := range res.subresourceNames() {
			kind := res.res.discoveryKind(name)
			entry := metav1.APIResource{Name: info.Resource + "/" + name, Namespaced: info.Namespaced,
				Group: kind.Group, Version: kind.Version, Kind: kind.Kind, Verbs: res.res.Subresources[name].verbs()}
			list.APIResources = append(list.APIResources, entry)
		}
	}
	if len(list.APIResources) == 0 {
		WriteError(w, r, errNotFound)
		return
	}
	if allowGet(w, r) {
		writeObject(w, r, http.StatusOK, list)
	}
}

func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		WriteError(w, r, errMethodNotAllowed)
		return false
	}
	return true
}

func ptr[T any](v T) *T { return &v }
