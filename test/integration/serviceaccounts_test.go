package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const saMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// waitDefaultServiceAccount waits for the ServiceAccounts controller to
// give namespace ns its default ServiceAccount, and returns it.
func waitDefaultServiceAccount(t testing.TB, ns string) *v1.ServiceAccount {
	t.Helper()
	var sa *v1.ServiceAccount
	eventually(t, 10*time.Second, "the default ServiceAccount of "+ns, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		sa = got
		return err == nil, err
	})
	return sa
}

// tokenVolume returns the pod's kube-api-access volume, nil without one.
func tokenVolume(pod *v1.Pod) *v1.Volume {
	for i, vol := range pod.Spec.Volumes {
		if strings.HasPrefix(vol.Name, "kube-api-access-") {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// tokenMounts returns, per container (init containers first), the name of
// the volume mounted at the token path ("" for none).
func tokenMounts(pod *v1.Pod) []string {
	var out []string
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		name := ""
		for _, m := range c.VolumeMounts {
			if m.MountPath == saMountPath {
				name = m.Name
				if !m.ReadOnly && strings.HasPrefix(m.Name, "kube-api-access-") {
					name += " (read-write!)"
				}
			}
		}
		out = append(out, name)
	}
	return out
}

func TestNewNamespaceGetsDefaultServiceAccount(t *testing.T) {
	ns := newNamespace(t)
	sa := waitDefaultServiceAccount(t, ns)
	if sa.AutomountServiceAccountToken != nil || len(sa.Secrets) != 0 || sa.UID == "" {
		t.Errorf("default ServiceAccount %+v", sa)
	}
}

func TestDeletedDefaultServiceAccountIsRecreated(t *testing.T) {
	ns := newNamespace(t)
	old := waitDefaultServiceAccount(t, ns)
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(t.Context(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new default ServiceAccount", func(ctx context.Context) (bool, error) {
		sa, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && sa.UID != old.UID, err
	})

	// Another ServiceAccount deleted stays deleted.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(t.Context(), "bot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once the controller has handled a later event (a new namespace),
	// it has seen that deletion too.
	waitDefaultServiceAccount(t, newNamespace(t))
	if _, err := cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), "bot", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ServiceAccount bot after its deletion: %v, want NotFound", err)
	}
}

// TestTerminatingNamespaceGetsNoServiceAccount: a namespace being deleted
// (this server runs no namespace controller: it stays Terminating) is
// not given its default ServiceAccount back.
func TestTerminatingNamespaceGetsNoServiceAccount(t *testing.T) {
	ns := newNamespace(t)
	waitDefaultServiceAccount(t, ns)
	if err := cs.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(t.Context(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	later := newNamespace(t)
	waitDefaultServiceAccount(t, later)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("default ServiceAccount of a terminating namespace: %v, want NotFound", err)
	}
}

func TestServiceAccountAdmissionDefaults(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	pod := newPod("two", nil)
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox"}}
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "d", Image: "busybox"})
	out, err := pods.Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.ServiceAccountName != "default" || out.Spec.DeprecatedServiceAccount != "default" {
		t.Errorf("serviceAccountName %q serviceAccount %q, want default", out.Spec.ServiceAccountName, out.Spec.DeprecatedServiceAccount)
	}
	vol := tokenVolume(out)
	if vol == nil || len(out.Spec.Volumes) != 1 || len(vol.Name) != len("kube-api-access-")+5 {
		t.Fatalf("volumes %+v, want one kube-api-access-xxxxx", out.Spec.Volumes)
	}
	for i, m := range tokenMounts(out) {
		if m != vol.Name {
			t.Errorf("container %d mounts %q at the token path, want %s read-only", i, m, vol.Name)
		}
	}
	src := vol.Projected
	if src == nil || len(src.Sources) != 3 || src.Sources[0].ServiceAccountToken == nil || *src.Sources[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
		src.Sources[1].ConfigMap == nil || src.Sources[1].ConfigMap.Name != "kube-root-ca.crt" || src.Sources[2].DownwardAPI == nil {
		t.Errorf("token volume %+v", vol)
	}

	// The deprecated field alone names the ServiceAccount too.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := newPod("deprecated", nil)
	dep.Spec.DeprecatedServiceAccount = "old"
	out, err = pods.Create(t.Context(), dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.ServiceAccountName != "old" || out.Spec.DeprecatedServiceAccount != "old" {
		t.Errorf("serviceAccountName %q serviceAccount %q, want old", out.Spec.ServiceAccountName, out.Spec.DeprecatedServiceAccount)
	}

	// The ServiceAccount's image pull secrets go to pods that have none.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "puller"},
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "registry"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pull := newPod("pull", nil)
	pull.Spec.ServiceAccountName = "puller"
	if out, err = pods.Create(t.Context(), pull, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.ImagePullSecrets) != 1 || out.Spec.ImagePullSecrets[0].Name != "registry" {
		t.Errorf("imagePullSecrets %+v, want the ServiceAccount's", out.Spec.ImagePullSecrets)
	}

	// Updates keep the ServiceAccount and its volume: serviceAccountName
	// cannot change.
	out.Spec.ServiceAccountName = "default"
	_, err = pods.Update(t.Context(), out, metav1.UpdateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
}

func TestServiceAccountAdmissionAutomount(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	no, yes := false, true
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"},
		AutomountServiceAccountToken: &no}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		sa     string
		pod    *bool
		volume bool
	}{
		{"pod-opts-out", "", &no, false},
		{"sa-opts-out", "quiet", nil, false},
		{"pod-overrides-sa", "quiet", &yes, true},
		{"pod-opts-in", "", &yes, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := newPod(c.name, nil)
			pod.Spec.ServiceAccountName = c.sa
			pod.Spec.AutomountServiceAccountToken = c.pod
			out, err := pods.Create(t.Context(), pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := tokenVolume(out) != nil; got != c.volume || (len(out.Spec.Volumes) > 0) != c.volume {
				t.Errorf("volumes %+v, want a token volume: %v", out.Spec.Volumes, c.volume)
			}
			if got := tokenMounts(out)[0] != ""; got != c.volume {
				t.Errorf("mounts %+v, want a token mount: %v", out.Spec.Containers[0].VolumeMounts, c.volume)
			}
		})
	}
}

// TestServiceAccountAdmissionExistingMounts: a container that mounts
// something at the token path keeps it; a pod's own kube-api-access volume
// is the one mounted.
func TestServiceAccountAdmissionExistingMounts(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	mine := v1.Volume{Name: "mine", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}

	all := newPod("all-mounted", nil)
	all.Spec.Volumes = []v1.Volume{mine}
	all.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mine", MountPath: saMountPath}}
	out, err := pods.Create(t.Context(), all, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.Volumes) != 1 || len(out.Spec.Containers[0].VolumeMounts) != 1 || tokenMounts(out)[0] != "mine" {
		t.Errorf("pod that mounts the path itself: volumes %+v mounts %+v", out.Spec.Volumes, out.Spec.Containers[0].VolumeMounts)
	}

	some := newPod("some-mounted", nil)
	some.Spec.Volumes = []v1.Volume{mine}
	some.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mine", MountPath: saMountPath}}
	some.Spec.Containers = append(some.Spec.Containers, v1.Container{Name: "other", Image: "busybox"})
	if out, err = pods.Create(t.Context(), some, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vol := tokenVolume(out)
	if vol == nil || len(out.Spec.Volumes) != 2 || out.Spec.Volumes[0].Name != "mine" {
		t.Fatalf("volumes %+v, want mine then a kube-api-access one", out.Spec.Volumes)
	}
	if m := tokenMounts(out); m[0] != "mine" || m[1] != vol.Name {
		t.Errorf("token path mounts %v, want [mine %s]", m, vol.Name)
	}

	own := newPod("own-volume", nil)
	own.Spec.Volumes = []v1.Volume{{Name: "kube-api-access-mine1", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	if out, err = pods.Create(t.Context(), own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.Volumes) != 1 || tokenMounts(out)[0] != "kube-api-access-mine1" {
		t.Errorf("pod with its own kube-api-access volume: volumes %+v mounts %v", out.Spec.Volumes, tokenMounts(out))
	}
}

func TestServiceAccountAdmissionMirrorPods(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	mirror := func(name string) *v1.Pod {
		p := newPod(name, nil)
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
		p.Spec.NodeName = "node-x"
		return p
	}
	out, err := pods.Create(t.Context(), mirror("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.ServiceAccountName != "" || len(out.Spec.Volumes) != 0 || len(out.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("mirror pod was changed: %+v", out.Spec)
	}
	withSA := mirror("with-sa")
	withSA.Spec.ServiceAccountName = "default"
	_, err = pods.Create(t.Context(), withSA, metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, `pods "with-sa" is forbidden: a mirror pod may not reference service accounts`)
	withSecret := mirror("with-secret")
	withSecret.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}}}
	_, err = pods.Create(t.Context(), withSecret, metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, `pods "with-secret" is forbidden: a mirror pod may not reference secrets`)
}

func TestServiceAccountAdmissionMountableSecrets(t *testing.T) {
	ns := newNamespace(t)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "strict", Annotations: map[string]string{"kubernetes.io/enforce-mountable-secrets": "true"}},
		Secrets:    []v1.ObjectReference{{Name: "allowed"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := newPod("secretive", nil)
	pod.Spec.ServiceAccountName = "strict"
	pod.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "other"}}}}
	_, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`pods "secretive" is forbidden: volume with secret.secretName="other" is not allowed because service account strict does not reference that secret`)
	pod.Spec.Volumes[0].Secret.SecretName = "allowed"
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("pod with an allowed secret: %v", err)
	}
}

// TestGoldenMissingServiceAccount: a pod naming a ServiceAccount that does
// not exist is refused at once with kube's 403.
func TestGoldenMissingServiceAccount(t *testing.T) {
	goldNamespace(t)
	start := time.Now()
	r := doRaw(t, "POST", "/api/v1/namespaces/gold/pods",
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nosa"},"spec":{"serviceAccountName":"no-such-sa","containers":[{"name":"c","image":"busybox"}]}}`))
	checkGolden(t, r, "403-create-pod-missing-serviceAccountName")
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v: only the default ServiceAccount is waited for", d)
	}
}

// TestGoldenNoDefaultServiceAccount runs a server of its own without the
// ServiceAccounts controller: a pod in a namespace without its default
// ServiceAccount waits a little for it (admission's unit tests show a
// ServiceAccount appearing meanwhile admits it), then is refused with
// kube's 403.
func TestGoldenNoDefaultServiceAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := testserver.NewConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c.ShutdownTimeout = 2 * time.Second
	s, err := server.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Logf("shutdown: %v", err)
		}
	}()
	client, err := kubernetes.NewForConfig(testserver.ClientConfig(s.URL()))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "nosa-1795292151" // the recording's namespace, named in the message
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nosa"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	start := time.Now()
	checkGolden(t, doRawURL(t, s.URL(), "POST", "/api/v1/namespaces/"+ns+"/pods", body), "403-create-pod-no-default-serviceaccount")
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("refusal after %v, want after the ~2s wait for the default ServiceAccount", d)
	}

}
