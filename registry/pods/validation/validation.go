package validation

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry/pods/internal/core"
	"github.com/corekube/corekube/registry/pods/internal/podutil"
)

// Annotation keys with pod-specific validation.
const (
	mirrorPodAnnotationKey            = "kubernetes.io/config.mirror"
	tolerationsAnnotationKey          = "scheduler.alpha.kubernetes.io/tolerations"
	podDeletionCostAnnotationKey      = "controller.kubernetes.io/pod-deletion-cost"
	seccompPodAnnotationKey           = "seccomp.security.alpha.kubernetes.io/pod"
	seccompContainerAnnotationPrefix  = "container.seccomp.security.alpha.kubernetes.io/"
	appArmorContainerAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
)

// updatablePodSpecFields is the list kube prints when a pod update changes
// an immutable part of the spec (InPlacePodVerticalScaling is off in v1.32).
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// podUpdateForbiddenPrefix is the start of the message of the Forbidden
// error at "spec" for an illegal pod update; a diff of the specs follows it
// after a newline.
var podUpdateForbiddenPrefix = "pod updates may not change fields other than " + strings.Join(updatablePodSpecFields, ",")

// options are kube's PodValidationOptions that matter here. On create they
// are all false; on update each is relaxed when the stored pod already
// violates the stricter rule (so that old objects stay updatable).
type options struct {
	allowInvalidPodDeletionCost          bool
	allowInvalidLabelValueInSelector     bool
	allowIndivisibleHugePagesValues      bool
	allowInvalidTopologySpreadSelector   bool
	allowNamespacedSysctlsForHostNetwork bool
	allowNonLocalProjectedTokenPath      bool
}

func updateOptions(old *v1.Pod) options {
	var o options
	if _, err := deletionCost(old.Annotations); err != nil {
		o.allowInvalidPodDeletionCost = true
	}
	if a := old.Spec.Affinity; a != nil {
		terms := []v1.PodAffinityTerm{}
		if a.PodAffinity != nil {
			terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
			for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				terms = append(terms, w.PodAffinityTerm)
			}
		}
		if a.PodAntiAffinity != nil {
			terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
			for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				terms = append(terms, w.PodAffinityTerm)
			}
		}
		for _, t := range terms {
			if metav1validation.LabelSelectorHasInvalidLabelValue(t.LabelSelector) || metav1validation.LabelSelectorHasInvalidLabelValue(t.NamespaceSelector) {
				o.allowInvalidLabelValueInSelector = true
			}
		}
	}
	podutil.EachContainer(&old.Spec, func(c *v1.Container) {
		for _, l := range []v1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for name, q := range l {
				if isHugePageResourceName(name) && !hugePageValueDivisible(name, q) {
					o.allowIndivisibleHugePagesValues = true
				}
			}
		}
	})
	for _, c := range old.Spec.TopologySpreadConstraints {
		if len(metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("x"))) > 0 {
			o.allowInvalidTopologySpreadSelector = true
		}
	}
	if sc := old.Spec.SecurityContext; sc != nil && (old.Spec.HostNetwork || old.Spec.HostIPC) {
		for _, s := range sc.Sysctls {
			if hostSysctlError(s.Name, &old.Spec, field.NewPath("x")) != nil {
				o.allowNamespacedSysctlsForHostNetwork = true
			}
		}
	}
	for _, vol := range old.Spec.Volumes {
		if vol.Projected == nil {
			continue
		}
		for _, s := range vol.Projected.Sources {
			if s.ServiceAccountToken != nil && len(validateLocalDescendingPath(s.ServiceAccountToken.Path, field.NewPath("x"))) > 0 {
				o.allowNonLocalProjectedTokenPath = true
			}
		}
	}
	return o
}

// ValidatePod validates a pod on create, as kube's ValidatePodCreate minus
// the generic ObjectMeta checks (done by the Store).
func ValidatePod(pod *v1.Pod) field.ErrorList {
	return validatePodCreate(pod, options{})
}

func validatePodCreate(pod *v1.Pod, opts options) field.ErrorList {
	allErrs := validatePodMetadataAndSpec(pod, opts)
	specPath := field.NewPath("spec")
	if len(pod.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	allErrs = append(allErrs, validateSeccompAnnotationsAndFields(pod, specPath)...)
	allErrs = append(allErrs, validateAppArmorAnnotationsAndFieldsMatchOnCreate(pod, specPath)...)
	return allErrs
}

func validatePodMetadataAndSpec(pod *v1.Pod, opts options) field.ErrorList {
	metaPath := field.NewPath("metadata")
	specPath := field.NewPath("spec")
	allErrs := validatePodSpecificAnnotations(pod.Annotations, &pod.Spec, metaPath.Child("annotations"), opts)
	allErrs = append(allErrs, validatePodSpec(&pod.Spec, pod.Name, specPath, opts)...)

	if pod.Spec.ServiceAccountName == "" {
		for vi, vol := range pod.Spec.Volumes {
			if vol.Projected == nil {
				continue
			}
			path := specPath.Child("volumes").Index(vi).Child("projected")
			for si, src := range vol.Projected.Sources {
				if src.ServiceAccountToken != nil {
					allErrs = append(allErrs, field.Forbidden(path.Child("sources").Index(si).Child("serviceAccountToken"), "must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	allErrs = append(allErrs, validateImageWhitespace(pod.Spec.Containers, specPath.Child("containers"))...)
	allErrs = append(allErrs, validateImageWhitespace(pod.Spec.InitContainers, specPath.Child("initContainers"))...)
	return allErrs
}

func validateImageWhitespace(cs []v1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range cs {
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return allErrs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func deletionCost(annotations map[string]string) (int32, error) {
	value, ok := annotations[podDeletionCostAnnotationKey]
	if !ok {
		return 0, nil
	}
	// "+10" and leading zeros ("008") are invalid.
	if value == "" || !(value[0] == '-' || value == "0" || (value[0] >= '1' && value[0] <= '9')) {
		return 0, fmt.Errorf("invalid value %q", value)
	}
	i, err := strconv.ParseInt(value, 10, 32)
	return int32(i), err
}

func validatePodSpecificAnnotations(annotations map[string]string, spec *v1.PodSpec, fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	if value, ok := annotations[mirrorPodAnnotationKey]; ok && spec.NodeName == "" {
		allErrs = append(allErrs, field.Invalid(fldPath.Key(mirrorPodAnnotationKey), value, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if s := annotations[tolerationsAnnotationKey]; s != "" {
		var tolerations []v1.Toleration
		if err := json.Unmarshal([]byte(s), &tolerations); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, tolerationsAnnotationKey, err.Error()))
		} else if len(tolerations) > 0 {
			allErrs = append(allErrs, validateTolerations(tolerations, fldPath.Child(tolerationsAnnotationKey))...)
		}
	}
	if !opts.allowInvalidPodDeletionCost {
		if _, err := deletionCost(annotations); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Key(podDeletionCostAnnotationKey), annotations[podDeletionCostAnnotationKey], "must be a 32bit integer"))
		}
	}
	// Seccomp annotations (note kube's use of Child rather than Key).
	if p, ok := annotations[seccompPodAnnotationKey]; ok {
		allErrs = append(allErrs, validateSeccompProfileAnnotation(p, fldPath.Child(seccompPodAnnotationKey))...)
	}
	keys := sortedKeys(annotations)
	for _, k := range keys {
		if strings.HasPrefix(k, seccompContainerAnnotationPrefix) {
			allErrs = append(allErrs, validateSeccompProfileAnnotation(annotations[k], fldPath.Child(k))...)
		}
	}
	// AppArmor annotations.
	for _, k := range keys {
		if !strings.HasPrefix(k, appArmorContainerAnnotationPrefix) {
			continue
		}
		p := annotations[k]
		name := strings.TrimPrefix(k, appArmorContainerAnnotationPrefix)
		if !podutil.AnyContainer(spec, func(c *v1.Container) bool { return c.Name == name }) {
			allErrs = append(allErrs, field.Invalid(fldPath.Key(k), name, "container not found"))
		}
		if p != "" && p != v1.DeprecatedAppArmorBetaProfileRuntimeDefault && p != v1.DeprecatedAppArmorBetaProfileNameUnconfined &&
			!strings.HasPrefix(p, v1.DeprecatedAppArmorBetaProfileNamePrefix) {
			allErrs = append(allErrs, field.Invalid(fldPath.Key(k), p, fmt.Sprintf("invalid AppArmor profile name: %q", p)))
		}
	}
	return allErrs
}

func validateSeccompProfileAnnotation(p string, fldPath *field.Path) field.ErrorList {
	switch {
	case p == v1.SeccompProfileRuntimeDefault, p == v1.DeprecatedSeccompProfileDockerDefault, p == v1.SeccompProfileNameUnconfined:
		return nil
	case strings.HasPrefix(p, v1.SeccompLocalhostProfileNamePrefix):
		return validateLocalDescendingPath(strings.TrimPrefix(p, v1.SeccompLocalhostProfileNamePrefix), fldPath)
	}
	return field.ErrorList{field.Invalid(fldPath, p, "must be a valid seccomp profile")}
}

func validatePodSpecificAnnotationUpdates(newPod, oldPod *v1.Pod, fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	for _, k := range sortedKeys(oldPod.Annotations) {
		if nv, ok := newPod.Annotations[k]; ok && nv == oldPod.Annotations[k] {
			continue
		}
		if strings.HasPrefix(k, appArmorContainerAnnotationPrefix) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not remove or update AppArmor annotations"))
		}
		if k == mirrorPodAnnotationKey {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not remove or update mirror pod annotation"))
		}
	}
	for _, k := range sortedKeys(newPod.Annotations) {
		if _, ok := oldPod.Annotations[k]; ok {
			continue
		}
		if strings.HasPrefix(k, appArmorContainerAnnotationPrefix) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not add AppArmor annotations"))
		}
		if k == mirrorPodAnnotationKey {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not add mirror pod annotation"))
		}
	}
	return append(allErrs, validatePodSpecificAnnotations(newPod.Annotations, &newPod.Spec, fldPath, opts)...)
}

// validateSeccompAnnotationsAndFields checks that seccomp annotations and
// fields agree when both are given (create only).
func validateSeccompAnnotationsAndFields(pod *v1.Pod, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		if a, ok := pod.Annotations[seccompPodAnnotationKey]; ok {
			if err := seccompMatch(a, sc.SeccompProfile, specPath.Child("securityContext", "seccompProfile")); err != nil {
				allErrs = append(allErrs, err)
			}
		}
	}
	visitContainersWithPath(&pod.Spec, specPath, func(c *v1.Container, p *field.Path) {
		if c.SecurityContext == nil || c.SecurityContext.SeccompProfile == nil {
			return
		}
		if a, ok := pod.Annotations[seccompContainerAnnotationPrefix+c.Name]; ok {
			if err := seccompMatch(a, c.SecurityContext.SeccompProfile, p.Child("securityContext", "seccompProfile")); err != nil {
				allErrs = append(allErrs, err)
			}
		}
	})
	return allErrs
}

func seccompMatch(annotation string, f *v1.SeccompProfile, fldPath *field.Path) *field.Error {
	switch f.Type {
	case v1.SeccompProfileTypeUnconfined:
		if annotation != v1.SeccompProfileNameUnconfined {
			return field.Forbidden(fldPath.Child("type"), "seccomp type in annotation and field must match")
		}
	case v1.SeccompProfileTypeRuntimeDefault:
		if annotation != v1.SeccompProfileRuntimeDefault && annotation != v1.DeprecatedSeccompProfileDockerDefault {
			return field.Forbidden(fldPath.Child("type"), "seccomp type in annotation and field must match")
		}
	case v1.SeccompProfileTypeLocalhost:
		if !strings.HasPrefix(annotation, v1.SeccompLocalhostProfileNamePrefix) {
			return field.Forbidden(fldPath.Child("type"), "seccomp type in annotation and field must match")
		} else if f.LocalhostProfile == nil || strings.TrimPrefix(annotation, v1.SeccompLocalhostProfileNamePrefix) != *f.LocalhostProfile {
			return field.Forbidden(fldPath.Child("localhostProfile"), "seccomp profile in annotation and field must match")
		}
	}
	return nil
}

func validateAppArmorAnnotationsAndFieldsMatchOnCreate(pod *v1.Pod, specPath *field.Path) field.ErrorList {
	if pod.Spec.OS != nil && pod.Spec.OS.Name == v1.Windows {
		return nil
	}
	var allErrs field.ErrorList
	var podProfile *v1.AppArmorProfile
	if pod.Spec.SecurityContext != nil {
		podProfile = pod.Spec.SecurityContext.AppArmorProfile
	}
	visitContainersWithPath(&pod.Spec, specPath, func(c *v1.Container, p *field.Path) {
		profile := podProfile
		if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
			profile = c.SecurityContext.AppArmorProfile
		}
		if profile == nil {
			return
		}
		a, ok := pod.Annotations[appArmorContainerAnnotationPrefix+c.Name]
		if !ok {
			return
		}
		ap := p.Child("securityContext").Child("appArmorProfile")
		switch profile.Type {
		case v1.AppArmorProfileTypeUnconfined:
			if a != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
				allErrs = append(allErrs, field.Forbidden(ap.Child("type"), "apparmor type in annotation and field must match"))
			}
		case v1.AppArmorProfileTypeRuntimeDefault:
			if a != v1.DeprecatedAppArmorBetaProfileRuntimeDefault {
				allErrs = append(allErrs, field.Forbidden(ap.Child("type"), "apparmor type in annotation and field must match"))
			}
		case v1.AppArmorProfileTypeLocalhost:
			if !strings.HasPrefix(a, v1.DeprecatedAppArmorBetaProfileNamePrefix) {
				allErrs = append(allErrs, field.Forbidden(ap.Child("type"), "apparmor type in annotation and field must match"))
			} else if profile.LocalhostProfile == nil || strings.TrimPrefix(a, v1.DeprecatedAppArmorBetaProfileNamePrefix) != *profile.LocalhostProfile {
				allErrs = append(allErrs, field.Forbidden(ap.Child("localhostProfile"), "apparmor profile in annotation and field must match"))
			}
		}
	})
	return allErrs
}

// ValidatePodUpdate validates newPod as a replacement of oldPod, as kube's
// ValidatePodUpdate minus the generic ObjectMeta update checks: the new pod
// is validated as on create, then only container images, init container
// images, activeDeadlineSeconds (set, or lowered), tolerations (additions,
// or tolerationSeconds changes) and a negative
// terminationGracePeriodSeconds being set to 1 may change. Anything else is
// a Forbidden error at "spec" whose message is kube's, followed by a diff of
// the old and the (munged) new spec.
func ValidatePodUpdate(newPod, oldPod *v1.Pod) field.ErrorList {
	opts := updateOptions(oldPod)
	allErrs := validatePodMetadataAndSpec(newPod, opts)
	allErrs = append(allErrs, validatePodSpecificAnnotationUpdates(newPod, oldPod, field.NewPath("metadata", "annotations"), opts)...)
	specPath := field.NewPath("spec")

	errs, stop := validateContainerUpdates(newPod.Spec.Containers, oldPod.Spec.Containers, specPath.Child("containers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}
	errs, stop = validateContainerUpdates(newPod.Spec.InitContainers, oldPod.Spec.InitContainers, specPath.Child("initContainers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}

	// activeDeadlineSeconds: nil -> positive, or lowered.
	if newPod.Spec.ActiveDeadlineSeconds != nil {
		n := *newPod.Spec.ActiveDeadlineSeconds
		if n < 0 || n > math.MaxInt32 {
			return append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), n, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if oldPod.Spec.ActiveDeadlineSeconds != nil && *oldPod.Spec.ActiveDeadlineSeconds < n {
			return append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), n, "must be less than or equal to previous value"))
		}
	} else if oldPod.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), newPod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	allErrs = append(allErrs, validateOnlyAddedTolerations(newPod.Spec.Tolerations, oldPod.Spec.Tolerations, specPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateOnlyDeletedSchedulingGates(newPod.Spec.SchedulingGates, oldPod.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if apiequality.Semantic.DeepEqual(newPod.Spec, oldPod.Spec) {
		return allErrs
	}

	munged := *newPod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = oldPod.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = oldPod.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = nil
	if oldPod.Spec.ActiveDeadlineSeconds != nil {
		a := *oldPod.Spec.ActiveDeadlineSeconds
		munged.ActiveDeadlineSeconds = &a
	}
	munged.SchedulingGates = oldPod.Spec.SchedulingGates
	munged.Tolerations = oldPod.Spec.Tolerations
	if old := oldPod.Spec.TerminationGracePeriodSeconds; old != nil && *old < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = old
	}

	// Scheduling-gated pods may also add node selector entries and tighten
	// required node affinity.
	if len(oldPod.Spec.SchedulingGates) > 0 {
		if !apiequality.Semantic.DeepEqual(munged.NodeSelector, oldPod.Spec.NodeSelector) {
			allErrs = append(allErrs, validateNodeSelectorMutation(specPath.Child("nodeSelector"), munged.NodeSelector, oldPod.Spec.NodeSelector)...)
			munged.NodeSelector = oldPod.Spec.NodeSelector
		}
		var oldNA, newNA *v1.NodeAffinity
		if oldPod.Spec.Affinity != nil {
			oldNA = oldPod.Spec.Affinity.NodeAffinity
		}
		if munged.Affinity != nil {
			newNA = munged.Affinity.NodeAffinity
		}
		if !apiequality.Semantic.DeepEqual(oldNA, newNA) {
			allErrs = append(allErrs, validateNodeAffinityMutation(specPath.Child("affinity").Child("nodeAffinity"), newNA, oldNA)...)
			switch {
			case munged.Affinity == nil && oldNA == nil:
			case munged.Affinity == nil && oldNA != nil:
				munged.Affinity = &v1.Affinity{NodeAffinity: oldNA}
			case munged.Affinity != nil && oldPod.Spec.Affinity == nil &&
				munged.Affinity.PodAntiAffinity == nil && munged.Affinity.PodAffinity == nil:
				munged.Affinity = nil
			default:
				munged.Affinity.NodeAffinity = oldNA
			}
		}
	}

	if !apiequality.Semantic.DeepEqual(munged, oldPod.Spec) {
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf("%s\n%v", podUpdateForbiddenPrefix, specDiff(oldPod.Spec, munged))))
	}
	return allErrs
}

// specDiff is the cmp.Diff kube appends to the update Forbidden message
// (kube diffs its internal core.PodSpec; this diffs v1.PodSpec).
func specDiff(old, new v1.PodSpec) (s string) {
	defer func() {
		if recover() != nil {
			s = ""
		}
	}()
	return cmp.Diff(old, new)
}

func validateContainerUpdates(newContainers, oldContainers []v1.Container, fldPath *field.Path) (field.ErrorList, bool) {
	var allErrs field.ErrorList
	if len(newContainers) != len(oldContainers) {
		return field.ErrorList{field.Forbidden(fldPath, "pod updates may not add or remove containers")}, true
	}
	for i, c := range newContainers {
		if c.Image == "" {
			allErrs = append(allErrs, field.Required(fldPath.Index(i).Child("image"), ""))
		}
		if len(strings.TrimSpace(c.Image)) != len(c.Image) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return allErrs, false
}

// validateOnlyAddedTolerations: every old toleration must still be present
// (its tolerationSeconds may change), then the new list is validated.
func validateOnlyAddedTolerations(newTolerations, oldTolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, old := range oldTolerations {
		found := false
		for _, n := range newTolerations {
			clone := *old.DeepCopy()
			clone.TolerationSeconds = n.TolerationSeconds
			if reflect.DeepEqual(clone, n) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validateTolerations(newTolerations, fldPath)
}

func validateOnlyDeletedSchedulingGates(newGates, oldGates []v1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	if len(newGates) == 0 {
		return nil
	}
	added := map[string]int{}
	for i, g := range newGates {
		added[g.Name] = i
	}
	for _, g := range oldGates {
		delete(added, g.Name)
	}
	names := make([]string, 0, len(added))
	for n := range added {
		names = append(names, n)
	}
	sort.Strings(names)
	var allErrs field.ErrorList
	for _, n := range names {
		allErrs = append(allErrs, field.Forbidden(fldPath.Index(added[n]).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", n)))
	}
	return allErrs
}

func validateNodeSelectorMutation(fldPath *field.Path, newSel, oldSel map[string]string) field.ErrorList {
	for k, v := range oldSel {
		if nv, ok := newSel[k]; !ok || nv != v {
			return field.ErrorList{field.Invalid(fldPath, newSel, "only additions to spec.nodeSelector are allowed (no mutations or deletions)")}
		}
	}
	return nil
}

func validateNodeAffinityMutation(fldPath *field.Path, newNA, oldNA *v1.NodeAffinity) field.ErrorList {
	var allErrs field.ErrorList
	if oldNA == nil || oldNA.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return allErrs
	}
	oldTerms := oldNA.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var newTerms []v1.NodeSelectorTerm
	if newNA != nil && newNA.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		newTerms = newNA.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	p := fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution").Child("nodeSelectorTerms")
	if len(oldTerms) > 0 && len(oldTerms) != len(newTerms) {
		return append(allErrs, field.Invalid(p, newTerms, "no additions/deletions to non-empty NodeSelectorTerms list are allowed"))
	}
	for i := range oldTerms {
		if !nodeSelectorTermHasOnlyAdditions(newTerms[i], oldTerms[i]) {
			allErrs = append(allErrs, field.Invalid(p.Index(i), newTerms[i], "only additions are allowed (no mutations or deletions)"))
		}
	}
	return allErrs
}

func nodeSelectorTermHasOnlyAdditions(newTerm, oldTerm v1.NodeSelectorTerm) bool {
	if len(oldTerm.MatchExpressions) > len(newTerm.MatchExpressions) || len(oldTerm.MatchFields) > len(newTerm.MatchFields) {
		return false
	}
	if l := len(oldTerm.MatchExpressions); l > 0 && !apiequality.Semantic.DeepEqual(newTerm.MatchExpressions[:l], oldTerm.MatchExpressions) {
		return false
	}
	if l := len(oldTerm.MatchFields); l > 0 && !apiequality.Semantic.DeepEqual(newTerm.MatchFields[:l], oldTerm.MatchFields) {
		return false
	}
	return true
}

// ValidatePodStatusUpdate validates a pods/status update, as kube's
// ValidatePodStatusUpdate minus the generic ObjectMeta update checks. Note
// that kube validates neither status.phase nor condition statuses, and
// reports custom condition types under "metadata.conditions[i].Type".
func ValidatePodStatusUpdate(newPod, oldPod *v1.Pod) field.ErrorList {
	opts := updateOptions(oldPod)
	metaPath := field.NewPath("metadata")
	allErrs := validatePodSpecificAnnotationUpdates(newPod, oldPod, metaPath.Child("annotations"), opts)
	allErrs = append(allErrs, validatePodConditions(newPod.Status.Conditions, metaPath.Child("conditions"))...)

	statusPath := field.NewPath("status")
	if newPod.Spec.NodeName != oldPod.Spec.NodeName {
		allErrs = append(allErrs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	if n := newPod.Status.NominatedNodeName; n != oldPod.Status.NominatedNodeName && n != "" {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			allErrs = append(allErrs, field.Invalid(statusPath.Child("nominatedNodeName"), n, msg))
		}
	}
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(newPod.Status.QOSClass, oldPod.Status.QOSClass, statusPath.Child("qosClass"))...)

	allErrs = append(allErrs, validateContainerStateTransition(newPod.Status.ContainerStatuses, oldPod.Status.ContainerStatuses, statusPath.Child("containerStatuses"), oldPod.Spec.RestartPolicy, nil)...)
	allErrs = append(allErrs, validateContainerStateTransition(newPod.Status.InitContainerStatuses, oldPod.Status.InitContainerStatuses, statusPath.Child("initContainerStatuses"), oldPod.Spec.RestartPolicy, oldPod.Spec.InitContainers)...)
	allErrs = append(allErrs, validateContainerStateTransition(newPod.Status.EphemeralContainerStatuses, oldPod.Status.EphemeralContainerStatuses, statusPath.Child("ephemeralContainerStatuses"), v1.RestartPolicyNever, nil)...)
	allErrs = append(allErrs, validatePodResourceClaimStatuses(newPod.Status.ResourceClaimStatuses, newPod.Spec.ResourceClaims, statusPath.Child("resourceClaimStatuses"))...)
	allErrs = append(allErrs, validatePodIPs(&newPod.Status)...)
	allErrs = append(allErrs, validateHostIPs(&newPod.Status)...)
	return allErrs
}

func validatePodConditions(conditions []v1.PodCondition, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range conditions {
		switch c.Type {
		case v1.PodScheduled, v1.PodReady, v1.PodInitialized:
			continue
		}
		for _, msg := range validation.IsQualifiedName(string(c.Type)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("Type"), string(c.Type), msg))
		}
	}
	return allErrs
}

// validateContainerStateTransition forbids moving a terminated container
// back to a non-terminated state unless the restart policy allows it
// (initContainers, when given, exempts restartable init containers).
func validateContainerStateTransition(newStatuses, oldStatuses []v1.ContainerStatus, fldPath *field.Path, restartPolicy v1.RestartPolicy, initContainers []v1.Container) field.ErrorList {
	var allErrs field.ErrorList
	if restartPolicy == v1.RestartPolicyAlways {
		return allErrs
	}
	for i, old := range oldStatuses {
		if old.State.Terminated == nil {
			continue
		}
		if old.State.Terminated.ExitCode != 0 && restartPolicy == v1.RestartPolicyOnFailure {
			continue
		}
		restartable := false
		for _, c := range initContainers {
			if c.Name == old.Name {
				restartable = c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
				break
			}
		}
		if restartable {
			continue
		}
		for _, n := range newStatuses {
			if n.Name == old.Name && n.State.Terminated == nil {
				allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return allErrs
}

func validatePodResourceClaimStatuses(statuses []v1.PodResourceClaimStatus, claims []v1.PodResourceClaim, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for i, st := range statuses {
		p := fldPath.Index(i)
		found := false
		for _, c := range claims {
			if c.Name == st.Name {
				found = true
			}
		}
		if !found {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), st.Name, "must match the name of an entry in `spec.resourceClaims`"))
		}
		if seen.Has(st.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), st.Name))
		} else {
			seen.Insert(st.Name)
		}
		if st.ResourceClaimName != nil {
			for _, msg := range validation.IsDNS1123Subdomain(*st.ResourceClaimName) {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), st.ResourceClaimName, msg))
			}
		}
	}
	return allErrs
}

func isDualStack(ips []string) (bool, error) {
	v4, v6 := false, false
	for _, s := range ips {
		ip := parseIPSloppy(s)
		if ip == nil {
			return false, fmt.Errorf("invalid IP %q", s)
		}
		if ip.To4() != nil {
			v4 = true
		} else {
			v6 = true
		}
	}
	return v4 && v6, nil
}

// parseIPSloppy parses an IP like k8s.io/utils/net.ParseIPSloppy (IPv4
// octets may have leading zeros).
func parseIPSloppy(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil {
		return ip
	}
	if strings.Count(s, ".") == 3 && !strings.Contains(s, ":") {
		parts := strings.Split(s, ".")
		b := make([]byte, 4)
		for i, p := range parts {
			if p == "" || len(p) > 3 {
				return nil
			}
			n, err := strconv.Atoi(p)
			if err != nil || n > 255 {
				return nil
			}
			b[i] = byte(n)
		}
		return net.IPv4(b[0], b[1], b[2], b[3])
	}
	return nil
}

func validatePodIPs(st *v1.PodStatus) field.ErrorList {
	var allErrs field.ErrorList
	p := field.NewPath("status", "podIPs")
	for i, ip := range st.PodIPs {
		allErrs = append(allErrs, validation.IsValidIP(p.Index(i), ip.IP)...)
	}
	if len(st.PodIPs) > 1 {
		ips := make([]string, 0, len(st.PodIPs))
		mirror := make([]core.PodIP, 0, len(st.PodIPs))
		for _, ip := range st.PodIPs {
			ips = append(ips, ip.IP)
			mirror = append(mirror, core.PodIP{IP: ip.IP})
		}
		dual, err := isDualStack(ips)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(p, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dual || len(ips) > 2 {
			allErrs = append(allErrs, field.Invalid(p, mirror, "may specify no more than one IP for each IP family"))
		}
		seen := sets.New[string]()
		for i, ip := range st.PodIPs {
			if seen.Has(ip.IP) {
				allErrs = append(allErrs, field.Duplicate(p.Index(i), core.PodIP{IP: ip.IP}))
			}
			seen.Insert(ip.IP)
		}
	}
	return allErrs
}

func validateHostIPs(st *v1.PodStatus) field.ErrorList {
	var allErrs field.ErrorList
	if len(st.HostIPs) == 0 {
		return allErrs
	}
	p := field.NewPath("status", "hostIPs")
	if st.HostIP != st.HostIPs[0].IP {
		allErrs = append(allErrs, field.Invalid(p.Index(0).Child("ip"), st.HostIPs[0].IP, "must be equal to `hostIP`"))
	}
	for i, ip := range st.HostIPs {
		allErrs = append(allErrs, validation.IsValidIP(p.Index(i), ip.IP)...)
	}
	if len(st.HostIPs) > 1 {
		seen := sets.New[string]()
		ips := make([]string, 0, len(st.HostIPs))
		mirror := make([]core.HostIP, 0, len(st.HostIPs))
		for i, ip := range st.HostIPs {
			ips = append(ips, ip.IP)
			mirror = append(mirror, core.HostIP{IP: ip.IP})
			if seen.Has(ip.IP) {
				allErrs = append(allErrs, field.Duplicate(p.Index(i), core.HostIP{IP: ip.IP}))
			}
			seen.Insert(ip.IP)
		}
		dual, err := isDualStack(ips)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(p, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dual || len(ips) > 2 {
			allErrs = append(allErrs, field.Invalid(p, mirror, "may specify no more than one IP for each IP family"))
		}
	}
	return allErrs
}
