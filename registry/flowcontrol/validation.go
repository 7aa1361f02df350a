package flowcontrol

import (
	"fmt"
	"math"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What kube's validation accepts, sorted as its messages list them.
var (
	supportedVerbs          = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	supportedDistinguishers = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	supportedSubjectKinds   = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	supportedEnablements    = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	supportedLimitResponses = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
)

const (
	// maxQueues is kube's priorityLevelConfigurationQueuingMaxQueues.
	maxQueues = 10 * 1000 * 1000
	// maxHashBits is the entropy shuffle sharding takes from a flow's
	// 64-bit hash (kube's shufflesharding.MaxHashBits).
	maxHashBits = 60
	nsErrIntro  = "each member of this list must be '*' or a DNS-1123 label; "
)

func hasWildcard(list []string) bool { return slices.Contains(list, "*") }

// validateFlowSchemaSpec is kube's ValidateFlowSchemaSpec.
func validateFlowSchemaSpec(spec *flowcontrolv1.FlowSchemaSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.MatchingPrecedence <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("matchingPrecedence"), spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > 10000 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("matchingPrecedence"), spec.MatchingPrecedence, "must not be greater than 10000"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !slices.Contains(supportedDistinguishers, string(dm.Type)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("distinguisherMethod", "type"), dm.Type, supportedDistinguishers))
	}
	plPath := fldPath.Child("priorityLevelConfiguration", "name")
	if name := spec.PriorityLevelConfiguration.Name; name != "" {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(name, false) {
			allErrs = append(allErrs, field.Invalid(plPath, name, msg))
		}
	} else {
		allErrs = append(allErrs, field.Required(plPath, "must reference a priority level"))
	}
	for i, rule := range spec.Rules {
		allErrs = append(allErrs, validateRule(&rule, fldPath.Child("rules").Index(i))...)
	}
	return allErrs
}

// validateRule is kube's ValidateFlowSchemaPolicyRulesWithSubjects.
func validateRule(rule *flowcontrolv1.PolicyRulesWithSubjects, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Subjects) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("subjects"), "subjects must contain at least one value"))
	}
	for i, s := range rule.Subjects {
		allErrs = append(allErrs, validateSubject(&s, fldPath.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i, r := range rule.ResourceRules {
		allErrs = append(allErrs, validateResourceRule(&r, fldPath.Child("resourceRules").Index(i))...)
	}
	for i, r := range rule.NonResourceRules {
		allErrs = append(allErrs, validateNonResourceRule(&r, fldPath.Child("nonResourceRules").Index(i))...)
	}
	return allErrs
}

// validateSubject is kube's ValidateFlowSchemaSubject.
func validateSubject(s *flowcontrolv1.Subject, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	forbidOthers := func(kind flowcontrolv1.SubjectKind) {
		if kind != flowcontrolv1.SubjectKindServiceAccount && s.ServiceAccount != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("serviceAccount"), "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"))
		}
		if kind != flowcontrolv1.SubjectKindUser && s.User != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("user"), "user is forbidden when subject kind is not 'User'"))
		}
		if kind != flowcontrolv1.SubjectKindGroup && s.Group != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("group"), "group is forbidden when subject kind is not 'Group'"))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		p := fldPath.Child("serviceAccount")
		switch sa := s.ServiceAccount; {
		case sa == nil:
			allErrs = append(allErrs, field.Required(p, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		default:
			if sa.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				for _, msg := range apimachineryvalidation.ValidateServiceAccountName(sa.Name, false) {
					allErrs = append(allErrs, field.Invalid(p.Child("name"), sa.Name, msg))
				}
			}
			if sa.Namespace == "" {
				allErrs = append(allErrs, field.Required(p.Child("namespace"), ""))
			} else {
				for _, msg := range apimachineryvalidation.ValidateNamespaceName(sa.Namespace, false) {
					allErrs = append(allErrs, field.Invalid(p.Child("namespace"), sa.Namespace, msg))
				}
			}
		}
	case flowcontrolv1.SubjectKindUser:
		p := fldPath.Child("user")
		if s.User == nil {
			allErrs = append(allErrs, field.Required(p, "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
	case flowcontrolv1.SubjectKindGroup:
		p := fldPath.Child("group")
		if s.Group == nil {
			allErrs = append(allErrs, field.Required(p, "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
	default:
		return append(allErrs, field.NotSupported(fldPath.Child("kind"), s.Kind, supportedSubjectKinds))
	}
	forbidOthers(s.Kind)
	return allErrs
}

// validateResourceRule is kube's ValidateFlowSchemaResourcePolicyRule.
func validateResourceRule(rule *flowcontrolv1.ResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case len(rule.Verbs) == 0:
		allErrs = append(allErrs, field.Required(fldPath.Child("verbs"), "verbs must contain at least one value"))
	case hasWildcard(rule.Verbs):
		if len(rule.Verbs) > 1 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("verbs"), rule.Verbs, "if '*' is present, must not specify other verbs"))
		}
	default:
		for _, v := range rule.Verbs {
			if !slices.Contains(supportedVerbs, v) {
				allErrs = append(allErrs, field.NotSupported(fldPath.Child("verbs"), rule.Verbs, supportedVerbs))
				break
			}
		}
	}
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && hasWildcard(rule.APIGroups) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && hasWildcard(rule.Resources) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		allErrs = append(allErrs, field.Required(fldPath.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
	case hasWildcard(rule.Namespaces):
		if len(rule.Namespaces) > 1 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("namespaces"), rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range rule.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("namespaces").Index(i), ns, nsErrIntro+msg))
			}
		}
	}
	return allErrs
}

// validateNonResourceRule is kube's
// ValidateFlowSchemaNonResourcePolicyRule.
func validateNonResourceRule(rule *flowcontrolv1.NonResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Verbs) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("verbs"), "verbs must contain at least one value"))
	} else if len(rule.Verbs) > 1 && hasWildcard(rule.Verbs) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("verbs"), rule.Verbs, "if '*' is present, must not specify other verbs"))
	}
	p := fldPath.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		allErrs = append(allErrs, field.Required(p, "nonResourceURLs must contain at least one value"))
	case hasWildcard(rule.NonResourceURLs):
		if len(rule.NonResourceURLs) > 1 {
			allErrs = append(allErrs, field.Invalid(p, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if msg := nonResourceURLProblem(u); msg != "" {
				allErrs = append(allErrs, field.Invalid(p.Index(i), u, msg))
			}
		}
	}
	return allErrs
}

// nonResourceURLProblem is kube's ValidateNonResourceURLPath: an absolute
// path without empty segments, white space or inner wildcards; "/x/*"
// matches by prefix.
func nonResourceURLProblem(path string) string {
	switch {
	case path == "":
		return "must not be empty"
	case path == "/":
		return ""
	case !strings.HasPrefix(path, "/"):
		return "must start with slash"
	case strings.Contains(path, " "):
		return "must not contain white-space"
	case strings.Contains(path, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(path, "*"); n > 1 || (n == 1 && !strings.HasSuffix(path, "/*")) {
		return "wildcard can only do suffix glob matching"
	}
	return ""
}

// validatePriorityLevelSpec is kube's ValidatePriorityLevelConfigurationSpec
// for v1 (a Limited level may have zero nominal shares).
func validatePriorityLevelSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, name string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("type"), spec.Type, "type must be 'Exempt' if and only if name is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			p := fldPath.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			allErrs = append(allErrs, validateLendablePercent(e.LendablePercent, p.Child("lendablePercent"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("limited"), "must not be empty when type is Limited"))
		} else {
			allErrs = append(allErrs, validateLimited(spec.Limited, fldPath.Child("limited"))...)
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), spec.Type, supportedEnablements))
	}
	return allErrs
}

func validateLendablePercent(v *int32, fldPath *field.Path) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(fldPath, *v, "must be between 0 and 100, inclusive")}
	}
	return nil
}

// validateLimited is kube's ValidateLimitedPriorityLevelConfiguration.
func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if l.NominalConcurrencyShares != nil && *l.NominalConcurrencyShares < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nominalConcurrencyShares"), *l.NominalConcurrencyShares, "must be a non-negative integer"))
	}
	allErrs = append(allErrs, validateLendablePercent(l.LendablePercent, fldPath.Child("lendablePercent"))...)
	lr, p := l.LimitResponse, fldPath.Child("limitResponse")
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			allErrs = append(allErrs, field.Required(p.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited"))
		} else {
			allErrs = append(allErrs, validateQueuing(lr.Queuing, p.Child("queuing"))...)
		}
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("type"), lr.Type, supportedLimitResponses))
	}
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("borrowingLimitPercent"), b, "if specified, must be a non-negative integer"))
	}
	return allErrs
}

// validateQueuing is kube's validatePriorityLevelQueuingConfiguration:
// positive sizes, a hand no bigger than the deck, and at most 60 bits of
// a flow's hash needed to deal it.
func validateQueuing(q *flowcontrolv1.QueuingConfiguration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > maxHashBits:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize,
			fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, maxHashBits)))
	}
	return allErrs
}

// RequiredEntropyBits is how many bits of a hash dealing handSize of
// deckSize cards takes: ceil(log2(deckSize) × handSize).
func RequiredEntropyBits(deckSize, handSize int) int {
	return int(math.Ceil(math.Log2(float64(deckSize)) * float64(handSize)))
}
