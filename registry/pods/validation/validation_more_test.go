package validation_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/registry/pods/internal/podtest"
	"github.com/corekube/corekube/registry/pods/validation"
)

func TestValidateVolumeSources(t *testing.T) {
	neg := resource.MustParse("-1")
	badMode := int32(01000)
	badType := v1.HostPathType("Weird")
	tests := []struct {
		name string
		src  v1.VolumeSource
		want []string
	}{
		{"emptyDir", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}, nil},
		{"emptyDir negative size", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &neg}},
			[]string{"FieldValueForbidden spec.volumes[0].emptyDir.sizeLimit"}},
		{"hostPath", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}, nil},
		{"hostPath missing path", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}},
			[]string{"FieldValueRequired spec.volumes[0].hostPath.path"}},
		{"hostPath backsteps and type", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a/../b", Type: &badType}},
			[]string{"FieldValueInvalid spec.volumes[0].hostPath.path", "FieldValueNotSupported spec.volumes[0].hostPath.type"}},
		{"secret", v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", Items: []v1.KeyToPath{{Key: "k", Path: "p"}}}}, nil},
		{"secret problems", v1.VolumeSource{Secret: &v1.SecretVolumeSource{DefaultMode: &badMode, Items: []v1.KeyToPath{{Path: "/abs"}, {Key: "k", Path: "..x"}}}},
			[]string{
				"FieldValueRequired spec.volumes[0].secret.secretName",
				"FieldValueInvalid spec.volumes[0].secret.defaultMode",
				"FieldValueRequired spec.volumes[0].secret.items[0].key",
				"FieldValueInvalid spec.volumes[0].secret.items[0].path",
				"FieldValueInvalid spec.volumes[0].secret.items[1].path",
			}},
		{"configMap", v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}, nil},
		{"pvc missing claim", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}},
			[]string{"FieldValueRequired spec.volumes[0].persistentVolumeClaim.claimName"}},
		{"nfs relative path", v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs", Path: "rel"}},
			[]string{"FieldValueInvalid spec.volumes[0].nfs.path"}},
		{"gce partition", v1.VolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "d", Partition: 300}},
			[]string{"FieldValueInvalid spec.volumes[0].persistentDisk.partition"}},
		{"downwardAPI", v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
			{Path: "node", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}},
			{Path: "none"},
			{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}},
		}}}, []string{
			"FieldValueNotSupported spec.volumes[0].downwardAPI.fieldRef.fieldPath",
			"FieldValueRequired spec.volumes[0].downwardAPI",
			"FieldValueRequired spec.volumes[0].downwardAPI.resourceFieldRef.containerName",
		}},
		{"downwardAPI together with emptyDir", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, DownwardAPI: &v1.DownwardAPIVolumeSource{}},
			[]string{"FieldValueForbidden spec.volumes[0].downwarAPI"}},
		{"projected", v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{Items: []v1.KeyToPath{{Key: "a", Path: "x"}}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Items: []v1.KeyToPath{{Key: "b", Path: "x"}}}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}, Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}},
		}}}, []string{
			"FieldValueRequired spec.volumes[0].projected.sources[0].configMap.name",
			"FieldValueInvalid spec.volumes[0].projected",
			"FieldValueForbidden spec.volumes[0].projected.sources[2]",
		}},
		{"csi without driver", v1.VolumeSource{CSI: &v1.CSIVolumeSource{}},
			[]string{"FieldValueRequired spec.volumes[0].csi.driver"}},
		{"ephemeral without template", v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}},
			[]string{"FieldValueRequired spec.volumes[0].ephemeral.volumeClaimTemplate"}},
		{"no source", v1.VolumeSource{}, []string{"FieldValueRequired spec.volumes[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := createdPod()
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: tc.src}}
			podtest.ExpectErrs(t, validation.ValidatePod(p), tc.want...)
		})
	}
}

func TestValidateMiscSpec(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*v1.Pod)
		want []string
	}{
		{"dnsConfig", func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{
				Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "bad"},
				Searches:    []string{"example.com.", "Bad_Domain"},
				Options:     []v1.PodDNSConfigOption{{Name: ""}},
			}
		}, []string{
			"FieldValueInvalid spec.dnsConfig.nameservers",
			"FieldValueInvalid spec.dnsConfig.nameservers[3]",
			"FieldValueInvalid spec.dnsConfig.searches[1]",
			"FieldValueRequired spec.dnsConfig.options[0]",
		}},
		{"dnsNone without nameservers", func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{}
		}, []string{"FieldValueRequired spec.dnsConfig.nameservers"}},
		{"hostAliases", func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{{IP: "300.1.1.1", Hostnames: []string{"ok.example", "Not OK"}}}
		}, []string{"FieldValueInvalid spec.hostAliases[0].ip", "FieldValueInvalid spec.hostAliases[0].hostnames[1]"}},
		{"readinessGates", func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}, {ConditionType: "bad type"}}
		}, []string{"FieldValueInvalid spec.readinessGates[1].conditionType"}},
		{"priorityClassName and runtimeClassName", func(p *v1.Pod) {
			p.Spec.PriorityClassName = "High_Prio"
			rc := "Bad_RC"
			p.Spec.RuntimeClassName = &rc
		}, []string{"FieldValueInvalid spec.priorityClassName", "FieldValueInvalid spec.runtimeClassName"}},
		{"overhead", func(p *v1.Pod) { p.Spec.Overhead = podtest.Resources("cpu", "-1") },
			[]string{"FieldValueInvalid spec.overhead.limits[cpu]"}},
		{"topology spread details", func(p *v1.Pod) {
			honor := v1.NodeInclusionPolicy("Sometimes")
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway, MinDomains: podtest.Int32(2), NodeAffinityPolicy: &honor,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, MatchLabelKeys: []string{"app"}},
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway},
				{MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule, MatchLabelKeys: []string{"pod-template-hash"}},
			}
		}, []string{
			"FieldValueDuplicate spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}",
			"FieldValueInvalid spec.topologySpreadConstraints[0].minDomains",
			"FieldValueNotSupported spec.topologySpreadConstraints[0].nodeAffinityPolicy",
			"FieldValueInvalid spec.topologySpreadConstraints[0].matchLabelKeys[0]",
			"FieldValueRequired spec.topologySpreadConstraints[2].topologyKey",
			"FieldValueForbidden spec.topologySpreadConstraints[2].matchLabelKeys",
		}},
		{"pod affinity term", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					Namespaces:     []string{"Bad_NS"},
					MatchLabelKeys: []string{"a"},
				}},
				PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 101, PodAffinityTerm: v1.PodAffinityTerm{TopologyKey: "zone",
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}}}},
			}}
		}, []string{
			"FieldValueInvalid spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespace",
			"FieldValueForbidden spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys",
			"FieldValueRequired spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
			"FieldValueInvalid spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
			"FieldValueInvalid spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
			"FieldValueInvalid spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
			"FieldValueInvalid spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchExpressions[0].operator",
		}},
		{"node field selector", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}},
					{Key: "metadata.uid", Operator: v1.NodeSelectorOpExists},
				}}},
			}}}
		}, []string{
			"FieldValueInvalid spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[1].operator",
			"FieldValueInvalid spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[1].key",
		}},
		{"seccomp annotation and field mismatch", func(p *v1.Pod) {
			p.Annotations = map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
			p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
		}, []string{"FieldValueForbidden spec.securityContext.seccompProfile.type"}},
		{"bad seccomp annotation", func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.seccomp.security.alpha.kubernetes.io/c": "bogus"}
		}, []string{"FieldValueInvalid metadata.annotations.container.seccomp.security.alpha.kubernetes.io/c"}},
		{"apparmor annotation and field mismatch", func(p *v1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		}, []string{"FieldValueForbidden spec.containers[0].securityContext.appArmorProfile.type"}},
		{"windows pod", func(p *v1.Pod) {
			p.Spec.OS = &v1.PodOS{Name: v1.Windows}
			p.Spec.SecurityContext.RunAsUser = podtest.Int64(1000)
			tr := true
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &tr}
		}, []string{"FieldValueForbidden spec.securityContext.runAsUser", "FieldValueForbidden spec.containers[0].securityContext.privileged"}},
		{"env from prefix and names", func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{
				{Prefix: "A=", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
				{SecretRef: &v1.SecretEnvSource{}},
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}, SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "y"}}},
			}
		}, []string{
			"FieldValueInvalid spec.containers[0].envFrom[0].prefix",
			"FieldValueRequired spec.containers[0].envFrom[1].secretRef.name",
			"FieldValueInvalid spec.containers[0].envFrom",
		}},
		{"resource field ref divisor", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("2")}}}}
		}, []string{"FieldValueInvalid spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor"}},
		{"volume devices", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "blk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
				{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			}
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/x"}, {Name: "e", DevicePath: "/dev/y"}}
		}, []string{"FieldValueInvalid spec.containers[0].volumeDevices[1].name"}},
		{"bidirectional mount propagation needs privileged", func(p *v1.Pod) {
			bi := v1.MountPropagationBidirectional
			p.Spec.Volumes = []v1.Volume{{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "e", MountPath: "/e", MountPropagation: &bi}}
		}, []string{"FieldValueForbidden spec.containers[0].volumeMounts.mountPropagation"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := createdPod()
			tc.mut(p)
			podtest.ExpectErrs(t, validation.ValidatePod(p), tc.want...)
		})
	}
}

func TestValidateUpdateEphemeralContainers(t *testing.T) {
	old := createdPod()
	p := updated(old, func(p *v1.Pod) {
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{
			{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}, TargetContainerName: "c"},
			{EphemeralContainerCommon: v1.EphemeralContainerCommon{
				Name: "c", Image: "busybox ", Ports: []v1.ContainerPort{{ContainerPort: 80}}}, TargetContainerName: "nope"},
		}
	})
	podtest.ExpectErrs(t, validation.ValidatePodUpdate(p, old),
		"FieldValueInvalid spec.ephemeralContainers[1].image",
		"FieldValueDuplicate spec.ephemeralContainers[1].name",
		"FieldValueNotFound spec.ephemeralContainers[1].targetContainerName",
		"FieldValueForbidden spec.ephemeralContainers[1].ports",
		"FieldValueForbidden spec")
}

// Stored pods that already violate a newer, stricter rule stay updatable.
func TestValidateUpdateRelaxedForOldPods(t *testing.T) {
	old := createdPod(func(p *v1.Pod) {
		p.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "007"}
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: podtest.Resources("hugepages-2Mi", "3Mi", "memory", "1Gi"), Requests: podtest.Resources("hugepages-2Mi", "3Mi", "memory", "1Gi")}
	})
	if errs := validation.ValidatePod(old); len(errs) != 3 {
		t.Fatalf("old pod should be invalid on create: %v", errs)
	}
	p := updated(old, func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox:2" })
	if errs := validation.ValidatePodUpdate(p, old); len(errs) != 0 {
		t.Errorf("update of legacy pod rejected: %v", errs)
	}
}

func TestValidateUpdateAnnotations(t *testing.T) {
	old := createdPod(func(p *v1.Pod) {
		p.Spec.NodeName = "n1"
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
	})
	p := updated(old, func(p *v1.Pod) {
		p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}
	})
	podtest.ExpectErrs(t, validation.ValidatePodUpdate(p, old),
		"FieldValueForbidden metadata.annotations[kubernetes.io/config.mirror]",
		"FieldValueForbidden metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]")
}
