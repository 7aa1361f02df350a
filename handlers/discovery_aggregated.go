package handlers

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// aggregatedVersion returns the apidiscovery.k8s.io version ("v2" or
// "v2beta1") of the aggregated discovery form the Accept header asks for
// first, or "" when the client prefers (or only takes) the legacy form.
func aggregatedVersion(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != "application/json" {
			continue
		}
		if params["as"] == "" {
			return ""
		}
		if params["as"] == "APIGroupDiscoveryList" && params["g"] == "apidiscovery.k8s.io" &&
			(params["v"] == "v2" || params["v"] == "v2beta1") {
			return params["v"]
		}
	}
	return ""
}

// serveAggregated answers /api (core) or /apis (groups) in the aggregated
// discovery form: every group, version and resource in one document, with
// an ETag so that clients revalidate cheaply.
func (d *Discovery) serveAggregated(w http.ResponseWriter, r *http.Request, version string, core bool) {
	list := apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/" + version},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	groups := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	var order []string
	for _, res := range d.api.discoverables() {
		info := res.info
		if core != (info.Group == "") {
			continue
		}
		g := groups[info.Group]
		if g == nil {
			g = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: info.Group}}
			groups[info.Group] = g
			order = append(order, info.Group)
		}
		if len(g.Versions) == 0 || g.Versions[len(g.Versions)-1].Version != info.Version {
			g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: info.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		}
		v := &g.Versions[len(g.Versions)-1]
		v.Resources = append(v.Resources, resourceDiscovery(res))
	}
	sort.Strings(order)
	for _, name := range order {
		list.Items = append(list.Items, *groups[name])
	}
	data, err := json.Marshal(list)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	etag := fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(data)))
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "public")
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v="+version+";as=APIGroupDiscoveryList")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(data, '\n'))
}

func resourceDiscovery(res discoverable) apidiscoveryv2.APIResourceDiscovery {
	info := res.info
	scope := apidiscoveryv2.ScopeCluster
	if info.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	out := apidiscoveryv2.APIResourceDiscovery{
		Resource:         info.Resource,
		ResponseKind:     &metav1.GroupVersionKind{Kind: info.Kind},
		Scope:            scope,
		SingularResource: info.Singular,
		Verbs:            info.AllVerbs(),
		ShortNames:       info.ShortNames,
		Categories:       info.Categories,
	}
	for _, name := range res.subresourceNames() {
		kind := res.res.discoveryKind(name)
		out.Subresources = append(out.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: name, ResponseKind: &kind, Verbs: res.res.Subresources[name].verbs(),
		})
	}
	return out
}
