package validation_test

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/registry/pods/internal/podtest"
	"github.com/corekube/corekube/registry/pods/validation"
)

func TestValidateCreate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*v1.Pod)
		want []string
	}{
		{"valid", func(p *v1.Pod) {}, nil},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, []string{"FieldValueRequired spec.containers"}},
		{"container name missing", func(p *v1.Pod) { p.Spec.Containers[0].Name = "" },
			[]string{"FieldValueRequired spec.containers[0].name"}},
		{"container name not a DNS label", func(p *v1.Pod) { p.Spec.Containers[0].Name = "Bad_Name" },
			[]string{"FieldValueInvalid spec.containers[0].name"}},
		{"duplicate container names", func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) },
			[]string{"FieldValueDuplicate spec.containers[1].name"}},
		{"image missing", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" },
			[]string{"FieldValueRequired spec.containers[0].image"}},
		{"image with whitespace", func(p *v1.Pod) { p.Spec.Containers[0].Image = " busybox" },
			[]string{"FieldValueInvalid spec.containers[0].image"}},
		{"restartPolicy not supported", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			[]string{"FieldValueNotSupported spec.restartPolicy"}},
		{"dnsPolicy not supported", func(p *v1.Pod) { p.Spec.DNSPolicy = "Google" },
			[]string{"FieldValueNotSupported spec.dnsPolicy"}},
		{"dnsPolicy None without dnsConfig", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone },
			[]string{"FieldValueRequired spec.dnsConfig"}},
		{"terminationGracePeriodSeconds missing", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil },
			[]string{"FieldValueRequired spec.terminationGracePeriodSeconds"}},
		{"negative terminationGracePeriodSeconds is accepted (kube only warns)", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = podtest.Int64(-5) }, nil},
		{"activeDeadlineSeconds zero", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(0) },
			[]string{"FieldValueInvalid spec.activeDeadlineSeconds"}},
		{"activeDeadlineSeconds positive", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(10) }, nil},
		{"nodeName not a subdomain", func(p *v1.Pod) { p.Spec.NodeName = "Bad_Node" },
			[]string{"FieldValueInvalid spec.nodeName"}},
		{"nodeName valid", func(p *v1.Pod) { p.Spec.NodeName = "node-1.example.com" }, nil},
		{"serviceAccountName invalid", func(p *v1.Pod) { p.Spec.ServiceAccountName = "Bad_SA" },
			[]string{"FieldValueInvalid spec.serviceAccountName"}},
		{"hostname and subdomain", func(p *v1.Pod) { p.Spec.Hostname = "a.b"; p.Spec.Subdomain = "Sub" },
			[]string{"FieldValueInvalid spec.hostname", "FieldValueInvalid spec.subdomain"}},
		{"nodeSelector bad label", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"a b": "c"} },
			[]string{"FieldValueInvalid spec.nodeSelector"}},
		{"preemptionPolicy not supported", func(p *v1.Pod) { pp := v1.PreemptionPolicy("Sometimes"); p.Spec.PreemptionPolicy = &pp },
			[]string{"FieldValueNotSupported spec.preemptionPolicy"}},
		{"os name not supported", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "plan9"} },
			[]string{"FieldValueNotSupported spec.os"}},
		{"linux pod with windows options", func(p *v1.Pod) {
			p.Spec.OS = &v1.PodOS{Name: v1.Linux}
			p.Spec.SecurityContext.WindowsOptions = &v1.WindowsSecurityContextOptions{}
		}, []string{"FieldValueForbidden spec.securityContext.windowsOptions"}},

		// resources
		{"requests above limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: podtest.Resources("cpu", "2"), Limits: podtest.Resources("cpu", "1")}
		}, []string{"FieldValueInvalid spec.containers[0].resources.requests"}},
		{"negative quantity", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = podtest.Resources("memory", "-1") },
			[]string{"FieldValueInvalid spec.containers[0].resources.requests[memory]"}},
		{"unknown unqualified resource", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = podtest.Resources("foo", "1") },
			[]string{"FieldValueInvalid spec.containers[0].resources.limits[foo]", "FieldValueInvalid spec.containers[0].resources.limits[foo]"}},
		{"non-container standard resource", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = podtest.Resources("pods", "1") },
			[]string{"FieldValueInvalid spec.containers[0].resources.requests[pods]"}},
		{"extended resource without limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = podtest.Resources("example.com/gpu", "1") },
			[]string{"FieldValueRequired spec.containers[0].resources.limits"}},
		{"extended resource request differs from limit", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: podtest.Resources("example.com/gpu", "1"), Limits: podtest.Resources("example.com/gpu", "2")}
		}, []string{"FieldValueInvalid spec.containers[0].resources.requests"}},
		{"extended resource must be integer", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: podtest.Resources("example.com/gpu", "500m"), Limits: podtest.Resources("example.com/gpu", "500m")}
		}, []string{"FieldValueInvalid spec.containers[0].resources.limits[example.com/gpu]", "FieldValueInvalid spec.containers[0].resources.requests[example.com/gpu]"}},
		{"hugepages need cpu or memory", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: podtest.Resources("hugepages-2Mi", "4Mi"), Limits: podtest.Resources("hugepages-2Mi", "4Mi")}
		}, []string{"FieldValueForbidden spec.containers[0].resources"}},
		{"hugepages not a page multiple", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: podtest.Resources("hugepages-2Mi", "3Mi", "memory", "1Gi"), Limits: podtest.Resources("hugepages-2Mi", "3Mi", "memory", "1Gi")}
		}, []string{"FieldValueInvalid spec.containers[0].resources.limits[hugepages-2Mi]", "FieldValueInvalid spec.containers[0].resources.requests[hugepages-2Mi]"}},
		{"valid resources", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Requests: podtest.Resources("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi", "example.com/gpu", "1"),
				Limits:   podtest.Resources("cpu", "1", "memory", "128Mi", "example.com/gpu", "1"),
			}
		}, nil},

		// ports
		{"containerPort missing", func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{Protocol: v1.ProtocolTCP}} },
			[]string{"FieldValueRequired spec.containers[0].ports[0].containerPort"}},
		{"containerPort out of range", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000, HostPort: -1, Protocol: v1.ProtocolTCP}}
		}, []string{"FieldValueInvalid spec.containers[0].ports[0].containerPort", "FieldValueInvalid spec.containers[0].ports[0].hostPort"}},
		{"protocol not supported", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
		},
			[]string{"FieldValueNotSupported spec.containers[0].ports[0].protocol"}},
		{"protocol missing", func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}} },
			[]string{"FieldValueRequired spec.containers[0].ports[0].protocol"}},
		{"port names", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{
				{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP},
				{Name: "http", ContainerPort: 81, Protocol: v1.ProtocolTCP},
				{Name: "Not_Valid", ContainerPort: 82, Protocol: v1.ProtocolTCP},
			}
		}, []string{"FieldValueDuplicate spec.containers[0].ports[1].name", "FieldValueInvalid spec.containers[0].ports[2].name"}},
		{"host port conflict", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, *p.Spec.Containers[0].DeepCopy())
			p.Spec.Containers[1].Name = "d"
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
			p.Spec.Containers[1].Ports = []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080, Protocol: v1.ProtocolTCP}}
		}, []string{"FieldValueDuplicate spec.containers[1].ports[0].hostPort"}},
		{"hostNetwork hostPort must match", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 81, Protocol: v1.ProtocolTCP}}
		}, []string{"FieldValueInvalid spec.containers[0].ports[0].hostPort"}},

		// env
		{"env names", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: ""}, {Name: "A=B"}, {Name: "1-relaxed.ok"}}
		}, []string{"FieldValueRequired spec.containers[0].env[0].name", "FieldValueInvalid spec.containers[0].env[1].name"}},
		{"env valueFrom", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{
				{Name: "A", ValueFrom: &v1.EnvVarSource{}},
				{Name: "B", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.phase"}}},
				{Name: "C", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}}},
				{Name: "D", Value: "x", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}},
				{Name: "E", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.gpu"}}},
			}
		}, []string{
			"FieldValueInvalid spec.containers[0].env[0].valueFrom",
			"FieldValueNotSupported spec.containers[0].env[1].valueFrom.fieldRef.fieldPath",
			"FieldValueInvalid spec.containers[0].env[3].valueFrom",
			"FieldValueNotSupported spec.containers[0].env[4].valueFrom.resourceFieldRef.resource",
		}},
		{"envFrom without source", func(p *v1.Pod) { p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{}} },
			[]string{"FieldValueInvalid spec.containers[0].envFrom"}},

		// probes and lifecycle
		{"liveness successThreshold must be 1", func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}, SuccessThreshold: 2, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}
		}, []string{"FieldValueInvalid spec.containers[0].livenessProbe.successThreshold"}},
		{"probe without handler", func(p *v1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}
		}, []string{"FieldValueRequired spec.containers[0].readinessProbe"}},
		{"probe with two handlers", func(p *v1.Pod) {
			p.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{
				Exec:      &v1.ExecAction{Command: []string{"true"}},
				TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")},
			}, SuccessThreshold: 1}
		}, []string{"FieldValueForbidden spec.containers[0].startupProbe.tcpSocket"}},
		{"preStop sleep longer than grace period", func(p *v1.Pod) {
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 60}}}
		}, []string{"FieldValueInvalid spec.containers[0].lifecycle.preStop.sleep"}},
		{"regular container restartPolicy forbidden", func(p *v1.Pod) {
			always := v1.ContainerRestartPolicyAlways
			p.Spec.Containers[0].RestartPolicy = &always
		}, []string{"FieldValueForbidden spec.containers[0].restartPolicy"}},

		// init containers
		{"init container name clashes with container", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{*p.Spec.Containers[0].DeepCopy()}
		}, []string{"FieldValueDuplicate spec.initContainers[0].name"}},
		{"init container rules", func(p *v1.Pod) {
			ic := *p.Spec.Containers[0].DeepCopy()
			ic.Name = "init"
			ic.Image = ""
			ic.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, SuccessThreshold: 1}
			onFailure := v1.ContainerRestartPolicy("OnFailure")
			ic.RestartPolicy = &onFailure
			p.Spec.InitContainers = []v1.Container{ic}
		}, []string{
			"FieldValueRequired spec.initContainers[0].image",
			"FieldValueNotSupported spec.initContainers[0].restartPolicy",
			"FieldValueForbidden spec.initContainers[0].livenessProbe",
		}},
		{"sidecar init container may have probes", func(p *v1.Pod) {
			ic := *p.Spec.Containers[0].DeepCopy()
			ic.Name = "sidecar"
			always := v1.ContainerRestartPolicyAlways
			ic.RestartPolicy = &always
			ic.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, SuccessThreshold: 1}
			p.Spec.InitContainers = []v1.Container{ic}
		}, nil},

		// volumes
		{"volumes", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "Bad", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "two", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "none"},
				{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
			}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
				{Name: "a", MountPath: "/a"},
				{Name: "missing", MountPath: "/a"},
				{Name: "a", MountPath: "/b", SubPath: "../x"},
			}
		}, []string{
			"FieldValueDuplicate spec.volumes[1].name",
			"FieldValueInvalid spec.volumes[2].name",
			"FieldValueForbidden spec.volumes[3].secret",
			"FieldValueRequired spec.volumes[4]",
			"FieldValueRequired spec.volumes[5].configMap.name",
			"FieldValueNotFound spec.containers[0].volumeMounts[1].name",
			"FieldValueInvalid spec.containers[0].volumeMounts[1].mountPath",
			"FieldValueInvalid spec.containers[0].volumeMounts.subPath",
		}},
		{"projected token needs serviceAccountName", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: podtest.Int64(3600)}}}}}}}
		}, []string{"FieldValueForbidden spec.volumes[0].projected.sources[0].serviceAccountToken"}},
		{"projected token with serviceAccountName", func(p *v1.Pod) {
			p.Spec.ServiceAccountName = "default"
			p.Spec.Volumes = []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: podtest.Int64(3600)}}}}}}}
		}, nil},

		// tolerations
		{"tolerations", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{
				{Key: "k", Operator: "Foo"},
				{Key: "k", Operator: v1.TolerationOpEqual, Value: "v", Effect: "Bad"},
				{Key: "bad key!", Operator: v1.TolerationOpExists},
				{Operator: v1.TolerationOpEqual},
				{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule, TolerationSeconds: podtest.Int64(5)},
				{Key: "k", Operator: v1.TolerationOpExists, Value: "v"},
				{Operator: v1.TolerationOpExists},
				{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: podtest.Int64(300)},
			}
		}, []string{
			"FieldValueNotSupported spec.tolerations[0].operator",
			"FieldValueNotSupported spec.tolerations[1].effect",
			"FieldValueInvalid spec.tolerations[2].key",
			"FieldValueInvalid spec.tolerations[3].operator",
			"FieldValueInvalid spec.tolerations[4].effect",
			"FieldValueInvalid spec.tolerations[5].operator",
		}},

		// scheduling
		{"affinity", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{
				NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{},
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 0,
						Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "k", Operator: v1.NodeSelectorOpIn}}}}},
				},
				PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}}},
			}
		}, []string{
			"FieldValueRequired spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
			"FieldValueInvalid spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
			"FieldValueRequired spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values",
		}},
		{"topology spread", func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
				{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule},
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "Maybe"},
			}
		}, []string{
			"FieldValueInvalid spec.topologySpreadConstraints[0].maxSkew",
			"FieldValueNotSupported spec.topologySpreadConstraints[1].whenUnsatisfiable",
		}},
		{"scheduling gates", func(p *v1.Pod) {
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}, {Name: "a"}, {Name: "not valid"}}
		}, []string{"FieldValueDuplicate spec.schedulingGates[1]", "FieldValueInvalid spec.schedulingGates[2]"}},
		{"nodeName with scheduling gates", func(p *v1.Pod) {
			p.Spec.NodeName = "n1"
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}}
		}, []string{"FieldValueForbidden spec.nodeName"}},
		{"ephemeral containers on create", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", ImagePullPolicy: v1.PullAlways, TerminationMessagePolicy: v1.TerminationMessageReadFile}}}
		}, []string{"FieldValueForbidden spec.ephemeralContainers"}},

		// security contexts
		{"security contexts", func(p *v1.Pod) {
			p.Spec.SecurityContext.RunAsUser = podtest.Int64(-1)
			p.Spec.SecurityContext.Sysctls = []v1.Sysctl{{Name: "net.core.somaxconn"}, {Name: "BAD"}}
			p.Spec.HostNetwork = true
			f, tr := false, true
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: &f, Privileged: &tr,
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
		}, []string{
			"FieldValueRequired spec.containers[0].securityContext.seccompProfile.localhostProfile",
			"FieldValueInvalid spec.containers[0].securityContext",
			"FieldValueInvalid spec.securityContext.runAsUser",
			"FieldValueInvalid spec.securityContext.sysctls[0].name",
			"FieldValueInvalid spec.securityContext.sysctls[1].name",
		}},
		{"run-as IDs", func(p *v1.Pod) {
			p.Spec.SecurityContext.RunAsGroup = podtest.Int64(-1)
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsUser: podtest.Int64(-1), RunAsGroup: podtest.Int64(-2)}
		}, []string{
			"FieldValueInvalid spec.containers[0].securityContext.runAsUser",
			"FieldValueInvalid spec.containers[0].securityContext.runAsGroup",
			"FieldValueInvalid spec.securityContext.runAsGroup",
		}},

		// pod-specific annotations
		{"mirror pod annotation needs nodeName", func(p *v1.Pod) {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "x"}
		}, []string{"FieldValueInvalid metadata.annotations[kubernetes.io/config.mirror]"}},
		{"pod deletion cost", func(p *v1.Pod) {
			p.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "+10"}
		}, []string{"FieldValueInvalid metadata.annotations[controller.kubernetes.io/pod-deletion-cost]"}},
		{"apparmor annotation for unknown container", func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/nope": "runtime/default"}
		}, []string{"FieldValueInvalid metadata.annotations[container.apparmor.security.beta.kubernetes.io/nope]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := createdPod()
			tc.mut(p)
			podtest.ExpectErrs(t, pods.NewStrategy().Validate(ctx, p), tc.want...)
		})
	}
}

func TestValidateMessages(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*v1.Pod)
		want string
	}{
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "spec.containers: Required value"},
		{"image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, "spec.containers[0].image: Required value"},
		{"restartPolicy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`},
		{"dnsPolicy", func(p *v1.Pod) { p.Spec.DNSPolicy = "X" },
			`spec.dnsPolicy: Unsupported value: "X": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`},
		{"container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "Bad_Name" },
			`spec.containers[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"duplicate", func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) },
			`spec.containers[1].name: Duplicate value: "c"`},
		{"activeDeadlineSeconds", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(0) },
			`spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive`},
		{"requests above limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: podtest.Resources("cpu", "2"), Limits: podtest.Resources("cpu", "1")}
		}, `spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
		{"negative", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = podtest.Resources("memory", "-1") },
			`spec.containers[0].resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0`},
		{"port", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000, Protocol: v1.ProtocolTCP}}
		}, `spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive`},
		{"protocol", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
		},
			`spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`},
		{"toleration operator", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: "Foo"}} },
			`spec.tolerations[0].operator: Unsupported value: "Foo": supported values: "Equal", "Exists"`},
		{"toleration effect", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule, TolerationSeconds: podtest.Int64(1)}}
		}, `spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when ` + "`tolerationSeconds`" + ` is set`},
		{"volume mount", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}} },
			`spec.containers[0].volumeMounts[0].name: Not found: "v"`},
		{"nodeName", func(p *v1.Pod) { p.Spec.NodeName = "Bad_Node" },
			`spec.nodeName: Invalid value: "Bad_Node": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := createdPod()
			tc.mut(p)
			errs := validation.ValidatePod(p)
			if len(errs) != 1 {
				t.Fatalf("want 1 error, got %v", errs)
			}
			if got := errs[0].Error(); got != tc.want {
				t.Errorf("\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestValidatePodSpecExported(t *testing.T) {
	p := createdPod()
	if errs := validation.ValidatePodSpec(&p.Spec, p.Name, nil); len(errs) != 0 {
		t.Errorf("unexpected: %v", errs)
	}
	p.Spec.Containers = nil
	podtest.ExpectErrs(t, validation.ValidatePodSpec(&p.Spec, "", nil), "FieldValueRequired containers")
}

func TestValidateStatusMessages(t *testing.T) {
	old := createdPod()
	tests := []struct {
		mut  func(*v1.Pod)
		want []string
	}{
		{func(p *v1.Pod) { p.Status.QOSClass = v1.PodQOSGuaranteed },
			[]string{`status.qosClass: Invalid value: "Guaranteed": field is immutable`}},
		{func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.1"}} }, []string{
			`status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:"10.0.0.1"}, core.PodIP{IP:"10.0.0.1"}}: may specify no more than one IP for each IP family`,
			`status.podIPs[1]: Duplicate value: core.PodIP{IP:"10.0.0.1"}`,
		}},
		{func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "x"}} },
			[]string{`status.podIPs[0]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
	}
	for _, tc := range tests {
		p := statusUpdated(old, tc.mut)
		errs := validation.ValidatePodStatusUpdate(p, old)
		got := make([]string, 0, len(errs))
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("\n got: %q\nwant: %q", got, tc.want)
		}
	}
}
