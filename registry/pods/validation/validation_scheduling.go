package validation

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTolerations is kube's ValidateTolerations.
func validateTolerations(tolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range tolerations {
		p := fldPath.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		if t.Key == "" && t.Operator != v1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(p.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			if errs := validation.IsValidLabelValue(t.Value); len(errs) != 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, strings.Join(errs, ";")))
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("operator"), t.Operator, []v1.TolerationOperator{v1.TolerationOpEqual, v1.TolerationOpExists}))
		}
		if t.Effect != "" {
			switch t.Effect {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				allErrs = append(allErrs, field.NotSupported(p.Child("effect"), t.Effect,
					[]v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}))
			}
		}
	}
	return allErrs
}

func validateAffinity(a *v1.Affinity, opts options, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if a == nil {
		return allErrs
	}
	if na := a.NodeAffinity; na != nil {
		p := fldPath.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			allErrs = append(allErrs, validateNodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, p.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if t.Weight <= 0 || t.Weight > 100 {
				allErrs = append(allErrs, field.Invalid(tp.Child("weight"), t.Weight, "must be in the range 1-100"))
			}
			allErrs = append(allErrs, validateNodeSelectorTerm(t.Preference, tp.Child("preference"))...)
		}
	}
	podAffinity := func(required []v1.PodAffinityTerm, preferred []v1.WeightedPodAffinityTerm, p *field.Path) {
		for i, t := range required {
			allErrs = append(allErrs, validatePodAffinityTerm(t, opts.allowInvalidLabelValueInSelector, p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
		}
		for i, w := range preferred {
			wp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if w.Weight <= 0 || w.Weight > 100 {
				allErrs = append(allErrs, field.Invalid(wp.Child("weight"), w.Weight, "must be in the range 1-100"))
			}
			allErrs = append(allErrs, validatePodAffinityTerm(w.PodAffinityTerm, opts.allowInvalidLabelValueInSelector, wp.Child("podAffinityTerm"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))
	}
	if pa := a.PodAntiAffinity; pa != nil {
		podAffinity(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))
	}
	return allErrs
}

func validateNodeSelector(ns *v1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var allErrs field.ErrorList
	for i, t := range ns.NodeSelectorTerms {
		allErrs = append(allErrs, validateNodeSelectorTerm(t, termsPath.Index(i))...)
	}
	return allErrs
}

func validateNodeSelectorTerm(term v1.NodeSelectorTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for j, rq := range term.MatchExpressions {
		p := fldPath.Child("matchExpressions").Index(j)
		switch rq.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			if len(rq.Values) == 0 {
				allErrs = append(allErrs, field.Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
			if len(rq.Values) > 0 {
				allErrs = append(allErrs, field.Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
			if len(rq.Values) != 1 {
				allErrs = append(allErrs, field.Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), rq.Operator, "not a valid selector operator"))
		}
		allErrs = append(allErrs, metav1validation.ValidateLabelName(rq.Key, p.Child("key"))...)
	}
	for j, rq := range term.MatchFields {
		p := fldPath.Child("matchFields").Index(j)
		switch rq.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			if len(rq.Values) != 1 {
				allErrs = append(allErrs, field.Required(p.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), rq.Operator, "not a valid selector operator"))
		}
		if rq.Key != metav1.ObjectNameField {
			allErrs = append(allErrs, field.Invalid(p.Child("key"), rq.Key, "not a valid field selector key"))
		} else {
			for i, v := range rq.Values {
				allErrs = append(allErrs, validateDNSSubdomainName(v, p.Child("values").Index(i))...)
			}
		}
	}
	return allErrs
}

func validatePodAffinityTerm(t v1.PodAffinityTerm, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	o := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	allErrs := metav1validation.ValidateLabelSelector(t.LabelSelector, o, fldPath.Child("labelSelector"))
	allErrs = append(allErrs, metav1validation.ValidateLabelSelector(t.NamespaceSelector, o, fldPath.Child("namespaceSelector"))...)
	for _, ns := range t.Namespaces {
		for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("namespace"), ns, msg))
		}
	}
	allErrs = append(allErrs, validateMatchLabelKeysAndMismatchLabelKeys(fldPath, t.MatchLabelKeys, t.MismatchLabelKeys, t.LabelSelector)...)
	if t.TopologyKey == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	}
	return append(allErrs, metav1validation.ValidateLabelName(t.TopologyKey, fldPath.Child("topologyKey"))...)
}

// validateMatchLabelKeysAndMismatchLabelKeys: the keys need a label
// selector, must be label names and may not be in both lists. (The keys are
// merged into the selector by PrepareForCreate before validation, so kube's
// "exists in both matchLabelKeys and labelSelector" check does not apply.)
func validateMatchLabelKeysAndMismatchLabelKeys(fldPath *field.Path, matchKeys, mismatchKeys []string, sel *metav1.LabelSelector) field.ErrorList {
	var allErrs field.ErrorList
	if sel == nil {
		if len(matchKeys) > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("matchLabelKeys"), "must not be specified when labelSelector is not set"))
		}
		if len(mismatchKeys) > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("mismatchLabelKeys"), "must not be specified when labelSelector is not set"))
		}
		return allErrs
	}
	for i, k := range matchKeys {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(k, fldPath.Child("matchLabelKeys").Index(i))...)
	}
	for i, k := range mismatchKeys {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(k, fldPath.Child("mismatchLabelKeys").Index(i))...)
	}
	mismatch := sets.New(mismatchKeys...)
	for i, k := range matchKeys {
		if mismatch.Has(k) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return allErrs
}

func validateTopologySpreadConstraints(constraints []v1.TopologySpreadConstraint, fldPath *field.Path, opts options) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range constraints {
		p := fldPath.Index(i)
		if c.MaxSkew <= 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			allErrs = append(allErrs, field.Required(p.Child("topologyKey"), "can not be empty"))
		}
		if c.WhenUnsatisfiable != v1.DoNotSchedule && c.WhenUnsatisfiable != v1.ScheduleAnyway {
			allErrs = append(allErrs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway}))
		}
		for _, rest := range constraints[i+1:] {
			if c.TopologyKey == rest.TopologyKey && c.WhenUnsatisfiable == rest.WhenUnsatisfiable {
				allErrs = append(allErrs, field.Duplicate(p.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("minDomains"), c.MinDomains, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != v1.DoNotSchedule {
				allErrs = append(allErrs, field.Invalid(p.Child("minDomains"), c.MinDomains, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", v1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for _, np := range []struct {
			name string
			v    *v1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			if np.v != nil && *np.v != v1.NodeInclusionPolicyHonor && *np.v != v1.NodeInclusionPolicyIgnore {
				allErrs = append(allErrs, field.NotSupported(p.Child(np.name), np.v, []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}))
			}
		}
		if len(c.MatchLabelKeys) > 0 {
			mp := p.Child("matchLabelKeys")
			keys := sets.New[string]()
			if c.LabelSelector != nil {
				for k := range c.LabelSelector.MatchLabels {
					keys.Insert(k)
				}
				for _, e := range c.LabelSelector.MatchExpressions {
					keys.Insert(e.Key)
				}
			} else {
				allErrs = append(allErrs, field.Forbidden(mp, "must not be specified when labelSelector is not set"))
			}
			for j, k := range c.MatchLabelKeys {
				allErrs = append(allErrs, metav1validation.ValidateLabelName(k, mp.Index(j))...)
				if keys.Has(k) {
					allErrs = append(allErrs, field.Invalid(mp.Index(j), k, "exists in both matchLabelKeys and labelSelector"))
				}
			}
		}
		if !opts.allowInvalidTopologySpreadSelector {
			allErrs = append(allErrs, metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
		}
	}
	return allErrs
}

func validatePodDNSConfig(cfg *v1.PodDNSConfig, policy v1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if policy == v1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(fldPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", v1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(fldPath.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", v1.DNSNone))}
		}
	}
	if cfg == nil {
		return allErrs
	}
	if len(cfg.Nameservers) > 3 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", 3)))
	}
	for i, ns := range cfg.Nameservers {
		allErrs = append(allErrs, validation.IsValidIP(fldPath.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > 32 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", 32)))
	}
	if len(strings.Join(cfg.Searches, " ")) > 2048 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", 2048)))
	}
	for i, s := range cfg.Searches {
		allErrs = append(allErrs, validateDNSSubdomain(strings.TrimSuffix(s, "."), fldPath.Child("searches").Index(i))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("options").Index(i), "must not be empty"))
		}
	}
	return allErrs
}
