package serviceaccounts_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/nodes"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/registry/serviceaccounts"
	"github.com/corekube/corekube/storage/memory"
	"github.com/corekube/corekube/storage/storagetest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// tokenEnv is a TokenREST over stores whose watch caches run (cached) or
// do not (uncached: every lookup misses the cache) on one storage.
type tokenEnv struct {
	st               *storagetest.ReadCounter
	sas, podStore    *registry.Store
	nodeStore        *registry.Store
	cached, uncached *serviceaccounts.TokenREST
}

func newTokenEnv(t *testing.T) *tokenEnv {
	t.Helper()
	mem := memory.New()
	t.Cleanup(mem.Close)
	st := &storagetest.ReadCounter{Interface: mem}
	opts := registry.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := serviceaccount.NewIssuer("https://kubernetes.default.svc", key)
	if err != nil {
		t.Fatal(err)
	}
	tokenOpts := serviceaccounts.TokenOptions{Issuer: issuer, APIAudiences: []string{"https://kubernetes.default.svc"}}
	stores := func() (sas, ps, ns *registry.Store) {
		return registry.NewStore(st, serviceaccounts.NewStrategy(), opts), registry.NewStore(st, pods.NewStrategy(), opts),
			registry.NewStore(st, nodes.NewStrategy(), opts)
	}
	sas, ps, ns := stores()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []*registry.Store{sas, ps, ns} {
		wg.Go(func() { _ = s.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !sas.CacheReady() || !ps.CacheReady() || !ns.CacheReady() {
		if time.Now().After(deadline) {
			t.Fatal("watch caches not ready after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	usas, ups, uns := stores() // never Run
	return &tokenEnv{st: st, sas: sas, podStore: ps, nodeStore: ns,
		cached:   serviceaccounts.NewTokenREST(sas, ps, ns, tokenOpts),
		uncached: serviceaccounts.NewTokenREST(usas, ups, uns, tokenOpts)}
}

// create stores obj through s and waits until s's watch cache has it (a
// GET at its resourceVersion does).
func create[T interface {
	*v1.Pod | *v1.ServiceAccount | *v1.Node
	metav1.Object
	runtime.Object
}](t *testing.T, s *registry.Store, obj T) T {
	t.Helper()
	out, err := s.Create(t.Context(), obj.GetNamespace(), obj, registry.CreateOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	created := out.(T)
	if _, err := s.Get(t.Context(), created.GetNamespace(), created.GetName(), &metav1.GetOptions{ResourceVersion: created.GetResourceVersion()}); err != nil {
		t.Fatal(err)
	}
	return created
}

func tokenRequest(podName string, uid types.UID) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: podName, UID: uid}}}
}

// TestTokenRequestFromCache: the kubelet's TokenRequest for a pod it runs
// (bound, named by uid) reads nothing from etcd when the watch caches have
// the ServiceAccount and the pod; whatever the cache cannot answer for
// sure is read from storage, with the same answers.
func TestTokenRequestFromCache(t *testing.T) {
	env := newTokenEnv(t)
	ctx := t.Context()
	create(t, env.nodeStore, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	sa := create(t, env.sas, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})
	newPod := func(name, node string) *v1.Pod {
		return create(t, env.podStore, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1.PodSpec{NodeName: node, ServiceAccountName: "default", Containers: []v1.Container{{Name: "c", Image: "img"}}}})
	}
	bound, pending := newPod("bound", "node-1"), newPod("pending", "")

	issue := func(rest *serviceaccounts.TokenREST, req *authenticationv1.TokenRequest) (reads int64, err error) {
		t.Helper()
		env.st.Gets.Store(0)
		out, err := rest.Create(ctx, "ns", "default", req, false)
		if err == nil && out.(*authenticationv1.TokenRequest).Status.Token == "" {
			t.Fatal("no token in the answer")
		}
		return env.st.Gets.Load(), err
	}
	for _, tc := range []struct {
		name      string
		rest      *serviceaccounts.TokenREST
		req       *authenticationv1.TokenRequest
		wantReads int64
		wantErr   func(error) bool
	}{
		{"kubelet's request, from the caches", env.cached, tokenRequest("bound", bound.UID), 0, nil},
		{"no uid named: the pod from etcd", env.cached, tokenRequest("bound", ""), 1, nil},
		{"not bound yet: the pod from etcd", env.cached, tokenRequest("pending", pending.UID), 1, nil},
		{"another uid: etcd decides, 409", env.cached, tokenRequest("bound", "other-uid"), 1, apierrors.IsConflict},
		{"no such pod: etcd decides, 404", env.cached, tokenRequest("missing", "some-uid"), 1, apierrors.IsNotFound},
		{"caches not ready: all from etcd", env.uncached, tokenRequest("bound", bound.UID), 3, nil},
		{"no bound object: the ServiceAccount from the cache", env.cached, &authenticationv1.TokenRequest{}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads, err := issue(tc.rest, tc.req)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("TokenRequest: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("TokenRequest: got error %v", err)
			}
			if reads != tc.wantReads {
				t.Errorf("storage reads: %d, want %d", reads, tc.wantReads)
			}
		})
	}

	// The ServiceAccount goes: once the cache has the delete (a LIST at
	// the delete's resourceVersion waits for it), the lookup misses and
	// reads etcd, so the answer is kube's 404, never a token for it.
	gone, _, err := env.sas.Delete(ctx, "ns", sa.Name, &metav1.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.sas.List(ctx, "ns", &metainternalversion.ListOptions{ResourceVersion: gone.(*v1.ServiceAccount).ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
		t.Fatal(err)
	}
	_, err = env.cached.Create(ctx, "ns", "default", tokenRequest("bound", bound.UID), false)
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "serviceaccounts") {
		t.Fatalf("TokenRequest for a deleted ServiceAccount: %v, want its 404", err)
	}
}

// TestCachedMeta: Store.CachedMeta answers the cached pod's metadata (what
// a pod-bound token is checked against on every request), misses what the
// cache does not have, and reads nothing from storage.
func TestCachedMeta(t *testing.T) {
	env := newTokenEnv(t)
	create(t, env.nodeStore, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	pod := create(t, env.podStore, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"app": "a"}},
		Spec: v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "c", Image: "img"}}}})
	// A graceful delete sets deletionTimestamp; wait for the cache to have it.
	out, _, err := env.podStore.Delete(t.Context(), "ns", "p", &metav1.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	terminating := out.(*v1.Pod)
	if _, err := env.podStore.Get(t.Context(), "ns", "p", &metav1.GetOptions{ResourceVersion: terminating.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	env.st.Gets.Store(0)
	m, ok := env.podStore.CachedMeta("ns", "p")
	if !ok {
		t.Fatal("CachedMeta missed a cached pod")
	}
	if m.UID != pod.UID || m.Name != "p" || m.Labels["app"] != "a" || m.DeletionTimestamp == nil ||
		!m.DeletionTimestamp.Equal(terminating.DeletionTimestamp) || m.ResourceVersion != terminating.ResourceVersion {
		t.Errorf("CachedMeta = uid %s name %s labels %v deletionTimestamp %v resourceVersion %s; want the terminating pod's (%s, %v, %s)",
			m.UID, m.Name, m.Labels, m.DeletionTimestamp, m.ResourceVersion, pod.UID, terminating.DeletionTimestamp, terminating.ResourceVersion)
	}
	if _, ok := env.podStore.CachedMeta("ns", "missing"); ok {
		t.Error("CachedMeta found a pod that does not exist")
	}
	if n := env.st.Gets.Load(); n != 0 {
		t.Errorf("CachedMeta read storage %d times", n)
	}
}
