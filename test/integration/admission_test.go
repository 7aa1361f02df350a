package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// podSecurityNamespace creates a namespace with the given PodSecurity
// labels (mode: level).
func podSecurityNamespace(t testing.TB, client kubernetes.Interface, modes map[string]string) string {
	t.Helper()
	name := uniqueName(t, "psa")
	labels := map[string]string{}
	for mode, level := range modes {
		labels["pod-security.kubernetes.io/"+mode] = level
	}
	_, err := client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

func privilegedPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", Image: "busybox", SecurityContext: &v1.SecurityContext{Privileged: ptr(true)},
	}}}}
}

func plainPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
}

// restrictedViolations is what the restricted level says of privilegedPod,
// in kube's words.
const restrictedViolations = `privileged (container "c" must not set securityContext.privileged=true), ` +
	`allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ` +
	`unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), ` +
	`runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ` +
	`seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`

// TestPodSecurityEnforceRestricted: a restricted namespace refuses a
// privileged pod with kube's 403 and message; dry run too.
func TestPodSecurityEnforceRestricted(t *testing.T) {
	ns := podSecurityNamespace(t, cs, map[string]string{"enforce": "restricted"})
	for _, query := range []string{"", "?dryRun=All"} {
		r := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods"+query, mustJSON(t, privilegedPod("x")))
		if r.Code != 403 {
			t.Fatalf("POST%s privileged pod: %d %s, want 403", query, r.Code, r.Body)
		}
		st := statusMap(t, r.Body)
		want := `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedViolations
		if st["message"] != want || st["reason"] != "Forbidden" {
			t.Errorf("POST%s: reason %v message\n%v\nwant\n%s", query, st["reason"], st["message"], want)
		}
		if d, _ := st["details"].(map[string]any); d["name"] != "x" || d["kind"] != "pods" {
			t.Errorf("details %v, want name x kind pods", st["details"])
		}
	}
}

// TestPodSecurityWarn: a pod that passes enforce (baseline) but not warn
// (restricted) is created with kube's Warning, which client-go hands to
// its warning handler.
func TestPodSecurityWarn(t *testing.T) {
	ns := podSecurityNamespace(t, cs, map[string]string{"enforce": "baseline", "warn": "restricted"})
	warnings := &warningRecorder{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), plainPod("p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `would violate PodSecurity "restricted:latest": ` +
		`allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ` +
		`unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), ` +
		`runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ` +
		`seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	if got := warnings.messages(); !slices.Equal(got, []string{want}) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	// A baseline namespace still refuses a privileged pod.
	_, err = client.CoreV1().Pods(ns).Create(context.Background(), privilegedPod("x"), metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`pods "x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`)
}

// TestPodSecurityNamespaceLabels: invalid levels are kube's 422; raising
// the enforce level warns about the existing pods it would refuse.
func TestPodSecurityNamespaceLabels(t *testing.T) {
	ctx := context.Background()
	bad := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t, "bad"), Labels: map[string]string{"pod-security.kubernetes.io/enforce": "strict"}}}
	_, err := cs.CoreV1().Namespaces().Create(ctx, bad, metav1.CreateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid,
		`Namespace "`+bad.Name+`" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted`)

	ns := newNamespace(t)
	for _, name := range []string{"b", "a"} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, plainPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The check reads the watch cache: wait until it has both pods.
	eventually(t, 10*time.Second, "pods in the cache", func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(l.Items) == 2, err
	})
	warnings := &warningRecorder{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if got, err = client.CoreV1().Namespaces().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`existing pods in namespace "` + ns + `" violate the new PodSecurity enforce level "restricted:latest"`,
		`a (and 1 other pod): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
	}
	if !slices.Equal(warnings.messages(), want) {
		t.Errorf("warnings %q, want %q", warnings.messages(), want)
	}
	// An update that leaves invalid labels invalid in the same way is
	// not refused for them; one that makes them invalid is.
	got.Labels["pod-security.kubernetes.io/warn"] = "nope"
	_, err = cs.CoreV1().Namespaces().Update(ctx, got, metav1.UpdateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid,
		`Namespace "`+ns+`" is invalid: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "nope": must be one of privileged, baseline, restricted`)
}

// TestAdmissionPluginFlags: a server whose admission configuration file
// exempts alice from PodSecurity and which runs without
// DefaultTolerationSeconds; an unknown plugin name fails the start with
// kube's message.
func TestAdmissionPluginFlags(t *testing.T) {
	dir := t.TempDir()
	_, err := server.Start(context.Background(), func() server.Config {
		c, err := testserver.NewConfig(filepath.Join(dir, "unknown"))
		if err != nil {
			t.Fatal(err)
		}
		c.EnableAdmissionPlugins = []string{"PodSecurity", "NoSuchPlugin"}
		return c
	}())
	if err == nil || !strings.Contains(err.Error(), `enable-admission-plugins plugin "NoSuchPlugin" is unknown`) {
		t.Fatalf("start with an unknown plugin: %v, want kube's error", err)
	}

	// A plugin's configuration is checked when the plugin is built.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: strict
`), 0o600); err != nil {
		t.Fatal(err)
	}
	badCfg, err := testserver.NewConfig(filepath.Join(dir, "bad"))
	if err != nil {
		t.Fatal(err)
	}
	badCfg.AdmissionControlConfigFile = bad
	if s, err := server.Start(context.Background(), badCfg); err == nil || !strings.Contains(err.Error(), `admission plugin "PodSecurity": invalid PodSecurityConfiguration`) {
		if s != nil {
			_ = s.Shutdown(context.Background())
		}
		t.Fatalf("start with a bad PodSecurity configuration: %v", err)
	}

	psa := filepath.Join(dir, "podsecurity.yaml")
	if err := os.WriteFile(psa, []byte(`apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: restricted
exemptions:
  usernames: [alice]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: podsecurity.yaml
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.StartWith(t, filepath.Join(dir, "etcd"), func(c *server.Config) {
		c.AdmissionControlConfigFile = config
		c.DisableAdmissionPlugins = []string{"DefaultTolerationSeconds"}
	})
	ctx := context.Background()
	ns := newNamespaceIn(t, s.Client)
	// The default enforce level (restricted) applies to unlabelled
	// namespaces.
	_, err = s.Client.CoreV1().Pods(ns).Create(ctx, privilegedPod("x"), metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, `pods "x" is forbidden: violates PodSecurity "restricted:latest": `+restrictedViolations)

	alice, err := testserver.IssueClient("alice", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	ac := rest.CopyConfig(s.Config)
	ac.CertData, ac.KeyData = alice.CertPEM, alice.KeyPEM
	aliceClient, err := kubernetes.NewForConfig(ac)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := aliceClient.CoreV1().Pods(ns).Create(ctx, privilegedPod("x"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("alice (exempt) creating a privileged pod: %v", err)
	}
	if len(pod.Spec.Tolerations) != 0 {
		t.Errorf("tolerations %v with DefaultTolerationSeconds disabled, want none", pod.Spec.Tolerations)
	}
}

// newNamespaceIn creates a namespace for one test on another server.
func newNamespaceIn(t testing.TB, client kubernetes.Interface) string {
	t.Helper()
	name := uniqueName(t, "t")
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// TestSubresourceCreatesAdmitted: pods/eviction, pods/binding and
// serviceaccounts/token are admitted as creates of their own objects, so
// NamespaceLifecycle refuses them in a terminating namespace as kube does
// (kubectl drain falls back to deleting on that cause).
func TestSubresourceCreatesAdmitted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	p := plainPod("p")
	p.Finalizers = []string{"example.com/keep"}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cs.CoreV1().Pods(ns).Patch(ctx, "p", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating := func(resource, name string) string {
		return resource + ` "` + name + `" is forbidden: unable to create new content in namespace ` + ns + ` because it is being terminated`
	}
	err := cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}})
	st := checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, terminating("pods", "p"))
	checkCauses(t, st, map[string]metav1.CauseType{"metadata.namespace": v1.NamespaceTerminatingCause})

	err = cs.CoreV1().Pods(ns).Bind(ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, terminating("pods", "p"))

	_, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, terminating("serviceaccounts", "default"))
}
