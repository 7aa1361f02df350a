package nodes

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// Messages and paths below are kube's, including its quirks: spec taints
// are reported under metadata.taints, and the avoid-pods annotation under
// metadata.annotations.AvoidPods / .PodSignature.

var (
	metadataPath  = field.NewPath("metadata")
	podCIDRsPath  = field.NewPath("spec", "podCIDRs")
	taintEffects  = []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}
	podCIDRChange = `node updates may not change podCIDR except from "" to valid`
)

func validateNode(node *v1.Node) field.ErrorList {
	allErrs := validateNodeAnnotations(node.Annotations)
	allErrs = append(allErrs, ValidateTaints(node.Spec.Taints, metadataPath.Child("taints"))...)
	allErrs = append(allErrs, validateNodeResources(node)...)
	if len(node.Spec.PodCIDRs) == 0 {
		return allErrs
	}
	for i, cidr := range node.Spec.PodCIDRs {
		allErrs = append(allErrs, validation.IsValidCIDR(podCIDRsPath.Index(i), cidr)...)
	}
	if len(node.Spec.PodCIDRs) > 1 {
		dualStack, err := netutils.IsDualStackCIDRStrings(node.Spec.PodCIDRs)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(podCIDRsPath, fmt.Errorf("invalid PodCIDRs. failed to check with dual stack with error:%v", err)))
		}
		if !dualStack || len(node.Spec.PodCIDRs) > 2 {
			allErrs = append(allErrs, field.Invalid(podCIDRsPath, node.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
		}
		seen := sets.New[string]()
		for i, cidr := range node.Spec.PodCIDRs {
			if seen.Has(cidr) {
				allErrs = append(allErrs, field.Duplicate(podCIDRsPath.Index(i), cidr))
			}
			seen.Insert(cidr)
		}
	}
	return allErrs
}

func validateNodeUpdate(node, oldNode *v1.Node) field.ErrorList {
	allErrs := validateNodeAnnotations(node.Annotations)
	allErrs = append(allErrs, validateNodeResources(node)...)

	seen := map[v1.NodeAddress]bool{}
	for i, addr := range node.Status.Addresses {
		if seen[addr] {
			allErrs = append(allErrs, field.Duplicate(field.NewPath("status", "addresses").Index(i), internalValue{addr}))
		}
		seen[addr] = true
	}

	// podCIDRs may go from unset to set, never change afterwards.
	if old := oldNode.Spec.PodCIDRs; len(old) > 0 {
		if len(old) != len(node.Spec.PodCIDRs) {
			allErrs = append(allErrs, field.Forbidden(podCIDRsPath, podCIDRChange))
		} else {
			for i := range old {
				if old[i] != node.Spec.PodCIDRs[i] {
					allErrs = append(allErrs, field.Forbidden(podCIDRsPath, podCIDRChange))
				}
			}
		}
	}
	if oldNode.Spec.ProviderID != "" && oldNode.Spec.ProviderID != node.Spec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "providerID"), `node updates may not change providerID except from "" to valid`))
	}
	allErrs = append(allErrs, ValidateTaints(node.Spec.Taints, metadataPath.Child("taints"))...)
	if node.Spec.DoNotUseExternalID != oldNode.Spec.DoNotUseExternalID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return allErrs
}

// ValidateTaints validates taints as kube's validateNodeTaints does: key is
// a qualified name, value a label value, effect one of NoSchedule,
// PreferNoSchedule, NoExecute, and no two taints share key and effect.
func ValidateTaints(taints []v1.Taint, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[v1.TaintEffect]sets.Set[string]{}
	for i, taint := range taints {
		idxPath := fldPath.Index(i)
		allErrs = append(allErrs, metav1validation.ValidateLabelName(taint.Key, idxPath.Child("key"))...)
		if errs := validation.IsValidLabelValue(taint.Value); len(errs) != 0 {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("value"), taint.Value, strings.Join(errs, ";")))
		}
		switch taint.Effect {
		case "":
			allErrs = append(allErrs, field.Required(idxPath.Child("effect"), ""))
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("effect"), taint.Effect, taintEffects))
		}
		if seen[taint.Effect].Has(taint.Key) {
			dup := field.Duplicate(idxPath, internalValue{taint})
			dup.Detail = "taints must be unique by key and effect pair"
			allErrs = append(allErrs, dup)
			continue
		}
		if seen[taint.Effect] == nil {
			seen[taint.Effect] = sets.New[string]()
		}
		seen[taint.Effect].Insert(taint.Key)
	}
	return allErrs
}

// validateNodeAnnotations validates the JSON-encoded taints and
// preferAvoidPods scheduler annotations (ValidateNodeSpecificAnnotations).
func validateNodeAnnotations(annotations map[string]string) field.ErrorList {
	var allErrs field.ErrorList
	path := metadataPath.Child("annotations")
	if raw := annotations[v1.TaintsAnnotationKey]; raw != "" {
		var taints []v1.Taint
		if err := json.Unmarshal([]byte(raw), &taints); err != nil {
			allErrs = append(allErrs, field.Invalid(path, v1.TaintsAnnotationKey, err.Error()))
		} else {
			allErrs = append(allErrs, ValidateTaints(taints, path.Child(v1.TaintsAnnotationKey))...)
		}
	}
	if raw := annotations[v1.PreferAvoidPodsAnnotationKey]; raw != "" {
		var avoids v1.AvoidPods
		if err := json.Unmarshal([]byte(raw), &avoids); err != nil {
			return append(allErrs, field.Invalid(path.Child("AvoidPods"), v1.PreferAvoidPodsAnnotationKey, err.Error()))
		}
		for i, entry := range avoids.PreferAvoidPods {
			sigPath := path.Child(v1.PreferAvoidPodsAnnotationKey).Index(i).Child("PodSignature")
			switch ctrl := entry.PodSignature.PodController; {
			case ctrl == nil:
				allErrs = append(allErrs, field.Required(sigPath, ""))
			case ctrl.Controller == nil || !*ctrl.Controller:
				allErrs = append(allErrs, field.Invalid(sigPath.Child("PodController", "Controller"), false, "must point to a controller"))
			}
		}
	}
	return allErrs
}

// validateNodeResources checks status capacity and allocatable quantities
// (ValidateNodeResources / ValidateResourceQuantityValue).
func validateNodeResources(node *v1.Node) field.ErrorList {
	var allErrs field.ErrorList
	for _, list := range []struct {
		name string
		rl   v1.ResourceList
	}{{"capacity", node.Status.Capacity}, {"allocatable", node.Status.Allocatable}} {
		for name, q := range list.rl {
			path := field.NewPath("status", list.name, string(name))
			if q.Sign() < 0 {
				allErrs = append(allErrs, field.Invalid(path, q.String(), apivalidation.IsNegativeErrorMsg))
			}
			if isIntegerResourceName(string(name)) && q.MilliValue()%1000 != 0 {
				allErrs = append(allErrs, field.Invalid(path, q, "must be an integer"))
			}
		}
	}
	return allErrs
}

var integerResources = sets.New[v1.ResourceName](
	v1.ResourcePods, v1.ResourceQuotas, v1.ResourceServices, v1.ResourceReplicationControllers,
	v1.ResourceSecrets, v1.ResourceConfigMaps, v1.ResourcePersistentVolumeClaims,
	v1.ResourceServicesNodePorts, v1.ResourceServicesLoadBalancers,
)

// isIntegerResourceName reports whether kube requires whole numbers for the
// resource: the object-count resources and extended resources.
func isIntegerResourceName(name string) bool {
	if integerResources.Has(v1.ResourceName(name)) {
		return true
	}
	native := !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix)
	if native || strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}

// internalValue renders a v1 struct the way kube renders its internal
// core.* counterpart in field errors ("core.Taint{Key:...}"), so messages
// such as duplicate taints match byte for byte.
type internalValue struct{ v any }

func (iv internalValue) String() string {
	return "core." + strings.TrimPrefix(fmt.Sprintf("%#v", iv.v), "v1.")
}
