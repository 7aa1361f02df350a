package validation

import (
	"fmt"
	"strings"

	"github.com/corekube/corekube/registry/quantity"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	standardResources = sets.New[v1.ResourceName](
		v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage,
		v1.ResourceRequestsCPU, v1.ResourceRequestsMemory, v1.ResourceRequestsEphemeralStorage,
		v1.ResourceLimitsCPU, v1.ResourceLimitsMemory, v1.ResourceLimitsEphemeralStorage,
		v1.ResourcePods, v1.ResourceQuotas, v1.ResourceServices, v1.ResourceReplicationControllers,
		v1.ResourceSecrets, v1.ResourceConfigMaps, v1.ResourcePersistentVolumeClaims,
		v1.ResourceStorage, v1.ResourceRequestsStorage, v1.ResourceServicesNodePorts, v1.ResourceServicesLoadBalancers,
	)
	standardContainerResources = sets.New[v1.ResourceName](v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage)
	integerResources           = sets.New[v1.ResourceName](
		v1.ResourcePods, v1.ResourceQuotas, v1.ResourceServices, v1.ResourceReplicationControllers,
		v1.ResourceSecrets, v1.ResourceConfigMaps, v1.ResourcePersistentVolumeClaims,
		v1.ResourceServicesNodePorts, v1.ResourceServicesLoadBalancers,
	)
)

func isHugePageResourceName(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

func isNativeResource(name v1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix)
}

func isExtendedResourceName(name v1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+string(name))) == 0
}

func isOvercommitAllowed(name v1.ResourceName) bool {
	return isNativeResource(name) && !isHugePageResourceName(name)
}

func isStandardResourceName(name v1.ResourceName) bool {
	return standardResources.Has(name) || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(name), v1.ResourceRequestsHugePagesPrefix)
}

// hugePageValueDivisible: the quantity is a whole number of pages of the
// size named by the resource (hugepages-2Mi).
func hugePageValueDivisible(name v1.ResourceName, q resource.Quantity) bool {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), v1.ResourceHugePagesPrefix))
	if err != nil || size.Sign() <= 0 || size.MilliValue()%1000 != 0 {
		return false
	}
	return q.Value()%size.Value() == 0
}

func validateResourceName(value v1.ResourceName, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(value)) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	if len(allErrs) != 0 {
		return allErrs
	}
	if !strings.Contains(string(value), "/") && !isStandardResourceName(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, "must be a standard resource type or fully qualified"))
	}
	return allErrs
}

func validateContainerResourceName(value v1.ResourceName, fldPath *field.Path) field.ErrorList {
	allErrs := validateResourceName(value, fldPath)
	if !strings.Contains(string(value), "/") {
		if !standardContainerResources.Has(value) && !isHugePageResourceName(value) {
			allErrs = append(allErrs, field.Invalid(fldPath, value, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(value) && !isExtendedResourceName(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, "doesn't follow extended resource name standard"))
	}
	return allErrs
}

func validateResourceQuantityValue(name v1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if q.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if (integerResources.Has(name) || isExtendedResourceName(name)) && q.MilliValue()%1000 != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q, "must be an integer"))
	}
	return allErrs
}

// validateResourceRequirements is kube's validateResourceRequirements with
// the container resource-name rules: valid names and quantities, requests
// not above limits (equal for extended and hugepages resources), hugepages
// whole pages and only with cpu or memory, claims naming pod claims.
func validateResourceRequirements(req *v1.ResourceRequirements, claims sets.Set[string], fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	limCPUOrMem, reqCPUOrMem, limHuge, reqHuge := false, false, false, false
	for _, name := range sortedResourceNames(req.Limits) {
		q := req.Limits[name]
		p := limPath.Key(string(name))
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateResourceQuantityValue(name, q, p)...)
		if isHugePageResourceName(name) {
			limHuge = true
			if !opts.allowIndivisibleHugePagesValues && !hugePageValueDivisible(name, q) {
				allErrs = append(allErrs, field.Invalid(p, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
			}
		}
		if name == v1.ResourceCPU || name == v1.ResourceMemory {
			limCPUOrMem = true
		}
	}
	for _, name := range sortedResourceNames(req.Requests) {
		q := req.Requests[name]
		p := reqPath.Key(string(name))
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateResourceQuantityValue(name, q, p)...)
		if lim, ok := req.Limits[name]; ok {
			// quantity.Cmp: kube's Quantity.Cmp scales "1" to the
			// exponent of "1e100000000" (minutes).
			if quantity.Cmp(q, lim) != 0 && !isOvercommitAllowed(name) {
				allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
			} else if quantity.Cmp(q, lim) > 0 {
				allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
			}
		} else if !isOvercommitAllowed(name) {
			allErrs = append(allErrs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePageResourceName(name) {
			reqHuge = true
			if !opts.allowIndivisibleHugePagesValues && !hugePageValueDivisible(name, q) {
				allErrs = append(allErrs, field.Invalid(p, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
			}
		}
		if name == v1.ResourceCPU || name == v1.ResourceMemory {
			reqCPUOrMem = true
		}
	}
	if !limCPUOrMem && !reqCPUOrMem && (reqHuge || limHuge) {
		allErrs = append(allErrs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	return append(allErrs, validateResourceClaimNames(req.Claims, claims, fldPath.Child("claims"))...)
}

func validateResourceClaimNames(claims []v1.ResourceClaim, podClaims sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, c := range claims {
		p := fldPath.Index(i)
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(p, ""))
			continue
		}
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p, c.Name))
		} else {
			key := c.Name
			if c.Request != "" {
				allErrs = append(allErrs, validateDNS1123Label(c.Request, p.Child("request"))...)
				key += "/" + c.Request
			}
			if names.Has(key) {
				allErrs = append(allErrs, field.Duplicate(p, key))
			} else if c.Request == "" {
				for _, k := range sets.List(names) {
					if i := strings.Index(k, "/"); i >= 0 && k[:i] == c.Name {
						allErrs = append(allErrs, field.Duplicate(p, c.Name))
					}
				}
			}
			names.Insert(key)
		}
		if !podClaims.Has(c.Name) {
			e := field.NotFound(p, c.Name)
			e.Detail = "must be one of the names in pod.spec.resourceClaims"
			if podClaims.Len() == 0 {
				e.Detail += " which is empty"
			} else {
				e.Detail += ": " + strings.Join(sets.List(podClaims), ", ")
			}
			allErrs = append(allErrs, e)
		}
	}
	return allErrs
}
