package agent

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// decodedPod is a pod as the informer decodes it from the server: the
// ServiceAccount admission's projected volume, the default tolerations,
// resources, probes, a security context, with every part of its own (as
// decoding allocates them). Pods of one template differ in name, UID,
// the volume's name and their status.
func decodedPod(i int, image string) *v1.Pod {
	wire := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("p-%d", i), Namespace: "scale", UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: fmt.Sprint(100 + i),
			Labels:        map[string]string{"app": "scale", "group": "7"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: v1.PodSpec{
			NodeName: "node-1",
			Volumes: []v1.Volume{{Name: fmt.Sprintf("kube-api-access-%05d", i), VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
				DefaultMode: ptr.To(int32(420)),
			}}}},
			Containers: []v1.Container{{
				Name: "c", Image: image, Command: []string{"sh", "-c", "sleep 3600"}, Env: []v1.EnvVar{{Name: "A", Value: "1"}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi"),
				}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 10},
				VolumeMounts:   []v1.VolumeMount{{Name: fmt.Sprintf("kube-api-access-%05d", i), MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			Tolerations: []v1.Toleration{
				{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
				{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
			},
			SecurityContext:               &v1.PodSecurityContext{},
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			Priority:                      ptr.To(int32(0)),
			EnableServiceLinks:            ptr.To(true),
			PreemptionPolicy:              ptr.To(v1.PreemptLowerPriority),
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i)},
	}
	// Through the wire format, so that nothing is shared to begin with
	// (quantities included, as decoding leaves them).
	b, err := wire.Marshal()
	if err != nil {
		panic(err)
	}
	pod := &v1.Pod{}
	if err := pod.Unmarshal(b); err != nil {
		panic(err)
	}
	return pod
}

func mapPointer(m any) uintptr { return reflect.ValueOf(m).Pointer() }

// TestPodTransformShares: the pod informer's transform leaves every field
// a pod had (the agent reads nearly all of them) but managedFields, while
// pods of one template share their equal parts' memory; parts that differ
// are not shared, and a pod's shared slices cannot be appended into
// another's.
func TestPodTransformShares(t *testing.T) {
	s := newPodSharer()
	transform := func(p *v1.Pod) *v1.Pod {
		want := p.DeepCopy()
		want.ManagedFields = nil
		obj, err := s.podTransform(p)
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*v1.Pod)
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Fatalf("transform changed the pod:\ngot  %+v\nwant %+v", got, want)
		}
		if !reflect.DeepEqual(got.Spec, want.Spec) || !reflect.DeepEqual(got.Labels, want.Labels) {
			t.Fatalf("transform changed the spec or labels")
		}
		return got
	}
	a, b := transform(decodedPod(1, "nginx:1.27")), transform(decodedPod(2, "nginx:1.27"))
	other := transform(decodedPod(3, "nginx:1.26"))

	shared := []struct {
		what string
		x, y uintptr
	}{
		{"projected volume", mapPointer(a.Spec.Volumes[0].Projected), mapPointer(b.Spec.Volumes[0].Projected)},
		{"requests", mapPointer(a.Spec.Containers[0].Resources.Requests), mapPointer(b.Spec.Containers[0].Resources.Requests)},
		{"tolerations", mapPointer(a.Spec.Tolerations), mapPointer(b.Spec.Tolerations)},
		{"security context", mapPointer(a.Spec.SecurityContext), mapPointer(b.Spec.SecurityContext)},
		{"readiness probe", mapPointer(a.Spec.Containers[0].ReadinessProbe), mapPointer(b.Spec.Containers[0].ReadinessProbe)},
		{"command", mapPointer(a.Spec.Containers[0].Command), mapPointer(b.Spec.Containers[0].Command)},
		{"env", mapPointer(a.Spec.Containers[0].Env), mapPointer(b.Spec.Containers[0].Env)},
		{"labels", mapPointer(a.Labels), mapPointer(b.Labels)},
		{"terminationGracePeriodSeconds", mapPointer(a.Spec.TerminationGracePeriodSeconds), mapPointer(b.Spec.TerminationGracePeriodSeconds)},
		{"enableServiceLinks", mapPointer(a.Spec.EnableServiceLinks), mapPointer(b.Spec.EnableServiceLinks)},
		// Equal parts of a pod of another template are shared too.
		{"requests of another template", mapPointer(a.Spec.Containers[0].Resources.Requests), mapPointer(other.Spec.Containers[0].Resources.Requests)},
	}
	for _, c := range shared {
		if c.x != c.y {
			t.Errorf("%s: not shared", c.what)
		}
	}
	// What differs is not shared.
	c := decodedPod(4, "nginx:1.27")
	c.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("200m")
	c.Spec.Tolerations[0].TolerationSeconds = ptr.To(int64(60))
	c.Labels["group"] = "8"
	c.Spec.TerminationGracePeriodSeconds = ptr.To(int64(5))
	c = transform(c)
	if mapPointer(c.Spec.Containers[0].Resources.Requests) == mapPointer(a.Spec.Containers[0].Resources.Requests) ||
		mapPointer(c.Spec.Tolerations) == mapPointer(a.Spec.Tolerations) || mapPointer(c.Labels) == mapPointer(a.Labels) ||
		*c.Spec.TerminationGracePeriodSeconds != 5 || *a.Spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("different values shared")
	}
	if got := c.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; got.String() != "200m" {
		t.Errorf("cpu request %s, want 200m", got.String())
	}
	// An append to one pod's tolerations is not seen by the other's.
	ta := append(a.Spec.Tolerations, v1.Toleration{Key: "x"})
	tb := append(b.Spec.Tolerations, v1.Toleration{Key: "y"})
	if ta[2].Key != "x" || tb[2].Key != "y" || len(a.Spec.Tolerations) != 2 {
		t.Errorf("appends to shared tolerations collide: %q %q", ta[2].Key, tb[2].Key)
	}
	// A DeepCopy (what the agent writes) owns its parts.
	d := a.DeepCopy()
	d.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
	d.Labels["app"] = "changed"
	if q := b.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; q.String() != "100m" || b.Labels["app"] != "scale" {
		t.Errorf("a DeepCopy's writes reached a shared part")
	}
}

// TestPodSharerBounded: a sharer that has seen maxShared different values
// starts over rather than grow, and the pods keep their values.
func TestPodSharerBounded(t *testing.T) {
	s := newPodSharer()
	var pods []*v1.Pod
	for i := range maxShared + 10 {
		p := decodedPod(i, "nginx:1.27")
		p.Labels["group"] = fmt.Sprint(i)
		p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(i))
		if _, err := s.podTransform(p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	if len(s.values) > maxShared || len(s.ptrs) > maxShared {
		t.Errorf("sharer holds %d values and %d pointers, want at most %d", len(s.values), len(s.ptrs), maxShared)
	}
	for i, p := range pods {
		if p.Labels["group"] != fmt.Sprint(i) || *p.Spec.TerminationGracePeriodSeconds != int64(i) {
			t.Fatalf("pod %d: labels %v, grace %d", i, p.Labels, *p.Spec.TerminationGracePeriodSeconds)
		}
	}
}
