package agent

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// TestProjectedServiceAccountToken: a container sees the token, namespace
// and CA of its projected ServiceAccount volume, the token is bound to the
// pod and the API server accepts it as the ServiceAccount.
func TestProjectedServiceAccountToken(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	ctx := context.Background()
	if _, err := e.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		// The pod names its ServiceAccount explicitly: make sure it exists
		// even where no controller keeps it.
		// The ServiceAccounts controller may win the race: AlreadyExists is fine.
		if _, err := e.client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	pod := simplePod("reader", v1.RestartPolicyNever, "sh", "-c", "cat "+saDir+"/namespace; echo; cat "+saDir+"/token")
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.AutomountServiceAccountToken = ptr.To(false) // the volume below is the one
	pod.Spec.Volumes = []v1.Volume{{Name: "kube-api-access-test", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(420)),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: rootCAConfigMap}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "kube-api-access-test", MountPath: saDir, ReadOnly: true}}
	created := e.runPod(pod, "node-1")
	e.waitPod(pod, 20*time.Second, "Succeeded", phaseIs(v1.PodSucceeded))

	code, logs := e.kubeletGetText("/containerLogs/default/reader/main")
	ns, token, _ := strings.Cut(strings.TrimSpace(logs), "\n")
	if code != 200 || ns != "default" || strings.Count(token, ".") != 2 {
		t.Fatalf("container printed %d %q", code, logs)
	}
	review, err := e.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := review.Status
	if !st.Authenticated || st.User.Username != "system:serviceaccount:default:default" ||
		strings.Join(st.User.Extra["authentication.kubernetes.io/pod-uid"], "") != string(created.UID) {
		t.Errorf("token review %+v", st)
	}

	// The token works as a credential of its own.
	cfg := rest.AnonymousClientConfig(e.restConfig)
	cfg.BearerToken = token
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "system:serviceaccount:default:default" {
		t.Errorf("whoami with the pod's token: %+v %v", who, err)
	}
}

// TestProjectedCAShared: every pod's ca.crt is the cluster CA, and the
// same string: not a copy of the PEM per pod (tens of thousands of pods).
func TestProjectedCAShared(t *testing.T) {
	cfg := fastConfig(1)
	cfg.ClusterCA = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	cfg, err := cfg.complete()
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAgent(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: rootCAConfigMap}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
	}}
	var got []string
	for _, name := range []string{"a", "b"} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
		files, _, err := a.projectedFiles(context.Background(), newPodWorker(pod.UID, a.nodes[0]), pod, src)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, files["ca.crt"])
	}
	if got[0] != string(cfg.ClusterCA) || got[1] != got[0] {
		t.Fatalf("ca.crt = %q, %q; want the cluster CA", got[0], got[1])
	}
	if unsafe.StringData(got[0]) != unsafe.StringData(got[1]) {
		t.Error("each pod's ca.crt is a copy of the CA of its own")
	}
}

// TestPodTokensCached: a worker keeps one token per ServiceAccount,
// audience and lifetime, serves it until it is due for refresh, then asks
// for a new one, keeping one entry per key.
func TestPodTokensCached(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	ctx := context.Background()
	if _, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := s.Client.CoreV1().Pods("default").Create(ctx, simplePod("tokens", v1.RestartPolicyNever), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := fastConfig(1)
	cfg.Clock = clk
	cfg, err = cfg.complete()
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAgent(s.Client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := newPodWorker(pod.UID, a.nodes[0])
	api := &v1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3600)), Path: "token"}
	vault := &v1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr.To(int64(3600)), Path: "vault-token"}
	first, err := a.podToken(ctx, w, pod, api)
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.podToken(ctx, w, pod, vault)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.podToken(ctx, w, pod, api)
	if err != nil {
		t.Fatal(err)
	}
	if first.token == "" || other.token == first.token || again.token != first.token || len(w.tokens) != 2 {
		t.Fatalf("tokens: first %.20q, other audience %.20q, again %.20q; %d kept, want 2", first.token, other.token, again.token, len(w.tokens))
	}
	clk.SetTime(first.refreshAt.Add(time.Second))
	refreshed, err := a.podToken(ctx, w, pod, api)
	if err != nil {
		t.Fatal(err)
	}
	// (The new token's refresh time comes from the server's clock, not the
	// fake one, less a random jitter: not compared.)
	if refreshed.token == first.token || len(w.tokens) != 2 {
		t.Errorf("after the refresh time: same token %v, %d kept, want a new one and 2", refreshed.token == first.token, len(w.tokens))
	}
}
