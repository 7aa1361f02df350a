package admission

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/corekube/corekube/auth/user"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// psaEnv is a PodSecurity plugin over fixed namespaces and pods that
// keeps what it warns and annotates.
type psaEnv struct {
	plugin      *PodSecurity
	namespaces  map[string]*v1.Namespace
	pods        map[string][]*v1.Pod
	warnings    []string
	annotations map[string]string
}

func newPSAEnv(t *testing.T, config string) *psaEnv {
	t.Helper()
	var data []byte
	if config != "" {
		data = []byte(config)
	}
	p, err := NewPodSecurity(data)
	if err != nil {
		t.Fatal(err)
	}
	e := &psaEnv{plugin: p, namespaces: map[string]*v1.Namespace{}, pods: map[string][]*v1.Pod{}, annotations: map[string]string{}}
	p.GetNamespace = func(_ context.Context, name string) (*v1.Namespace, error) {
		if ns, ok := e.namespaces[name]; ok {
			return ns, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	p.ListPods = func(_ context.Context, ns string) ([]*v1.Pod, error) { return slices.Clone(e.pods[ns]), nil }
	p.Warn = func(_ context.Context, msg string) { e.warnings = append(e.warnings, msg) }
	p.Annotate = func(_ context.Context, k, v string) { e.annotations[k] = v }
	return e
}

func (e *psaEnv) namespace(name string, modes ...string) *v1.Namespace {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: psaLabels(modes...)}}
	e.namespaces[name] = ns
	return ns
}

// psaLabels turns "enforce=restricted" pairs into namespace labels.
func psaLabels(modes ...string) map[string]string {
	labels := map[string]string{}
	for _, m := range modes {
		k, v, _ := strings.Cut(m, "=")
		labels["pod-security.kubernetes.io/"+k] = v
	}
	return labels
}

func (e *psaEnv) reset() {
	e.warnings, e.annotations = nil, map[string]string{}
}

func psaPod(name string, privileged bool) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if privileged {
		pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptrTo(true)}
	}
	return pod
}

// restrictedPod passes every restricted check.
func restrictedPod(name string) *v1.Pod {
	pod := psaPod(name, false)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptrTo(true), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false), Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}}}
	return pod
}

func ptrTo[T any](v T) *T { return &v }

const (
	restrictedDetail = `allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ` +
		`unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), ` +
		`runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ` +
		`seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	privilegedDetail = `privileged (container "c" must not set securityContext.privileged=true)`
)

func TestPodSecurityPods(t *testing.T) {
	const config = `apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
exemptions:
  usernames: [alice]
  namespaces: [exempt]
  runtimeClasses: [kata]
`
	kata := restrictedPod("k")
	kata.Spec.RuntimeClassName = ptrTo("kata")
	kata.Spec.Containers[0].SecurityContext.Privileged = ptrTo(true)
	alice := user.WithUser(context.Background(), &user.Info{Name: "alice"})
	image := func(p *v1.Pod, img string) *v1.Pod {
		p.Spec.Containers[0].Image = img
		return p
	}
	relabelled := psaPod("x", true)
	relabelled.Labels = map[string]string{"new": "label"}

	tests := []struct {
		name        string
		ctx         context.Context
		ns          []string // the namespace's modes
		nsName      string
		op          Operation
		sub         string
		pod, old    *v1.Pod
		wantErr     string
		wantCode    int32
		warnings    []string
		annotations map[string]string
	}{
		{name: "privileged namespace", pod: psaPod("x", true),
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "privileged:latest"}},
		{name: "restricted refuses privileged", ns: []string{"enforce=restricted"}, pod: psaPod("x", true), wantCode: 403,
			wantErr:     `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + privilegedDetail + ", " + restrictedDetail,
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "restricted:latest"}},
		{name: "restricted admits restricted", ns: []string{"enforce=restricted"}, pod: restrictedPod("x"),
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "restricted:latest"}},
		{name: "pinned version", ns: []string{"enforce=baseline", "enforce-version=v1.30"}, pod: psaPod("x", true), wantCode: 403,
			wantErr:     `pods "x" is forbidden: violates PodSecurity "baseline:v1.30": ` + privilegedDetail,
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "baseline:v1.30"}},
		{name: "warn", ns: []string{"enforce=baseline", "warn=restricted"}, pod: psaPod("x", false),
			warnings:    []string{`would violate PodSecurity "restricted:latest": ` + restrictedDetail},
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "baseline:latest"}},
		{name: "enforce defaults warn", ns: []string{"enforce=baseline"}, pod: psaPod("x", true), wantCode: 403,
			wantErr:     `pods "x" is forbidden: violates PodSecurity "baseline:latest": ` + privilegedDetail,
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "baseline:latest"}},
		{name: "audit", ns: []string{"audit=baseline"}, pod: psaPod("x", true),
			annotations: map[string]string{
				"pod-security.kubernetes.io/enforce-policy":   "privileged:latest",
				"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "baseline:latest": ` + privilegedDetail,
			}},
		{name: "exempt namespace", ns: []string{"enforce=restricted"}, nsName: "exempt", pod: psaPod("x", true),
			annotations: map[string]string{"pod-security.kubernetes.io/exempt": "namespace"}},
		{name: "exempt user", ctx: alice, ns: []string{"enforce=restricted"}, pod: psaPod("x", true),
			annotations: map[string]string{"pod-security.kubernetes.io/exempt": "user"}},
		{name: "exempt runtime class", ns: []string{"enforce=restricted"}, pod: kata,
			annotations: map[string]string{"pod-security.kubernetes.io/exempt": "runtimeClass"}},
		{name: "status is not checked", ns: []string{"enforce=restricted"}, op: Update, sub: "status", pod: psaPod("x", true), old: psaPod("x", true),
			annotations: map[string]string{}},
		{name: "ephemeral containers are", ns: []string{"enforce=restricted"}, op: Update, sub: "ephemeralcontainers", pod: image(psaPod("x", true), "b"), old: psaPod("x", true), wantCode: 403,
			wantErr:     `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + privilegedDetail + ", " + restrictedDetail,
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "restricted:latest"}},
		{name: "insignificant update", ns: []string{"enforce=restricted"}, op: Update, pod: relabelled, old: psaPod("x", true),
			annotations: map[string]string{}},
		{name: "image update", ns: []string{"enforce=restricted"}, op: Update, pod: image(psaPod("x", true), "nginx"), old: psaPod("x", true), wantCode: 403,
			wantErr:     `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + privilegedDetail + ", " + restrictedDetail,
			annotations: map[string]string{"pod-security.kubernetes.io/enforce-policy": "restricted:latest"}},
		{name: "delete", ns: []string{"enforce=restricted"}, op: Delete, old: psaPod("x", true), annotations: map[string]string{}},
		{name: "invalid label fails closed", ns: []string{"enforce=bogus"}, pod: psaPod("x", true), wantCode: 403,
			wantErr: `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + privilegedDetail + ", " + restrictedDetail,
			annotations: map[string]string{
				"pod-security.kubernetes.io/enforce-policy": "restricted:latest",
				"pod-security.kubernetes.io/error":          `Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted`,
			}},
		{name: "missing namespace", nsName: "-", pod: psaPod("x", true), wantCode: 500,
			wantErr: `Internal error occurred: failed to lookup namespace "gone"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newPSAEnv(t, config)
			nsName := "ns"
			switch tc.nsName {
			case "-":
				nsName = "gone"
			case "":
				e.namespace(nsName, tc.ns...)
			default:
				nsName = tc.nsName
				e.namespace(nsName, tc.ns...)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			op := tc.op
			if op == "" {
				op = Create
			}
			a := &Attributes{Operation: op, Resource: podsGVR, Subresource: tc.sub, Namespace: nsName, Name: "x"}
			if tc.pod != nil {
				a.Object = tc.pod
			}
			if tc.old != nil {
				a.OldObject = tc.old
			}
			err := e.plugin.Validate(ctx, a)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "":
				var st apierrors.APIStatus
				if err == nil || !apierrorsAs(err, &st) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if st.Status().Message != tc.wantErr || st.Status().Code != tc.wantCode {
					t.Errorf("got %d %q\nwant %d %q", st.Status().Code, st.Status().Message, tc.wantCode, tc.wantErr)
				}
			}
			if !slices.Equal(e.warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", e.warnings, tc.warnings)
			}
			if tc.annotations != nil && !maps.Equal(e.annotations, tc.annotations) {
				t.Errorf("annotations %q, want %q", e.annotations, tc.annotations)
			}
		})
	}
}

func apierrorsAs(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

func TestPodSecurityNamespaces(t *testing.T) {
	const config = `apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
exemptions:
  namespaces: [exempt]
`
	owned := func(p *v1.Pod, uid string) *v1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{UID: types.UID(uid), Controller: ptrTo(true), Kind: "ReplicaSet", Name: "rs", APIVersion: "apps/v1"}}
		return p
	}
	pods := []*v1.Pod{psaPod("b", false), psaPod("a", false), psaPod("c", true), restrictedPod("ok"),
		owned(psaPod("r1", false), "rs1"), owned(psaPod("r2", false), "rs1")}
	tests := []struct {
		name     string
		op       Operation
		nsName   string
		old, new []string
		wantErr  string
		warnings []string
	}{
		{name: "create valid", op: Create, new: []string{"enforce=restricted", "warn-version=v1.29"}},
		{name: "create invalid", op: Create, new: []string{"enforce=strict", "audit-version=1.2"},
			wantErr: `Namespace "ns" is invalid: [metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted, ` +
				`metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: "1.2": must be "latest" or "v1.x"]`},
		{name: "create exempt", op: Create, nsName: "exempt", new: []string{"enforce=baseline", "audit=restricted"},
			warnings: []string{`namespace "exempt" is exempt from Pod Security, and the policy (enforce=baseline:latest, audit=restricted:latest) will be ignored`}},
		{name: "raise enforce", op: Update, old: nil, new: []string{"enforce=restricted"},
			warnings: []string{
				`existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest"`,
				`a (and 3 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
				`c: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
			}},
		{name: "lower enforce", op: Update, old: []string{"enforce=restricted"}, new: []string{"enforce=baseline"}},
		{name: "enforce unchanged", op: Update, old: []string{"enforce=restricted"}, new: []string{"enforce=restricted", "warn=baseline"}},
		{name: "to privileged", op: Update, old: []string{"enforce=baseline"}, new: []string{"enforce=privileged"}},
		{name: "raise in exempt namespace", op: Update, nsName: "exempt", new: []string{"enforce=baseline"},
			warnings: []string{`namespace "exempt" is exempt from Pod Security, and the policy (enforce=baseline:latest) will be ignored`}},
		{name: "still invalid the same way", op: Update, old: []string{"enforce=strict"}, new: []string{"enforce=strict", "team=x"}},
		{name: "newly invalid", op: Update, old: []string{"enforce=baseline"}, new: []string{"enforce=baseline", "warn=nope"},
			wantErr: `Namespace "ns" is invalid: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "nope": must be one of privileged, baseline, restricted`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newPSAEnv(t, config)
			name := "ns"
			if tc.nsName != "" {
				name = tc.nsName
			}
			e.pods[name] = pods
			newNS := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: psaLabels(tc.new...)}}
			a := &Attributes{Operation: tc.op, Kind: v1.SchemeGroupVersion.WithKind("Namespace"), Resource: namespacesGVR, Name: name, Object: newNS}
			if tc.op == Update {
				a.OldObject = &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: psaLabels(tc.old...)}}
			}
			err := e.plugin.Validate(context.Background(), a)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !apierrors.IsInvalid(err) {
					t.Fatalf("error %v\nwant 422 %s", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.warnings, tc.warnings) {
				t.Errorf("warnings\n%q\nwant\n%q", e.warnings, tc.warnings)
			}
		})
	}
}

func TestPodSecurityConfiguration(t *testing.T) {
	e := newPSAEnv(t, `apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  warn: restricted
`)
	e.namespace("ns")
	err := e.plugin.Validate(context.Background(), &Attributes{Operation: Create, Resource: podsGVR, Namespace: "ns", Name: "x", Object: psaPod("x", false)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`would violate PodSecurity "restricted:latest": ` + restrictedDetail}; !slices.Equal(e.warnings, want) {
		t.Errorf("warnings %q, want %q", e.warnings, want)
	}
	for name, config := range map[string]string{
		"bad level":   "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: strict\n",
		"wrong kind":  "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: Other\n",
		"not yaml":    "{",
		"bad version": "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce-version: v2\n",
	} {
		if _, err := NewPodSecurity([]byte(config)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
