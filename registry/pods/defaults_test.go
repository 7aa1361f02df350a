package pods

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/corekube/corekube/registry/pods/internal/podtest"
)

// The spec and status kube-apiserver v1.32 returned for
// {"containers":[{"name":"c","image":"busybox"}]}
// (reference/kube-apiserver-1.32/201-create-pod.json), without what the
// ServiceAccount and DefaultTolerationSeconds admission plugins added
// (volumes, volumeMounts, serviceAccountName, serviceAccount, tolerations).
const referenceCreatedSpec = `{"containers":[{"name":"c","image":"busybox","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}`
const referenceCreatedStatus = `{"phase":"Pending","qosClass":"BestEffort"}`

func TestPrepareForCreateMatchesReference(t *testing.T) {
	var p v1.Pod
	if err := json.Unmarshal([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"gp1","labels":{"app":"gold"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`), &p); err != nil {
		t.Fatal(err)
	}
	NewStrategy().PrepareForCreate(ctx, &p)
	spec, _ := json.Marshal(p.Spec)
	if string(spec) != referenceCreatedSpec {
		t.Errorf("spec\n got: %s\nwant: %s", spec, referenceCreatedSpec)
	}
	status, _ := json.Marshal(p.Status)
	if string(status) != referenceCreatedStatus {
		t.Errorf("status\n got: %s\nwant: %s", status, referenceCreatedStatus)
	}
	if errs := NewStrategy().Validate(ctx, &p); len(errs) != 0 {
		t.Errorf("reference pod invalid: %v", errs)
	}
}

func TestImagePullPolicyDefault(t *testing.T) {
	digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		image string
		tag   string
		want  v1.PullPolicy
	}{
		{"busybox", "latest", v1.PullAlways},
		{"busybox:latest", "latest", v1.PullAlways},
		{"busybox:1.36", "1.36", v1.PullIfNotPresent},
		{"docker.io/library/busybox", "latest", v1.PullAlways},
		{"registry.k8s.io/pause:3.10", "3.10", v1.PullIfNotPresent},
		{"localhost:5000/app", "latest", v1.PullAlways},
		{"localhost:5000/app:v2", "v2", v1.PullIfNotPresent},
		{"[::1]:5000/app:v2", "v2", v1.PullIfNotPresent},
		{"busybox@" + digest, "", v1.PullIfNotPresent},
		{"busybox:latest@" + digest, "latest", v1.PullAlways},
		{"busybox:1.0@" + digest, "1.0", v1.PullIfNotPresent},
		{"busybox@sha256:abc", "", v1.PullIfNotPresent},   // bad digest: parse error
		{"Busybox", "", v1.PullIfNotPresent},              // upper-case repository: parse error
		{"Example.com/busybox", "latest", v1.PullAlways},  // upper case is fine in a domain
		{"busybox:LATEST", "LATEST", v1.PullIfNotPresent}, // tags are case sensitive
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "", v1.PullIfNotPresent},
		{"", "", v1.PullIfNotPresent},
		{"busy box", "", v1.PullIfNotPresent},
	}
	for _, tc := range tests {
		if got := imageTag(tc.image); got != tc.tag {
			t.Errorf("imageTag(%q) = %q, want %q", tc.image, got, tc.tag)
		}
		c := v1.Container{Image: tc.image}
		defaultContainer(&c)
		if c.ImagePullPolicy != tc.want {
			t.Errorf("%q: pull policy %q, want %q", tc.image, c.ImagePullPolicy, tc.want)
		}
	}
	c := v1.Container{Image: "busybox", ImagePullPolicy: v1.PullNever}
	defaultContainer(&c)
	if c.ImagePullPolicy != v1.PullNever {
		t.Errorf("explicit pull policy overwritten: %q", c.ImagePullPolicy)
	}
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name  string
		in    func(*v1.Pod)
		check func(*testing.T, *v1.Pod)
	}{
		{
			name: "requests default to limits per resource",
			in: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: podtest.Resources("cpu", "1", "memory", "1Gi"), Requests: podtest.Resources("cpu", "500m")}
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "x", Resources: v1.ResourceRequirements{Limits: podtest.Resources("memory", "64Mi")}}}
			},
			check: func(t *testing.T, p *v1.Pod) {
				r := p.Spec.Containers[0].Resources.Requests
				if q := r[v1.ResourceCPU]; q.String() != "500m" {
					t.Errorf("cpu request overwritten: %s", q.String())
				}
				if q := r[v1.ResourceMemory]; q.String() != "1Gi" {
					t.Errorf("memory request = %s, want 1Gi", q.String())
				}
				if q := p.Spec.InitContainers[0].Resources.Requests[v1.ResourceMemory]; q.String() != "64Mi" {
					t.Errorf("init memory request = %s", q.String())
				}
			},
		},
		{
			name: "no limits: requests stay nil",
			in:   func(p *v1.Pod) {},
			check: func(t *testing.T, p *v1.Pod) {
				if p.Spec.Containers[0].Resources.Requests != nil {
					t.Errorf("requests = %v", p.Spec.Containers[0].Resources.Requests)
				}
			},
		},
		{
			name: "quantities rounded up to milli",
			in: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Requests = podtest.Resources("cpu", "0.0001")
			},
			check: func(t *testing.T, p *v1.Pod) {
				if q := p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; q.String() != "1m" {
					t.Errorf("cpu = %s, want 1m", q.String())
				}
			},
		},
		{
			name: "ports: protocol TCP, hostNetwork copies containerPort to hostPort",
			in: func(p *v1.Pod) {
				p.Spec.HostNetwork = true
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP}}
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "x", Ports: []v1.ContainerPort{{ContainerPort: 8080}}}}
			},
			check: func(t *testing.T, p *v1.Pod) {
				ports := p.Spec.Containers[0].Ports
				if ports[0].Protocol != v1.ProtocolTCP || ports[0].HostPort != 80 {
					t.Errorf("port 0 = %+v", ports[0])
				}
				if ports[1].Protocol != v1.ProtocolUDP {
					t.Errorf("port 1 = %+v", ports[1])
				}
				if hp := p.Spec.InitContainers[0].Ports[0].HostPort; hp != 8080 {
					t.Errorf("init hostPort = %d", hp)
				}
			},
		},
		{
			name: "no hostNetwork: hostPort left alone",
			in: func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}}
			},
			check: func(t *testing.T, p *v1.Pod) {
				if hp := p.Spec.Containers[0].Ports[0].HostPort; hp != 0 {
					t.Errorf("hostPort = %d", hp)
				}
			},
		},
		{
			name: "explicit values kept",
			in: func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				p.Spec.DNSPolicy = v1.DNSDefault
				p.Spec.SchedulerName = "other"
				p.Spec.TerminationGracePeriodSeconds = podtest.Int64(5)
				f := false
				p.Spec.EnableServiceLinks = &f
				p.Spec.Containers[0].TerminationMessagePath = "/x"
				p.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
			},
			check: func(t *testing.T, p *v1.Pod) {
				s := p.Spec
				if s.RestartPolicy != v1.RestartPolicyNever || s.DNSPolicy != v1.DNSDefault || s.SchedulerName != "other" ||
					*s.TerminationGracePeriodSeconds != 5 || *s.EnableServiceLinks ||
					s.Containers[0].TerminationMessagePath != "/x" || s.Containers[0].TerminationMessagePolicy != v1.TerminationMessageFallbackToLogsOnError {
					t.Errorf("explicit values changed: %+v", s)
				}
			},
		},
		{
			name: "probes and handlers",
			in: func(p *v1.Pod) {
				p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(8080)}}}
				p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(1)}}}
			},
			check: func(t *testing.T, p *v1.Pod) {
				pr := p.Spec.Containers[0].LivenessProbe
				if pr.TimeoutSeconds != 1 || pr.PeriodSeconds != 10 || pr.SuccessThreshold != 1 || pr.FailureThreshold != 3 {
					t.Errorf("probe = %+v", pr)
				}
				if pr.HTTPGet.Path != "/" || pr.HTTPGet.Scheme != v1.URISchemeHTTP {
					t.Errorf("httpGet = %+v", pr.HTTPGet)
				}
				if h := p.Spec.Containers[0].Lifecycle.PreStop.HTTPGet; h.Path != "/" || h.Scheme != v1.URISchemeHTTP {
					t.Errorf("preStop httpGet = %+v", h)
				}
			},
		},
		{
			name: "volumes and env defaults",
			in: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{
					{Name: "empty"},
					{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
					{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
					{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp"}}},
					{Name: "pr", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
						{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
						{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
					}}}},
				}
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
			},
			check: func(t *testing.T, p *v1.Pod) {
				v := p.Spec.Volumes
				if v[0].EmptyDir == nil {
					t.Errorf("empty volume not defaulted to emptyDir")
				}
				if *v[1].Secret.DefaultMode != 0644 || *v[2].ConfigMap.DefaultMode != 0644 || *v[4].Projected.DefaultMode != 0644 {
					t.Errorf("default modes not 0644")
				}
				if *v[3].HostPath.Type != v1.HostPathUnset {
					t.Errorf("hostPath type = %q", *v[3].HostPath.Type)
				}
				if *v[4].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != 3600 {
					t.Errorf("token expiration not 3600")
				}
				if v[4].Projected.Sources[1].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" {
					t.Errorf("downward API apiVersion not v1")
				}
				if p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
					t.Errorf("env fieldRef apiVersion not v1")
				}
			},
		},
		{
			name: "serviceAccount is an alias of serviceAccountName",
			in:   func(p *v1.Pod) { p.Spec.DeprecatedServiceAccount = "legacy" },
			check: func(t *testing.T, p *v1.Pod) {
				if p.Spec.ServiceAccountName != "legacy" || p.Spec.DeprecatedServiceAccount != "legacy" {
					t.Errorf("sa = %q / %q", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount)
				}
			},
		},
		{
			name: "serviceAccountName wins and is mirrored; not defaulted",
			in: func(p *v1.Pod) {
				p.Spec.ServiceAccountName = "new"
				p.Spec.DeprecatedServiceAccount = "old"
			},
			check: func(t *testing.T, p *v1.Pod) {
				if p.Spec.ServiceAccountName != "new" || p.Spec.DeprecatedServiceAccount != "new" {
					t.Errorf("sa = %q / %q", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount)
				}
			},
		},
		{
			name: "tolerations untouched, serviceAccountName not set",
			in:   func(p *v1.Pod) {},
			check: func(t *testing.T, p *v1.Pod) {
				if p.Spec.Tolerations != nil || p.Spec.ServiceAccountName != "" {
					t.Errorf("tolerations %v sa %q", p.Spec.Tolerations, p.Spec.ServiceAccountName)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := rawPod()
			tc.in(p)
			Default(p)
			tc.check(t, p)
		})
	}
}

func TestPrepareForCreate(t *testing.T) {
	s := NewStrategy()
	t.Run("status reset, priority defaults", func(t *testing.T) {
		p := rawPod()
		p.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", HostIP: "1.2.3.4", Conditions: []v1.PodCondition{{Type: v1.PodReady}}}
		s.PrepareForCreate(ctx, p)
		if p.Status.Phase != v1.PodPending || p.Status.PodIP != "" || p.Status.HostIP != "" || len(p.Status.Conditions) != 0 || p.Status.QOSClass != v1.PodQOSBestEffort {
			t.Errorf("status = %+v", p.Status)
		}
		if *p.Spec.Priority != 0 || *p.Spec.PreemptionPolicy != v1.PreemptLowerPriority {
			t.Errorf("priority %v preemption %v", *p.Spec.Priority, *p.Spec.PreemptionPolicy)
		}
	})
	t.Run("explicit priority kept", func(t *testing.T) {
		p := rawPod()
		p.Spec.Priority = podtest.Int32(7)
		never := v1.PreemptNever
		p.Spec.PreemptionPolicy = &never
		s.PrepareForCreate(ctx, p)
		if *p.Spec.Priority != 7 || *p.Spec.PreemptionPolicy != v1.PreemptNever {
			t.Errorf("priority %v preemption %v", *p.Spec.Priority, *p.Spec.PreemptionPolicy)
		}
	})
	t.Run("qos computed from defaulted requests", func(t *testing.T) {
		p := rawPod()
		p.Spec.Containers[0].Resources.Limits = podtest.Resources("cpu", "1", "memory", "1Gi")
		s.PrepareForCreate(ctx, p)
		if p.Status.QOSClass != v1.PodQOSGuaranteed {
			t.Errorf("qos = %q", p.Status.QOSClass)
		}
	})
	t.Run("client-supplied qosClass kept like kube's GetPodQOS", func(t *testing.T) {
		p := rawPod()
		p.Status.QOSClass = v1.PodQOSBurstable
		s.PrepareForCreate(ctx, p)
		if p.Status.QOSClass != v1.PodQOSBurstable {
			t.Errorf("qos = %q", p.Status.QOSClass)
		}
	})
	t.Run("scheduling gates add PodScheduled=False condition", func(t *testing.T) {
		p := rawPod()
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/gate"}}
		s.PrepareForCreate(ctx, p)
		want := []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulingGated", Message: "Scheduling is blocked due to non-empty scheduling gates"}}
		if len(p.Status.Conditions) != 1 || p.Status.Conditions[0] != want[0] {
			t.Errorf("conditions = %+v", p.Status.Conditions)
		}
	})
	t.Run("alpha / disabled fields dropped", func(t *testing.T) {
		p := rawPod()
		p.Spec.Resources = &v1.ResourceRequirements{Limits: podtest.Resources("cpu", "1")}
		tr := true
		p.Spec.HostUsers = &tr
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "c"}}
		p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: v1.NotRequired}}
		merge := v1.SupplementalGroupsPolicyMerge
		p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &merge}
		s.PrepareForCreate(ctx, p)
		if p.Spec.Resources != nil || p.Spec.HostUsers != nil || p.Spec.ResourceClaims != nil ||
			p.Spec.Containers[0].ResizePolicy != nil || p.Spec.SecurityContext.SupplementalGroupsPolicy != nil {
			t.Errorf("disabled fields kept: %+v", p.Spec)
		}
	})
	t.Run("matchLabelKeys merged into pod affinity selector", func(t *testing.T) {
		p := rawPod()
		p.Labels = map[string]string{"app": "web", "rev": "7"}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				TopologyKey:       "kubernetes.io/hostname",
				MatchLabelKeys:    []string{"rev", "missing"},
				MismatchLabelKeys: []string{"app"},
			}},
		}}
		s.PrepareForCreate(ctx, p)
		got := p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchExpressions
		want := []metav1.LabelSelectorRequirement{
			{Key: "rev", Operator: metav1.LabelSelectorOpIn, Values: []string{"7"}},
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Errorf("expressions = %s, want %s", gj, wj)
		}
		if errs := s.Validate(ctx, p); len(errs) != 0 {
			t.Errorf("unexpected errors: %v", errs)
		}
	})
}

func TestQOSClass(t *testing.T) {
	c := func(name string, req, lim v1.ResourceList) v1.Container {
		return v1.Container{Name: name, Image: "x", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	tests := []struct {
		name       string
		containers []v1.Container
		init       []v1.Container
		want       v1.PodQOSClass
	}{
		{"no resources", []v1.Container{c("a", nil, nil)}, nil, v1.PodQOSBestEffort},
		{"zero requests", []v1.Container{c("a", podtest.Resources("cpu", "0", "memory", "0"), nil)}, nil, v1.PodQOSBestEffort},
		{"only extended resources", []v1.Container{c("a", podtest.Resources("example.com/gpu", "1"), podtest.Resources("example.com/gpu", "1"))}, nil, v1.PodQOSBestEffort},
		{"requests only", []v1.Container{c("a", podtest.Resources("cpu", "100m"), nil)}, nil, v1.PodQOSBurstable},
		{"requests equal limits", []v1.Container{c("a", podtest.Resources("cpu", "1", "memory", "1Gi"), podtest.Resources("cpu", "1", "memory", "1Gi"))}, nil, v1.PodQOSGuaranteed},
		{"equal after unit normalisation", []v1.Container{c("a", podtest.Resources("cpu", "1000m", "memory", "1024Mi"), podtest.Resources("cpu", "1", "memory", "1Gi"))}, nil, v1.PodQOSGuaranteed},
		{"limits only (not defaulted)", []v1.Container{c("a", nil, podtest.Resources("cpu", "1", "memory", "1Gi"))}, nil, v1.PodQOSBurstable},
		{"requests below limits", []v1.Container{c("a", podtest.Resources("cpu", "500m", "memory", "1Gi"), podtest.Resources("cpu", "1", "memory", "1Gi"))}, nil, v1.PodQOSBurstable},
		{"cpu limit only", []v1.Container{c("a", podtest.Resources("cpu", "1"), podtest.Resources("cpu", "1"))}, nil, v1.PodQOSBurstable},
		{"one container without limits", []v1.Container{
			c("a", podtest.Resources("cpu", "1", "memory", "1Gi"), podtest.Resources("cpu", "1", "memory", "1Gi")),
			c("b", nil, nil),
		}, nil, v1.PodQOSBurstable},
		{"guaranteed with init container", []v1.Container{c("a", podtest.Resources("cpu", "1", "memory", "1Gi"), podtest.Resources("cpu", "1", "memory", "1Gi"))},
			[]v1.Container{c("i", podtest.Resources("cpu", "2", "memory", "2Gi"), podtest.Resources("cpu", "2", "memory", "2Gi"))}, v1.PodQOSGuaranteed},
		{"best effort container, burstable init", []v1.Container{c("a", nil, nil)}, []v1.Container{c("i", podtest.Resources("memory", "1Mi"), nil)}, v1.PodQOSBurstable},
		{"guaranteed plus extended resource", []v1.Container{c("a", podtest.Resources("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"), podtest.Resources("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"))}, nil, v1.PodQOSGuaranteed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{Spec: v1.PodSpec{Containers: tc.containers, InitContainers: tc.init}}
			if got := QOSClass(p); got != tc.want {
				t.Errorf("QOSClass = %q, want %q", got, tc.want)
			}
		})
	}
	// Defaulting (requests from limits) turns limits-only into Guaranteed.
	p := createdPod(func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Limits = podtest.Resources("cpu", "1", "memory", "1Gi")
	})
	if q := QOSClass(p); q != v1.PodQOSGuaranteed {
		t.Errorf("defaulted limits-only = %q", q)
	}
}
