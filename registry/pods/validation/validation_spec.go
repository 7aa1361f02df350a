package validation

import (
	"fmt"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// ValidatePodSpec validates a (defaulted) pod spec as kube's ValidatePodSpec
// does for a Pod; podName is the pod's metadata.name (used for generic
// ephemeral volume names, may be empty).
func ValidatePodSpec(spec *v1.PodSpec, podName string, fldPath *field.Path) field.ErrorList {
	return validatePodSpec(spec, podName, fldPath, options{})
}

func validatePodSpec(spec *v1.PodSpec, podName string, fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("terminationGracePeriodSeconds"), ""))
	}
	gracePeriod := spec.TerminationGracePeriodSeconds
	hostUsers := spec.HostUsers == nil || *spec.HostUsers

	vols, vErrs := validateVolumes(spec.Volumes, podName, fldPath.Child("volumes"), opts)
	allErrs = append(allErrs, vErrs...)
	claimNames := sets.New[string]()
	for _, c := range spec.ResourceClaims {
		if c.Name != "" {
			claimNames.Insert(c.Name)
		}
	}
	allErrs = append(allErrs, validatePodResourceClaims(spec.ResourceClaims, fldPath.Child("resourceClaims"))...)
	allErrs = append(allErrs, validateContainers(spec.Containers, vols, claimNames, gracePeriod, fldPath.Child("containers"), opts, hostUsers)...)
	allErrs = append(allErrs, validateInitContainers(spec.InitContainers, spec.Containers, vols, claimNames, gracePeriod, fldPath.Child("initContainers"), opts, hostUsers)...)
	allErrs = append(allErrs, validateEphemeralContainers(spec.EphemeralContainers, spec.Containers, spec.InitContainers, vols, claimNames, fldPath.Child("ephemeralContainers"), opts, hostUsers)...)

	// hostNetwork: hostPort must equal containerPort.
	if spec.HostNetwork {
		cp := fldPath.Child("containers")
		for i, c := range spec.Containers {
			for j, port := range c.Ports {
				if port.HostPort != port.ContainerPort {
					allErrs = append(allErrs, field.Invalid(cp.Index(i).Child("ports").Index(j).Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	allErrs = append(allErrs, validateEnum(fldPath.Child("restartPolicy"), spec.RestartPolicy, v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever)...)
	allErrs = append(allErrs, validateEnum(fldPath.Child("dnsPolicy"), spec.DNSPolicy, v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone)...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	allErrs = append(allErrs, validatePodSecurityContext(spec, fldPath.Child("securityContext"), opts)...)
	allErrs = append(allErrs, validateAffinity(spec.Affinity, opts, fldPath.Child("affinity"))...)
	allErrs = append(allErrs, validatePodDNSConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	for i, g := range spec.ReadinessGates {
		allErrs = append(allErrs, validateQualifiedName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	seenGates := sets.New[string]()
	for i, g := range spec.SchedulingGates {
		p := fldPath.Child("schedulingGates").Index(i)
		allErrs = append(allErrs, validateQualifiedName(g.Name, p)...)
		if seenGates.Has(g.Name) {
			allErrs = append(allErrs, field.Duplicate(p, g.Name))
		}
		seenGates.Insert(g.Name)
	}
	allErrs = append(allErrs, validateTopologySpreadConstraints(spec.TopologySpreadConstraints, fldPath.Child("topologySpreadConstraints"), opts)...)
	if !hostUsers {
		if spec.HostNetwork {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("hostNetwork"), "when `pod.Spec.HostUsers` is false"))
		}
		if spec.HostPID {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("HostPID"), "when `pod.Spec.HostUsers` is false"))
		}
		if spec.HostIPC {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("HostIPC"), "when `pod.Spec.HostUsers` is false"))
		}
	}
	if spec.ServiceAccountName != "" {
		allErrs = append(allErrs, validateDNSSubdomainName(spec.ServiceAccountName, fldPath.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		allErrs = append(allErrs, validateDNSSubdomainName(spec.NodeName, fldPath.Child("nodeName"))...)
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.Hostname != "" {
		allErrs = append(allErrs, validateDNS1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		allErrs = append(allErrs, validateDNS1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	if len(spec.Tolerations) > 0 {
		allErrs = append(allErrs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	}
	for i, ha := range spec.HostAliases {
		allErrs = append(allErrs, validation.IsValidIP(fldPath.Child("hostAliases").Index(i).Child("ip"), ha.IP)...)
		for j, h := range ha.Hostnames {
			allErrs = append(allErrs, validateDNSSubdomain(h, fldPath.Child("hostAliases").Index(i).Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		allErrs = append(allErrs, validateDNSSubdomainName(spec.PriorityClassName, fldPath.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		allErrs = append(allErrs, validateDNSSubdomainName(*spec.RuntimeClassName, fldPath.Child("runtimeClassName"))...)
	}
	if spec.PreemptionPolicy != nil {
		allErrs = append(allErrs, validateEnum(fldPath.Child("preemptionPolicy"), *spec.PreemptionPolicy, v1.PreemptLowerPriority, v1.PreemptNever)...)
	}
	if spec.Overhead != nil {
		allErrs = append(allErrs, validateResourceRequirements(&v1.ResourceRequirements{Limits: spec.Overhead}, nil, fldPath.Child("overhead"), opts)...)
	}
	if spec.OS != nil {
		allErrs = append(allErrs, validateOS(spec, fldPath)...)
	}
	return allErrs
}

// validateEnum reports Required for "" and NotSupported (listing valid in
// kube's order) for anything else not in valid.
func validateEnum[T ~string](fldPath *field.Path, value T, valid ...T) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	for _, v := range valid {
		if value == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateDNSSubdomain(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

// validateDNSSubdomainName is a ValidateNameFunc (NameIsDNSSubdomain, no
// prefix) reported as Invalid errors.
func validateDNSSubdomainName(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(value, false) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func visitContainersWithPath(spec *v1.PodSpec, specPath *field.Path, f func(*v1.Container, *field.Path)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i], specPath.Child("initContainers").Index(i))
	}
	for i := range spec.Containers {
		f(&spec.Containers[i], specPath.Child("containers").Index(i))
	}
	for i := range spec.EphemeralContainers {
		f((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), specPath.Child("ephemeralContainers").Index(i))
	}
}

// ---- containers ----

func validateContainers(containers []v1.Container, vols map[string]v1.VolumeSource, claims sets.Set[string], gracePeriod *int64, fldPath *field.Path, opts options, hostUsers bool) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i := range containers {
		c := &containers[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateContainerCommon(c, vols, claims, p, opts, hostUsers)...)
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		if c.Lifecycle != nil {
			allErrs = append(allErrs, validateLifecycle(c.Lifecycle, gracePeriod, p.Child("lifecycle"))...)
		}
		allErrs = append(allErrs, validateProbeKind(c.LivenessProbe, gracePeriod, p.Child("livenessProbe"), probeLiveness)...)
		allErrs = append(allErrs, validateProbeKind(c.ReadinessProbe, gracePeriod, p.Child("readinessProbe"), probeReadiness)...)
		allErrs = append(allErrs, validateProbeKind(c.StartupProbe, gracePeriod, p.Child("startupProbe"), probeStartup)...)
		if c.RestartPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(allErrs, checkHostPortConflicts(containers, fldPath)...)
}

func validateInitContainers(containers, regular []v1.Container, vols map[string]v1.VolumeSource, claims sets.Set[string], gracePeriod *int64, fldPath *field.Path, opts options, hostUsers bool) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range containers {
		c := &containers[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateContainerCommon(c, vols, claims, p, opts, hostUsers)...)
		restartAlways := false
		if c.RestartPolicy != nil {
			if *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
				allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways}))
			}
			restartAlways = *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		}
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		// kube checks each init container on its own, with index 0.
		allErrs = append(allErrs, checkHostPortConflicts([]v1.Container{*c}, fldPath)...)
		if restartAlways {
			if c.Lifecycle != nil {
				allErrs = append(allErrs, validateLifecycle(c.Lifecycle, gracePeriod, p.Child("lifecycle"))...)
			}
			allErrs = append(allErrs, validateProbeKind(c.LivenessProbe, gracePeriod, p.Child("livenessProbe"), probeLiveness)...)
			allErrs = append(allErrs, validateProbeKind(c.ReadinessProbe, gracePeriod, p.Child("readinessProbe"), probeReadiness)...)
			allErrs = append(allErrs, validateProbeKind(c.StartupProbe, gracePeriod, p.Child("startupProbe"), probeStartup)...)
		} else {
			const msg = "may not be set for init containers without restartPolicy=Always"
			if c.Lifecycle != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("lifecycle"), msg))
			}
			if c.LivenessProbe != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("livenessProbe"), msg))
			}
			if c.ReadinessProbe != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("readinessProbe"), msg))
			}
			if c.StartupProbe != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("startupProbe"), msg))
			}
		}
		if len(c.ResizePolicy) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("resizePolicy"), c.ResizePolicy, "must not be set for init containers"))
		}
	}
	return allErrs
}

func validateEphemeralContainers(ecs []v1.EphemeralContainer, containers, initContainers []v1.Container, vols map[string]v1.VolumeSource, claims sets.Set[string], fldPath *field.Path, opts options, hostUsers bool) field.ErrorList {
	var allErrs field.ErrorList
	if len(ecs) == 0 {
		return allErrs
	}
	other, all := sets.New[string](), sets.New[string]()
	for _, c := range containers {
		other.Insert(c.Name)
		all.Insert(c.Name)
	}
	for _, c := range initContainers {
		other.Insert(c.Name)
		all.Insert(c.Name)
	}
	for i := range ecs {
		ec := &ecs[i]
		p := fldPath.Index(i)
		c := (*v1.Container)(&ec.EphemeralContainerCommon)
		allErrs = append(allErrs, validateContainerCommon(c, vols, claims, p, opts, hostUsers)...)
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			allErrs = append(allErrs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		if all.Has(ec.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), ec.Name))
		} else {
			all.Insert(ec.Name)
		}
		if ec.TargetContainerName != "" && !other.Has(ec.TargetContainerName) {
			allErrs = append(allErrs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		const msg = "cannot be set for an Ephemeral Container"
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ports", len(c.Ports) > 0},
			{"resources", len(c.Resources.Limits)+len(c.Resources.Requests)+len(c.Resources.Claims) > 0},
			{"resizePolicy", len(c.ResizePolicy) > 0},
			{"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil},
			{"lifecycle", c.Lifecycle != nil},
			{"restartPolicy", c.RestartPolicy != nil},
		} {
			if f.set {
				allErrs = append(allErrs, field.Forbidden(p.Child(f.name), msg))
			}
		}
		for j, vm := range c.VolumeMounts {
			if vm.SubPath != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), msg))
			}
			if vm.SubPathExpr != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), msg))
			}
		}
	}
	return allErrs
}

func validateContainerCommon(c *v1.Container, vols map[string]v1.VolumeSource, claims sets.Set[string], p *field.Path, opts options, hostUsers bool) field.ErrorList {
	var allErrs field.ErrorList
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateDNS1123Label(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	}
	allErrs = append(allErrs, validateEnum(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError)...)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	devices := map[string]string{}
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	allErrs = append(allErrs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	allErrs = append(allErrs, validateEnv(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, validateVolumeMounts(c, devices, vols, p.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateVolumeDevices(c.VolumeDevices, mounts, vols, p.Child("volumeDevices"))...)
	// kube lists the supported pull policies sorted.
	allErrs = append(allErrs, validateEnum(p.Child("imagePullPolicy"), c.ImagePullPolicy, v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)...)
	allErrs = append(allErrs, validateResourceRequirements(&c.Resources, claims, p.Child("resources"), opts)...)
	allErrs = append(allErrs, validateSecurityContext(c.SecurityContext, p.Child("securityContext"), hostUsers)...)
	return allErrs
}

// checkHostPortConflicts reports a Duplicate for every repeated
// protocol/hostIP/hostPort triple across containers.
func checkHostPortConflicts(containers []v1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			s := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(s) {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), s))
			} else {
				seen.Insert(s)
			}
		}
	}
	return allErrs
}

func validateContainerPorts(ports []v1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					allErrs = append(allErrs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Protocol == "" {
			allErrs = append(allErrs, field.Required(p.Child("protocol"), ""))
		} else if port.Protocol != v1.ProtocolTCP && port.Protocol != v1.ProtocolUDP && port.Protocol != v1.ProtocolSCTP {
			allErrs = append(allErrs, field.NotSupported(p.Child("protocol"), port.Protocol, []v1.Protocol{v1.ProtocolSCTP, v1.ProtocolTCP, v1.ProtocolUDP}))
		}
	}
	return allErrs
}

var (
	envDownwardAPIFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
	volumeDownwardAPIFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.labels",
		"metadata.annotations", "metadata.uid")
	containerResourceFieldPaths = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage")
	downwardAPIConvertibleLabels = sets.New("metadata.annotations", "metadata.labels", "metadata.name",
		"metadata.namespace", "metadata.uid", "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName",
		"spec.schedulerName", "status.phase", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
)

// validateEnv checks env vars; RelaxedEnvironmentVariableValidation is on
// by default in v1.32, so names may be any printable ASCII but "=".
func validateEnv(vars []v1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		allErrs = append(allErrs, validateEnvVarValueFrom(ev, p.Child("valueFrom"))...)
	}
	return allErrs
}

func validateEnvVarValueFrom(ev v1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	vf := ev.ValueFrom
	if vf == nil {
		return allErrs
	}
	n := 0
	if vf.FieldRef != nil {
		n++
		allErrs = append(allErrs, validateObjectFieldSelector(vf.FieldRef, envDownwardAPIFieldPaths, fldPath.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
		allErrs = append(allErrs, validateContainerResourceFieldSelector(vf.ResourceFieldRef, fldPath.Child("resourceFieldRef"), false)...)
	}
	if vf.ConfigMapKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeySelector(vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if vf.SecretKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeySelector(vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	switch {
	case n == 0:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return allErrs
}

// splitMaybeSubscriptedPath splits "metadata.labels['key']".
func splitMaybeSubscriptedPath(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return fieldPath, "", false
	}
	return parts[0], parts[1], true
}

func convertDownwardAPIFieldLabel(version, label string) (string, error) {
	if version != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", version)
	}
	if p, _, ok := splitMaybeSubscriptedPath(label); ok {
		if p == "metadata.annotations" || p == "metadata.labels" {
			return label, nil
		}
		return "", fmt.Errorf("field label does not support subscript: %s", label)
	}
	if downwardAPIConvertibleLabels.Has(label) {
		return label, nil
	}
	if label == "spec.host" {
		return "spec.nodeName", nil
	}
	return "", fmt.Errorf("field label not supported: %s", label)
}

func validateObjectFieldSelector(fs *v1.ObjectFieldSelector, expressions sets.Set[string], fldPath *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	internal, err := convertDownwardAPIFieldLabel(fs.APIVersion, fs.FieldPath)
	if err != nil {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), fs.FieldPath, fmt.Sprintf("error converting fieldPath: %v", err))}
	}
	if p, subscript, ok := splitMaybeSubscriptedPath(internal); ok {
		switch p {
		case "metadata.annotations":
			return validateQualifiedName(strings.ToLower(subscript), fldPath)
		case "metadata.labels":
			return validateQualifiedName(subscript, fldPath)
		default:
			return field.ErrorList{field.Invalid(fldPath, p, "does not support subscript")}
		}
	} else if !expressions.Has(p) {
		return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), p, sets.List(expressions))}
	}
	return nil
}

func validateContainerResourceFieldSelector(fs *v1.ResourceFieldSelector, fldPath *field.Path, volume bool) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case volume && fs.ContainerName == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("containerName"), ""))
	case fs.Resource == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("resource"), ""))
	case !containerResourceFieldPaths.Has(fs.Resource) &&
		!strings.HasPrefix(fs.Resource, "requests.hugepages-") && !strings.HasPrefix(fs.Resource, "limits.hugepages-"):
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("resource"), fs.Resource, sets.List(containerResourceFieldPaths)))
	}
	if fs.Divisor.IsZero() {
		return allErrs
	}
	d := fs.Divisor.String()
	memDivisors := sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
	const memList = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
	switch fs.Resource {
	case "limits.cpu", "requests.cpu":
		if d != "1m" && d != "1" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values 1m and 1 are supported with the cpu resource"))
		}
	case "limits.memory", "requests.memory":
		if !memDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values "+memList+" are supported with the memory resource"))
		}
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		if !memDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values "+memList+" are supported with the local ephemeral storage resource"))
		}
	}
	if strings.HasPrefix(fs.Resource, "requests.hugepages-") || strings.HasPrefix(fs.Resource, "limits.hugepages-") {
		if !memDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values "+memList+" are supported with the hugepages resource"))
		}
	}
	return allErrs
}

func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	allErrs := validateDNSSubdomainName(name, fldPath.Child("name"))
	if key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return allErrs
}

func validateEnvFrom(vars []v1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Prefix) {
				allErrs = append(allErrs, field.Invalid(p.Child("prefix"), ev.Prefix, msg))
			}
		}
		n := 0
		refName := func(name string, rp *field.Path) {
			if name == "" {
				allErrs = append(allErrs, field.Required(rp.Child("name"), ""))
				return
			}
			for _, msg := range apivalidation.NameIsDNSSubdomain(name, true) {
				allErrs = append(allErrs, field.Invalid(rp.Child("name"), name, msg))
			}
		}
		if ev.ConfigMapRef != nil {
			n++
			refName(ev.ConfigMapRef.Name, p.Child("configMapRef"))
		}
		if ev.SecretRef != nil {
			n++
			refName(ev.SecretRef.Name, p.Child("secretRef"))
		}
		if n == 0 {
			allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return allErrs
}

func validateVolumeMounts(c *v1.Container, devices map[string]string, vols map[string]v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	mountpoints := sets.New[string]()
	for i, m := range c.VolumeMounts {
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		}
		if mountpoints.Has(m.MountPath) {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountpoints.Insert(m.MountPath)
		if _, ok := devices[m.Name]; ok {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, dp := range devices {
			if dp == m.MountPath {
				allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
				break
			}
		}
		if v, ok := vols[m.Name]; ok && v.Image != nil {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPath"), m.SubPath, "not allowed in image volume sources"))
			}
			if m.SubPathExpr != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "not allowed in image volume sources"))
			}
		}
		// kube reports these at the list path (volumeMounts.subPath).
		if m.SubPath != "" {
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPathExpr, fldPath.Child("subPathExpr"))...)
		}
		if mp := m.MountPropagation; mp != nil {
			pp := fldPath.Child("mountPropagation")
			switch *mp {
			case v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone:
			default:
				allErrs = append(allErrs, field.NotSupported(pp, *mp, []v1.MountPropagationMode{v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone}))
			}
			privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
			if *mp == v1.MountPropagationBidirectional && !privileged {
				allErrs = append(allErrs, field.Forbidden(pp, "Bidirectional mount propagation is available only to privileged containers"))
			}
		}
		if rro := m.RecursiveReadOnly; rro != nil {
			rp := fldPath.Child("recursiveReadOnly")
			switch *rro {
			case v1.RecursiveReadOnlyDisabled:
			case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
				if !m.ReadOnly {
					allErrs = append(allErrs, field.Forbidden(rp, "may only be specified when readOnly is true"))
				}
				if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
					allErrs = append(allErrs, field.Forbidden(rp, "may only be specified when mountPropagation is None or not specified"))
				}
			default:
				allErrs = append(allErrs, field.NotSupported(rp, *rro, []v1.RecursiveReadOnlyMode{v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible}))
			}
		}
	}
	return allErrs
}

func validateVolumeDevices(devices []v1.VolumeDevice, mounts map[string]string, vols map[string]v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths, names := sets.New[string](), sets.New[string]()
	for i, d := range devices {
		p := fldPath.Index(i)
		src, matched := vols[d.Name]
		isPVC := matched && (src.PersistentVolumeClaim != nil || src.Ephemeral != nil)
		if d.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if names.Has(d.Name) {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must be unique"))
		}
		if matched && !isPVC {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !matched {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			allErrs = append(allErrs, field.Required(p.Child("devicePath"), ""))
		}
		if paths.Has(d.DevicePath) {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(validatePathNoBacksteps(d.DevicePath, fldPath.Child("devicePath"))) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths.Insert(d.DevicePath)
		}
		if _, ok := mounts[d.Name]; ok {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		for _, mp := range mounts {
			if mp == d.DevicePath {
				allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
				break
			}
		}
		if d.Name != "" {
			names.Insert(d.Name)
		}
	}
	return allErrs
}

func validatePathNoBacksteps(targetPath string, fldPath *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(targetPath), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fldPath, targetPath, "must not contain '..'")}
		}
	}
	return nil
}

func validateLocalDescendingPath(targetPath string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if path.IsAbs(targetPath) {
		allErrs = append(allErrs, field.Invalid(fldPath, targetPath, "must be a relative path"))
	}
	return append(allErrs, validatePathNoBacksteps(targetPath, fldPath)...)
}

func validateLocalNonReservedPath(targetPath string, fldPath *field.Path) field.ErrorList {
	allErrs := validateLocalDescendingPath(targetPath, fldPath)
	if strings.HasPrefix(targetPath, "..") && !strings.HasPrefix(targetPath, "../") {
		allErrs = append(allErrs, field.Invalid(fldPath, targetPath, "must not start with '..'"))
	}
	return allErrs
}

// ---- probes and lifecycle ----

type probeKind int

const (
	probeLiveness probeKind = iota
	probeReadiness
	probeStartup
)

func validateProbeKind(probe *v1.Probe, gracePeriod *int64, fldPath *field.Path, kind probeKind) field.ErrorList {
	if probe == nil {
		return nil
	}
	allErrs := validateHandler(probe.Exec, probe.HTTPGet, probe.TCPSocket, probe.GRPC, nil, gracePeriod, fldPath)
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds},
		{"timeoutSeconds", probe.TimeoutSeconds},
		{"periodSeconds", probe.PeriodSeconds},
		{"successThreshold", probe.SuccessThreshold},
		{"failureThreshold", probe.FailureThreshold},
	} {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(f.v), fldPath.Child(f.name))...)
	}
	if probe.TerminationGracePeriodSeconds != nil && *probe.TerminationGracePeriodSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *probe.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	switch kind {
	case probeLiveness, probeStartup:
		if probe.SuccessThreshold != 1 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
		}
	case probeReadiness:
		if probe.TerminationGracePeriodSeconds != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), probe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	return allErrs
}

func validateLifecycle(lc *v1.Lifecycle, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if h := lc.PostStart; h != nil {
		allErrs = append(allErrs, validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, gracePeriod, fldPath.Child("postStart"))...)
	}
	if h := lc.PreStop; h != nil {
		allErrs = append(allErrs, validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, gracePeriod, fldPath.Child("preStop"))...)
	}
	return allErrs
}

func validateHandler(exec *v1.ExecAction, httpGet *v1.HTTPGetAction, tcp *v1.TCPSocketAction, grpc *v1.GRPCAction, sleep *v1.SleepAction, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	more := func(name string) bool {
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 handler type"))
			return true
		}
		n++
		return false
	}
	if exec != nil && !more("exec") && len(exec.Command) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("exec").Child("command"), ""))
	}
	if httpGet != nil && !more("httpGet") {
		hp := fldPath.Child("httpGet")
		if httpGet.Path == "" {
			allErrs = append(allErrs, field.Required(hp.Child("path"), ""))
		}
		allErrs = append(allErrs, validatePortNumOrName(httpGet.Port.Type == intstr.Int, httpGet.Port.IntValue(), httpGet.Port.StrVal, hp.Child("port"))...)
		if httpGet.Scheme != v1.URISchemeHTTP && httpGet.Scheme != v1.URISchemeHTTPS {
			allErrs = append(allErrs, field.NotSupported(hp.Child("scheme"), httpGet.Scheme, []v1.URIScheme{v1.URISchemeHTTP, v1.URISchemeHTTPS}))
		}
		for _, h := range httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				allErrs = append(allErrs, field.Invalid(hp.Child("httpHeaders"), h.Name, msg))
			}
		}
	}
	if tcp != nil && !more("tcpSocket") {
		allErrs = append(allErrs, validatePortNumOrName(tcp.Port.Type == intstr.Int, tcp.Port.IntValue(), tcp.Port.StrVal, fldPath.Child("tcpSocket").Child("port"))...)
	}
	if grpc != nil && !more("grpc") {
		allErrs = append(allErrs, validatePortNumOrName(true, int(grpc.Port), "", fldPath.Child("grpc").Child("port"))...)
	}
	if sleep != nil && !more("sleep") {
		if gracePeriod != nil && (sleep.Seconds <= 0 || sleep.Seconds > *gracePeriod) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("sleep"), sleep.Seconds,
				fmt.Sprintf("must be greater than 0 and less than terminationGracePeriodSeconds (%d). Enable AllowPodLifecycleSleepActionZeroValue feature gate for zero sleep.", *gracePeriod)))
		}
	}
	if n == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must specify a handler type"))
	}
	return allErrs
}

func validatePortNumOrName(isInt bool, num int, name string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if isInt {
		for _, msg := range validation.IsValidPortNum(num) {
			allErrs = append(allErrs, field.Invalid(fldPath, num, msg))
		}
		return allErrs
	}
	for _, msg := range validation.IsValidPortName(name) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	return allErrs
}

// ---- security contexts ----

func validateSecurityContext(sc *v1.SecurityContext, fldPath *field.Path, hostUsers bool) field.ErrorList {
	var allErrs field.ErrorList
	if sc == nil {
		return allErrs
	}
	allErrs = append(allErrs, validateRunAsIDs(sc.RunAsUser, sc.RunAsGroup, fldPath)...)
	if sc.ProcMount != nil {
		if *sc.ProcMount != v1.DefaultProcMount && *sc.ProcMount != v1.UnmaskedProcMount {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("procMount"), *sc.ProcMount, []v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
		if hostUsers && *sc.ProcMount == v1.UnmaskedProcMount {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("procMount"), sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	allErrs = append(allErrs, validateSeccompProfileField(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if string(c) == "CAP_SYS_ADMIN" {
					allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	allErrs = append(allErrs, validateAppArmorProfileField(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
	return allErrs
}

// validateRunAsIDs checks the user and group a pod's or a container's
// security context runs as (runAsUser, runAsGroup), when set.
func validateRunAsIDs(user, group *int64, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runAsGroup"), *group, msg))
		}
	}
	return allErrs
}

var sysctlRE = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

func validatePodSecurityContext(spec *v1.PodSpec, fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	sc := spec.SecurityContext
	if sc == nil {
		return allErrs
	}
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	allErrs = append(allErrs, validateRunAsIDs(sc.RunAsUser, sc.RunAsGroup, fldPath)...)
	for g, gid := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(gid) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("supplementalGroups").Index(g), gid, msg))
		}
	}
	if spec.ShareProcessNamespace != nil && spec.HostPID && *spec.ShareProcessNamespace {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("shareProcessNamespace"), *spec.ShareProcessNamespace, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	names := sets.New[string]()
	for i, s := range sc.Sysctls {
		p := fldPath.Child("sysctls").Index(i).Child("name")
		if s.Name == "" {
			allErrs = append(allErrs, field.Required(p, ""))
		} else if len(s.Name) > 253 || !sysctlRE.MatchString(s.Name) {
			allErrs = append(allErrs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", 253, sysctlRE)))
		} else if names.Has(s.Name) {
			allErrs = append(allErrs, field.Duplicate(p, s.Name))
		}
		if !opts.allowNamespacedSysctlsForHostNetwork {
			if err := hostSysctlError(s.Name, spec, p); err != nil {
				allErrs = append(allErrs, err)
			}
		}
		names.Insert(s.Name)
	}
	if sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy != v1.FSGroupChangeAlways && *sc.FSGroupChangePolicy != v1.FSGroupChangeOnRootMismatch {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy, []v1.PodFSGroupChangePolicy{v1.FSGroupChangeAlways, v1.FSGroupChangeOnRootMismatch}))
	}
	allErrs = append(allErrs, validateSeccompProfileField(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	allErrs = append(allErrs, validateAppArmorProfileField(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
	return allErrs
}

// hostSysctlError is kube's ValidateHostSysctl: net.* sysctls are
// namespaced to the pod network, the SysV IPC / mqueue ones to the IPC
// namespace; neither may be set when that namespace is the host's.
func hostSysctlError(name string, spec *v1.PodSpec, fldPath *field.Path) *field.Error {
	n := name
	if i := strings.IndexAny(n, "./"); i >= 0 && n[i] == '/' {
		n = strings.Map(func(r rune) rune {
			switch r {
			case '.':
				return '/'
			case '/':
				return '.'
			}
			return r
		}, n)
	}
	ipc := map[string]bool{"kernel.sem": true, "kernel.shmall": true, "kernel.shmmax": true, "kernel.shmmni": true,
		"kernel.shm_rmid_forced": true, "kernel.msgmax": true, "kernel.msgmnb": true, "kernel.msgmni": true}
	switch {
	case spec.HostNetwork && strings.HasPrefix(n, "net."):
		return field.Invalid(fldPath, name, "may not be specified when 'hostNetwork' is true")
	case spec.HostIPC && (ipc[n] || strings.HasPrefix(n, "fs.mqueue.")):
		return field.Invalid(fldPath, name, "may not be specified when 'hostIPC' is true")
	}
	return nil
}

func validateSeccompProfileField(sp *v1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if sp == nil {
		return allErrs
	}
	switch sp.Type {
	case v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "type is required when seccompProfile is set"))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), sp.Type, []v1.SeccompProfileType{v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined}))
	}
	if sp.Type == v1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			allErrs = append(allErrs, validateLocalDescendingPath(*sp.LocalhostProfile, fldPath.Child("localhostProfile"))...)
		}
	} else if sp.LocalhostProfile != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
	}
	return allErrs
}

func validateAppArmorProfileField(profile *v1.AppArmorProfile, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if profile == nil {
		return allErrs
	}
	switch profile.Type {
	case v1.AppArmorProfileTypeLocalhost:
		if profile.LocalhostProfile == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		} else {
			lp := strings.TrimSpace(*profile.LocalhostProfile)
			if lp != *profile.LocalhostProfile {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("localhostProfile"), *profile.LocalhostProfile, "must not be padded with whitespace"))
			} else if lp == "" {
				allErrs = append(allErrs, field.Required(fldPath.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
			}
			if len(*profile.LocalhostProfile) > 4095 {
				allErrs = append(allErrs, field.TooLong(fldPath.Child("localhostProfile"), "", 4095))
			}
		}
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
		if profile.LocalhostProfile != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("localhostProfile"), profile.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "type is required when appArmorProfile is set"))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), profile.Type,
			[]v1.AppArmorProfileType{v1.AppArmorProfileTypeLocalhost, v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined}))
	}
	return allErrs
}

// ---- OS ----

func validateOS(spec *v1.PodSpec, specPath *field.Path) field.ErrorList {
	fldPath := specPath.Child("os")
	switch spec.OS.Name {
	case "":
		return field.ErrorList{field.Required(fldPath.Child("name"), "cannot be empty")}
	case v1.Linux:
		return validateLinux(spec, specPath)
	case v1.Windows:
		return validateWindows(spec, specPath)
	}
	return field.ErrorList{field.NotSupported(fldPath, spec.OS.Name, []v1.OSName{v1.Linux, v1.Windows})}
}

func validateLinux(spec *v1.PodSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("securityContext").Child("windowsOptions"), "windows options cannot be set for a linux pod"))
	}
	visitContainersWithPath(spec, specPath, func(c *v1.Container, p *field.Path) {
		if c.SecurityContext != nil && c.SecurityContext.WindowsOptions != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("securityContext").Child("windowsOptions"), "windows options cannot be set for a linux pod"))
		}
	})
	return allErrs
}

func validateWindows(spec *v1.PodSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	const msg = "cannot be set for a windows pod"
	forbid := func(set bool, p *field.Path) {
		if set {
			allErrs = append(allErrs, field.Forbidden(p, msg))
		}
	}
	scPath := specPath.Child("securityContext")
	if sc := spec.SecurityContext; sc != nil {
		forbid(sc.AppArmorProfile != nil, scPath.Child("appArmorProfile"))
		forbid(sc.SELinuxOptions != nil, scPath.Child("seLinuxOptions"))
		forbid(spec.HostUsers != nil, specPath.Child("hostUsers"))
		forbid(spec.HostPID, specPath.Child("hostPID"))
		forbid(spec.HostIPC, specPath.Child("hostIPC"))
		forbid(sc.SeccompProfile != nil, scPath.Child("seccompProfile"))
		forbid(sc.FSGroup != nil, scPath.Child("fsGroup"))
		forbid(sc.FSGroupChangePolicy != nil, scPath.Child("fsGroupChangePolicy"))
		forbid(len(sc.Sysctls) > 0, scPath.Child("sysctls"))
		forbid(spec.ShareProcessNamespace != nil, specPath.Child("shareProcessNamespace"))
		forbid(sc.RunAsUser != nil, scPath.Child("runAsUser"))
		forbid(sc.RunAsGroup != nil, scPath.Child("runAsGroup"))
		forbid(sc.SupplementalGroups != nil, scPath.Child("supplementalGroups"))
	}
	visitContainersWithPath(spec, specPath, func(c *v1.Container, p *field.Path) {
		sc := c.SecurityContext
		if sc == nil {
			return
		}
		cp := p.Child("securityContext")
		forbid(sc.AppArmorProfile != nil, cp.Child("appArmorProfile"))
		forbid(sc.SELinuxOptions != nil, cp.Child("seLinuxOptions"))
		forbid(sc.SeccompProfile != nil, cp.Child("seccompProfile"))
		forbid(sc.Capabilities != nil, cp.Child("capabilities"))
		forbid(sc.ReadOnlyRootFilesystem != nil, cp.Child("readOnlyRootFilesystem"))
		forbid(sc.Privileged != nil, cp.Child("privileged"))
		forbid(sc.AllowPrivilegeEscalation != nil, cp.Child("allowPrivilegeEscalation"))
		forbid(sc.ProcMount != nil, cp.Child("procMount"))
		forbid(sc.RunAsUser != nil, cp.Child("runAsUser"))
		forbid(sc.RunAsGroup != nil, cp.Child("runAsGroup"))
	})
	return allErrs
}

func validatePodResourceClaims(claims []v1.PodResourceClaim, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, c := range claims {
		p := fldPath.Index(i)
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			allErrs = append(allErrs, validateDNS1123Label(c.Name, p.Child("name"))...)
			names.Insert(c.Name)
		}
		if c.ResourceClaimName != nil && c.ResourceClaimTemplateName != nil {
			allErrs = append(allErrs, field.Invalid(p, c, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		}
		if c.ResourceClaimName == nil && c.ResourceClaimTemplateName == nil {
			allErrs = append(allErrs, field.Invalid(p, c, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
		if c.ResourceClaimName != nil {
			allErrs = append(allErrs, validateDNSSubdomainName(*c.ResourceClaimName, p.Child("resourceClaimName"))...)
		}
		if c.ResourceClaimTemplateName != nil {
			allErrs = append(allErrs, validateDNSSubdomainName(*c.ResourceClaimTemplateName, p.Child("resourceClaimTemplateName"))...)
		}
	}
	return allErrs
}

// sortedResourceNames returns the keys of l sorted (kube iterates the map
// in random order; sorting makes corekube's error order deterministic).
func sortedResourceNames(l v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
