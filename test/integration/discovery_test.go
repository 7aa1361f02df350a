package integration

import (
	"encoding/json"
	"reflect"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectlDiscoveryAccept is what kubectl v1.32 sends for /api and /apis.
const kubectlDiscoveryAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
	"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"

// TestAggregatedDiscoveryMatchesKube: every resource corekube serves is
// described exactly as kube-apiserver v1.32 describes it, with the
// subresources corekube serves (kube has more: exec, proxy, ...), among
// them those listed in servedSubresources.
func TestAggregatedDiscoveryMatchesKube(t *testing.T) {
	for _, path := range []string{"/api", "/apis"} {
		resp := doRaw(t, "GET", path, nil, "Accept", kubectlDiscoveryAccept)
		if resp.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.Code, resp.Body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", path)
		} else if again := doRaw(t, "GET", path, nil, "Accept", kubectlDiscoveryAccept, "If-None-Match", etag); again.Code != 304 {
			t.Errorf("GET %s with If-None-Match: %d, want 304", path, again.Code)
		}
		var got, want apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(resp.Body, &got); err != nil {
			t.Fatal(err)
		}
		golden := "discovery-api-aggregated-v2-as-kubectl-requests"
		if path == "/apis" {
			golden = "discovery-apis-aggregated-v2-as-kubectl-requests"
		}
		if err := json.Unmarshal(goldenBody(t, golden), &want); err != nil {
			t.Fatal(err)
		}
		if got.Kind != want.Kind || got.APIVersion != want.APIVersion {
			t.Errorf("GET %s: %s %s, want %s %s", path, got.Kind, got.APIVersion, want.Kind, want.APIVersion)
		}
		kube := map[string]apidiscoveryv2.APIResourceDiscovery{}
		for _, g := range want.Items {
			for _, v := range g.Versions {
				for _, r := range v.Resources {
					kube[g.Name+"/"+v.Version+"/"+r.Resource] = r
				}
			}
		}
		served := 0
		subs := map[string]bool{}
		for _, g := range got.Items {
			for _, v := range g.Versions {
				if v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
					t.Errorf("%s/%s freshness %q", g.Name, v.Version, v.Freshness)
				}
				for _, r := range v.Resources {
					served++
					key := g.Name + "/" + v.Version + "/" + r.Resource
					k, ok := kube[key]
					if !ok {
						t.Errorf("%s: not in kube's discovery", key)
						continue
					}
					kubeSubs := map[string]apidiscoveryv2.APISubresourceDiscovery{}
					for _, s := range k.Subresources {
						kubeSubs[s.Subresource] = s
					}
					for _, s := range r.Subresources {
						subs[r.Resource+"/"+s.Subresource] = true
						if !reflect.DeepEqual(s, kubeSubs[s.Subresource]) {
							t.Errorf("%s/%s: got %+v, kube has %+v", key, s.Subresource, s, kubeSubs[s.Subresource])
						}
					}
					r.Subresources, k.Subresources = nil, nil
					if !reflect.DeepEqual(r, k) {
						t.Errorf("%s:\n got  %+v\n kube %+v", key, r, k)
					}
				}
			}
		}
		if served == 0 {
			t.Errorf("GET %s: no resources", path)
		}
		if path == "/api" {
			for _, name := range servedSubresources {
				if !subs[name] {
					t.Errorf("GET %s: no %s", path, name)
				}
			}
		}
	}
}

// servedSubresources are the core subresources corekube must list, so
// that the comparisons above cover them.
var servedSubresources = []string{"pods/status", "pods/binding", "pods/eviction", "pods/log", "nodes/status", "namespaces/status", "namespaces/finalize", "serviceaccounts/token"}

// TestLegacyDiscoveryMatchesKube does the same for the legacy documents
// kubectl falls back to.
func TestLegacyDiscoveryMatchesKube(t *testing.T) {
	for path, golden := range map[string]string{"/api/v1": "discovery-api-v1", "/apis/policy/v1": "discovery-apis-policy-v1"} {
		resp := doRaw(t, "GET", path, nil)
		var got, want metav1.APIResourceList
		if err := json.Unmarshal(resp.Body, &got); err != nil || resp.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.Code, resp.Body)
		}
		if err := json.Unmarshal(goldenBody(t, golden), &want); err != nil {
			t.Fatal(err)
		}
		kube := map[string]metav1.APIResource{}
		for _, r := range want.APIResources {
			r.StorageVersionHash = ""
			kube[r.Name] = r
		}
		served := map[string]bool{}
		for _, r := range got.APIResources {
			served[r.Name] = true
			if !reflect.DeepEqual(r, kube[r.Name]) {
				t.Errorf("%s %s:\n got  %+v\n kube %+v", path, r.Name, r, kube[r.Name])
			}
		}
		if path == "/api/v1" {
			for _, name := range servedSubresources {
				if !served[name] {
					t.Errorf("GET %s: no %s", path, name)
				}
			}
		}
		if got.GroupVersion != want.GroupVersion || got.Kind != want.Kind {
			t.Errorf("GET %s: %s %s", path, got.Kind, got.GroupVersion)
		}
	}
	var groups metav1.APIGroupList
	resp := doRaw(t, "GET", "/apis", nil)
	if err := json.Unmarshal(resp.Body, &groups); err != nil {
		t.Fatal(err)
	}
	var kubeGroups metav1.APIGroupList
	if err := json.Unmarshal(goldenBody(t, "discovery-apis"), &kubeGroups); err != nil {
		t.Fatal(err)
	}
	kg := map[string]metav1.APIGroup{}
	for _, g := range kubeGroups.Groups {
		kg[g.Name] = g
	}
	for _, g := range groups.Groups {
		if !reflect.DeepEqual(g, kg[g.Name]) {
			t.Errorf("/apis group %s:\n got  %+v\n kube %+v", g.Name, g, kg[g.Name])
		}
	}
}
