package openapi

import (
	"sync"
	"testing"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/events"
	"github.com/corekube/corekube/registry/leases"
	"github.com/corekube/corekube/registry/namespaces"
	"github.com/corekube/corekube/registry/nodes"
	"github.com/corekube/corekube/registry/poddisruptionbudgets"
	"github.com/corekube/corekube/registry/pods"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// testResources mirrors the table of server/resources.go.
func testResources() []Resource {
	res := func(s registry.Strategy, subs ...Subresource) Resource {
		return Resource{Info: s.Info(), Object: s.New(), List: s.NewList(), Subresources: subs}
	}
	status := func(s registry.Strategy) Subresource {
		info := s.Info()
		return Subresource{Name: "status", Verbs: []string{"get", "patch", "update"}, Kind: info.GroupVersion().WithKind(info.Kind), Object: s.New()}
	}
	ns, po, no, pdb := namespaces.NewStrategy(), pods.NewStrategy(), nodes.NewStrategy(), poddisruptionbudgets.NewStrategy()
	podRes := res(po, status(po),
		Subresource{Name: "binding", Verbs: []string{"create"}, Kind: v1.SchemeGroupVersion.WithKind("Binding"), Object: &v1.Binding{}},
		Subresource{Name: "eviction", Verbs: []string{"create"}, Kind: policyv1.SchemeGroupVersion.WithKind("Eviction"), Object: &policyv1.Eviction{}},
		Subresource{Name: "log", Verbs: []string{"get"}, Kind: v1.SchemeGroupVersion.WithKind("Pod"), Object: &v1.Pod{},
			GetOptions: &v1.PodLogOptions{}, Produces: []string{"text/plain"}},
		Subresource{Name: "exec", Verbs: []string{"create", "get"}, Kind: v1.SchemeGroupVersion.WithKind("PodExecOptions"), Object: &v1.Pod{},
			GetOptions: &v1.PodExecOptions{}, Connect: true},
		Subresource{Name: "portforward", Verbs: []string{"create", "get"}, Kind: v1.SchemeGroupVersion.WithKind("PodPortForwardOptions"), Object: &v1.Pod{},
			GetOptions: &v1.PodPortForwardOptions{}, Connect: true},
	)
	podRes.DeleteReturnsObject = true
	return []Resource{
		res(ns, status(ns), Subresource{Name: "finalize", Verbs: []string{"update"}, Kind: v1.SchemeGroupVersion.WithKind("Namespace"), Object: &v1.Namespace{}}),
		podRes,
		res(no, status(no)),
		res(events.NewStrategy()),
		res(leases.NewStrategy()),
		res(pdb, status(pdb)),
	}
}

var (
	testDocOnce sync.Once
	testDoc     *Document
	testDocErr  error
)

// buildTestDocument builds the documents of testResources once per test
// binary.
func buildTestDocument(t testing.TB) *Document {
	t.Helper()
	testDocOnce.Do(func() { testDoc, testDocErr = Build(testResources()) })
	if testDocErr != nil {
		t.Fatalf("Build: %v", testDocErr)
	}
	return testDoc
}
