package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNewRequestInfo(t *testing.T) {
	tests := []struct {
		method, target string
		want           RequestInfo
	}{
		{"GET", "/healthz", RequestInfo{Path: "/healthz", Verb: "get"}},
		{"GET", "/api", RequestInfo{Path: "/api", Verb: "get"}},
		{"GET", "/api/v1", RequestInfo{Path: "/api/v1", Verb: "get"}},
		{"GET", "/apis/apps/v1", RequestInfo{Path: "/apis/apps/v1", Verb: "get", APIPrefix: "apis"}}, // as kube
		{"POST", "/version", RequestInfo{Path: "/version", Verb: "post"}},
		{"GET", "/api/v1/namespaces/ns/pods", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Parts: []string{"pods"}}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Parts: []string{"pods"}}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=1&fieldSelector=metadata.name%3Dp1", RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p1", Parts: []string{"pods"}, FieldSelector: "metadata.name=p1"}},
		// The selectors of list, watch and deletecollection, for
		// AuthorizeWithSelectors; a get's are ignored.
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&labelSelector=app%21%3Dx", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "pods", Parts: []string{"pods"}, FieldSelector: "spec.nodeName=n1", LabelSelector: "app!=x"}},
		{"DELETE", "/api/v1/namespaces/ns/pods?labelSelector=a", RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Parts: []string{"pods"}, LabelSelector: "a"}},
		{"GET", "/api/v1/nodes/n1?fieldSelector=spec.nodeName%3Dn1", RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Resource: "nodes", Name: "n1", Parts: []string{"nodes", "n1"}}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Parts: []string{"pods"}}},
		{"GET", "/api/v1/pods", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "pods", Parts: []string{"pods"}}},
		{"HEAD", "/api/v1/namespaces/ns/pods/p1", RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p1", Parts: []string{"pods", "p1"}}},
		{"GET", "/api/v1/namespaces/ns/pods/p1/log", RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p1", Subresource: "log", Parts: []string{"pods", "p1", "log"}}},
		{"POST", "/api/v1/namespaces/ns/pods/p1/eviction", RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p1", Subresource: "eviction", Parts: []string{"pods", "p1", "eviction"}}},
		{"PUT", "/api/v1/namespaces/ns/status", RequestInfo{IsResourceRequest: true, Verb: "update", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns", Subresource: "status", Parts: []string{"namespaces", "ns", "status"}}},
		{"GET", "/api/v1/namespaces/ns", RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns", Parts: []string{"namespaces", "ns"}}},
		{"GET", "/api/v1/namespaces", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "namespaces", Parts: []string{"namespaces"}}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", RequestInfo{IsResourceRequest: true, Verb: "patch", APIPrefix: "apis", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments", Name: "d", Subresource: "scale", Parts: []string{"deployments", "d", "scale"}}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p1", RequestInfo{IsResourceRequest: true, Verb: "delete", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p1", Parts: []string{"pods", "p1"}}},
		{"DELETE", "/api/v1/namespaces/ns/pods", RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Parts: []string{"pods"}}},
		{"DELETE", "/api/v1/namespaces/ns/pods/%2F", RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Parts: []string{"pods"}}},
		{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "apis", APIGroup: "rbac.authorization.k8s.io", APIVersion: "v1", Resource: "clusterroles", Parts: []string{"clusterroles"}}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			got := NewRequestInfo(r)
			want := tt.want
			want.Path = r.URL.Path
			if got.IsResourceRequest != want.IsResourceRequest || got.Path != want.Path || got.Verb != want.Verb ||
				got.APIPrefix != want.APIPrefix || got.APIGroup != want.APIGroup || got.APIVersion != want.APIVersion ||
				got.Namespace != want.Namespace || got.Resource != want.Resource || got.Subresource != want.Subresource ||
				got.Name != want.Name || got.FieldSelector != want.FieldSelector || got.LabelSelector != want.LabelSelector || strings.Join(got.Parts, "/") != strings.Join(want.Parts, "/") {
				t.Errorf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}
