package admission

import (
	"context"
	"errors"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// accounts is a ServiceAccountGetter over a fixed set, counting lookups.
type accounts struct {
	sas   map[string]*v1.ServiceAccount
	calls atomic.Int32
	// appearAfter, when > 0, hides every account until that many lookups
	// have been made.
	appearAfter int32
}

func (a *accounts) get(_ context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	n := a.calls.Add(1)
	if sa, ok := a.sas[namespace+"/"+name]; ok && n > a.appearAfter {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, name)
}

func createPod(ns string, pod *v1.Pod) *Attributes {
	return &Attributes{Operation: Create, Resource: podsGVR, Namespace: ns, Name: pod.Name, Object: pod}
}

func TestServiceAccountAdmitDefaults(t *testing.T) {
	sas := &accounts{sas: map[string]*v1.ServiceAccount{"ns/default": {ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"}}}}
	p := &ServiceAccount{Get: sas.get}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "i"}},
		Containers:     []v1.Container{{Name: "a"}, {Name: "b", VolumeMounts: []v1.VolumeMount{{Name: "x", MountPath: ServiceAccountTokenMountPath}}}},
	}}
	a := createPod("ns", pod)
	if err := p.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "default" || pod.Spec.DeprecatedServiceAccount != "default" {
		t.Errorf("serviceAccountName %q, serviceAccount %q", pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount)
	}
	if len(pod.Spec.Volumes) != 1 || !regexp.MustCompile(`^kube-api-access-[a-z0-9]{5}$`).MatchString(pod.Spec.Volumes[0].Name) {
		t.Fatalf("volumes %+v", pod.Spec.Volumes)
	}
	name := pod.Spec.Volumes[0].Name
	want := v1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountTokenMountPath}
	if m := pod.Spec.InitContainers[0].VolumeMounts; len(m) != 1 || m[0] != want {
		t.Errorf("init container mounts %+v", m)
	}
	if m := pod.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0] != want {
		t.Errorf("container a mounts %+v", m)
	}
	if m := pod.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "x" {
		t.Errorf("container b (own mount at the path) mounts %+v", m)
	}

	// Two pods get two names.
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	if err := p.Admit(context.Background(), createPod("ns", other)); err != nil {
		t.Fatal(err)
	}
	if other.Spec.Volumes[0].Name == name {
		t.Errorf("two pods share the volume name %s", name)
	}
}

func TestServiceAccountIgnores(t *testing.T) {
	p := &ServiceAccount{Get: func(context.Context, string, string) (*v1.ServiceAccount, error) {
		return nil, errors.New("looked up")
	}}
	for _, a := range []*Attributes{
		{Operation: Update, Resource: podsGVR, Namespace: "ns", Object: &v1.Pod{}},
		{Operation: Create, Resource: podsGVR, Subresource: "binding", Namespace: "ns", Object: &v1.Pod{}},
		{Operation: Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Object: &v1.Pod{}},
		{Operation: Delete, Resource: podsGVR, Namespace: "ns"},
	} {
		if err := p.Admit(context.Background(), a); err != nil {
			t.Errorf("%s %s/%s: %v", a.Operation, a.Resource.Resource, a.Subresource, err)
		}
		if err := p.Validate(context.Background(), a); err != nil {
			t.Errorf("validate %s %s/%s: %v", a.Operation, a.Resource.Resource, a.Subresource, err)
		}
	}
}

// TestServiceAccountWaitsForDefault: a default ServiceAccount that appears
// while the pod waits admits it; a named one is looked up once; the wait
// is bounded and ends with ctx.
func TestServiceAccountWaitsForDefault(t *testing.T) {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"}}
	sas := &accounts{sas: map[string]*v1.ServiceAccount{"ns/default": sa}, appearAfter: 3}
	p := &ServiceAccount{Get: sas.get, DefaultWait: time.Minute}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	if err := p.Admit(context.Background(), createPod("ns", pod)); err != nil {
		t.Fatalf("default ServiceAccount appearing during the wait: %v", err)
	}
	if n := sas.calls.Load(); n != 4 {
		t.Errorf("%d lookups, want 4 (found on the 4th)", n)
	}

	named := &accounts{sas: map[string]*v1.ServiceAccount{}}
	p = &ServiceAccount{Get: named.get, DefaultWait: time.Minute}
	pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nosa"}, Spec: v1.PodSpec{ServiceAccountName: "no-such-sa", Containers: []v1.Container{{Name: "a"}}}}
	err := p.Admit(context.Background(), createPod("gold", pod))
	if !apierrors.IsForbidden(err) || err.Error() != `pods "nosa" is forbidden: error looking up service account gold/no-such-sa: serviceaccount "no-such-sa" not found` {
		t.Errorf("missing named ServiceAccount: %v", err)
	}
	if n := named.calls.Load(); n != 1 {
		t.Errorf("%d lookups of a named ServiceAccount, want 1", n)
	}

	missing := &accounts{sas: map[string]*v1.ServiceAccount{}}
	p = &ServiceAccount{Get: missing.get, DefaultWait: 300 * time.Millisecond}
	pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nosa"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	err = p.Admit(context.Background(), createPod("ns", pod))
	if !apierrors.IsForbidden(err) || err.Error() != `pods "nosa" is forbidden: error looking up service account ns/default: serviceaccount "default" not found` {
		t.Errorf("missing default ServiceAccount: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p = &ServiceAccount{Get: missing.get, DefaultWait: time.Hour}
	pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nosa"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	if err := p.Admit(ctx, createPod("ns", pod)); !apierrors.IsForbidden(err) {
		t.Errorf("wait with an ended context: %v", err)
	}
}

func TestServiceAccountLookupErrors(t *testing.T) {
	p := &ServiceAccount{Get: func(context.Context, string, string) (*v1.ServiceAccount, error) {
		return nil, apierrors.NewInternalError(errors.New("etcd down"))
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	err := p.Admit(context.Background(), createPod("ns", pod))
	if !apierrors.IsForbidden(err) || err.Error() != `pods "p" is forbidden: error looking up service account ns/default: Internal error occurred: etcd down` {
		t.Errorf("lookup error: %v", err)
	}
}

func TestServiceAccountValidateNoName(t *testing.T) {
	p := &ServiceAccount{Get: (&accounts{}).get}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	err := p.Validate(context.Background(), createPod("ns", pod))
	if !apierrors.IsForbidden(err) || err.Error() != `pods "p" is forbidden: no service account specified for pod ns/p` {
		t.Errorf("pod without a ServiceAccount after mutation: %v", err)
	}
}

func TestServiceAccountMirrorPods(t *testing.T) {
	p := &ServiceAccount{Get: (&accounts{}).get}
	mirror := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: map[string]string{MirrorPodAnnotation: ""}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	}
	pod := mirror()
	if err := p.Admit(context.Background(), createPod("ns", pod)); err != nil || pod.Spec.ServiceAccountName != "" || len(pod.Spec.Volumes) != 0 {
		t.Errorf("plain mirror pod: %v, %+v", err, pod.Spec)
	}
	cases := map[string]func(*v1.Pod){
		"a mirror pod may not reference service accounts": func(p *v1.Pod) { p.Spec.ServiceAccountName = "default" },
		"a mirror pod may not reference secrets": func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}
		},
		"a mirror pod may not use ServiceAccountToken volume projections": func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Projected: TokenVolumeSource()}}}
		},
	}
	for msg, mut := range cases {
		pod := mirror()
		mut(pod)
		err := p.Admit(context.Background(), createPod("ns", pod))
		if !apierrors.IsForbidden(err) || err.Error() != `pods "m" is forbidden: `+msg {
			t.Errorf("%s: %v", msg, err)
		}
	}
}
