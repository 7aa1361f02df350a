package admission

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/corekube/corekube/auth/user"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psaconfig "k8s.io/pod-security-admission/admission/api"
	psaload "k8s.io/pod-security-admission/admission/api/load"
	psavalidation "k8s.io/pod-security-admission/admission/api/validation"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// PodSecurity defaults, kube's.
const (
	// podSecurityNamespaceCheckTimeout bounds the evaluation of a
	// namespace's pods when its enforce label changes.
	podSecurityNamespaceCheckTimeout = time.Second
	// podSecurityMaxPodsToCheck bounds how many of them are evaluated.
	podSecurityMaxPodsToCheck = 3000
)

// PodLister lists a namespace's pods; what it returns is not changed.
type PodLister func(ctx context.Context, namespace string) ([]*v1.Pod, error)

// PodSecurity is kube's PodSecurity admission plugin (Pod Security
// Standards): each namespace's pod-security.kubernetes.io/enforce, audit
// and warn labels (with -version) choose a level, privileged, baseline or
// restricted, checked with k8s.io/pod-security-admission's own policy
// checks. Enforce refuses a pod (403), audit adds an audit annotation,
// warn a Warning header. Labelling a namespace validates the labels (422)
// and warns about its existing pods the new enforce level would refuse.
// Usernames, namespaces and runtime classes of the configuration are
// exempt.
type PodSecurity struct {
	GetNamespace NamespaceGetter
	ListPods     PodLister
	// Warn adds a warning to the request's response (the server's
	// registry.AddWarning); nil drops warnings.
	Warn func(ctx context.Context, msg string)
	// Annotate adds an audit annotation to the request's audit event
	// (the server's audit.AddAnnotation); nil drops them.
	Annotate func(ctx context.Context, key, value string)

	config    *psaconfig.PodSecurityConfiguration
	defaults  psapi.Policy
	evaluator policy.Evaluator
}

var _ Validator = (*PodSecurity)(nil)

// NewPodSecurity returns the plugin configured by config, a
// pod-security.admission.config.k8s.io PodSecurityConfiguration (v1,
// v1beta1 or v1alpha1; nil: kube's defaults, everything privileged and
// nothing exempt).
func NewPodSecurity(config []byte) (*PodSecurity, error) {
	cfg, err := psaload.LoadFromData(config)
	if err != nil {
		return nil, fmt.Errorf("load PodSecurityConfiguration: %w", err)
	}
	if errs := psavalidation.ValidatePodSecurityConfiguration(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("invalid PodSecurityConfiguration: %w", errs.ToAggregate())
	}
	defaults, err := psaconfig.ToPolicy(cfg.Defaults)
	if err != nil {
		return nil, fmt.Errorf("invalid PodSecurityConfiguration defaults: %w", err)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		return nil, fmt.Errorf("pod security checks: %w", err)
	}
	return &PodSecurity{config: cfg, defaults: defaults, evaluator: evaluator}, nil
}

// ignoredPodSubresources do not change what PodSecurity checks (kube's
// list); any other pod subresource (ephemeralcontainers) is checked.
var ignoredPodSubresources = map[string]bool{
	"exec": true, "attach": true, "binding": true, "eviction": true, "log": true,
	"portforward": true, "proxy": true, "status": true,
}

// podSecurityResult is what an evaluation decides, as kube's
// AdmissionResponse: refusal, warnings and audit annotations.
type podSecurityResult struct {
	err         error
	warnings    []string
	annotations map[string]string
}

// Validate implements Validator for creates and updates of pods and
// namespaces.
func (p *PodSecurity) Validate(ctx context.Context, a *Attributes) error {
	if a.Resource.Group != "" || (a.Operation != Create && a.Operation != Update) {
		return nil
	}
	var r podSecurityResult
	switch a.Resource.Resource {
	case "namespaces":
		r = p.validateNamespace(ctx, a)
	case "pods":
		r = p.validatePod(ctx, a)
	default:
		return nil
	}
	if p.Warn != nil {
		for _, w := range r.warnings {
			p.Warn(ctx, w)
		}
	}
	if p.Annotate != nil {
		keys := make([]string, 0, len(r.annotations))
		for k := range r.annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p.Annotate(ctx, psapi.AuditAnnotationPrefix+k, r.annotations[k])
		}
	}
	return r.err
}

func (p *PodSecurity) validateNamespace(ctx context.Context, a *Attributes) podSecurityResult {
	if a.Subresource != "" {
		return podSecurityResult{}
	}
	ns, ok := a.Object.(*v1.Namespace)
	if !ok {
		return podSecurityResult{err: apierrors.NewBadRequest("failed to decode namespace")}
	}
	newPolicy, newErrs := psapi.PolicyToEvaluate(ns.Labels, p.defaults)
	invalid := func() podSecurityResult {
		return podSecurityResult{err: apierrors.NewInvalid(a.Kind.GroupKind(), a.Name, newErrs)}
	}
	exemptWarning := func() podSecurityResult {
		if w := p.exemptNamespaceWarning(ns.Name, newPolicy, ns.Labels); w != "" {
			return podSecurityResult{warnings: []string{w}}
		}
		return podSecurityResult{}
	}
	if a.Operation == Create {
		if len(newErrs) > 0 {
			return invalid()
		}
		if p.exemptNamespace(ns.Name) {
			return exemptWarning()
		}
		return podSecurityResult{}
	}
	old, ok := a.OldObject.(*v1.Namespace)
	if !ok {
		return podSecurityResult{err: apierrors.NewBadRequest("failed to decode old namespace")}
	}
	oldPolicy, oldErrs := psapi.PolicyToEvaluate(old.Labels, p.defaults)
	// Labels that were already invalid in the same way may stay so: an
	// update about something else must not fail for them.
	if len(newErrs) > 0 && (len(oldErrs) == 0 || !reflect.DeepEqual(newErrs, oldErrs)) {
		return invalid()
	}
	// Existing pods are only checked when the enforce level becomes
	// stricter (or changes version) to a non-privileged one.
	switch {
	case newPolicy.Enforce == oldPolicy.Enforce,
		newPolicy.Enforce.Level == psapi.LevelPrivileged,
		newPolicy.Enforce.Version == oldPolicy.Enforce.Version &&
			psapi.CompareLevels(newPolicy.Enforce.Level, oldPolicy.Enforce.Level) < 1:
		return podSecurityResult{}
	}
	if p.exemptNamespace(ns.Name) {
		return exemptWarning()
	}
	return podSecurityResult{warnings: p.evaluatePodsInNamespace(ctx, ns.Name, newPolicy.Enforce)}
}

func (p *PodSecurity) validatePod(ctx context.Context, a *Attributes) podSecurityResult {
	if ignoredPodSubresources[a.Subresource] {
		return podSecurityResult{}
	}
	if p.exemptNamespace(a.Namespace) {
		return podSecurityResult{annotations: map[string]string{psapi.ExemptionReasonAnnotationKey: "namespace"}}
	}
	if u, ok := user.From(ctx); ok && u.Name != "" && slices.Contains(p.config.Exemptions.Usernames, u.Name) {
		return podSecurityResult{annotations: map[string]string{psapi.ExemptionReasonAnnotationKey: "user"}}
	}
	ns, err := p.GetNamespace(ctx, a.Namespace)
	if err != nil {
		return podSecurityResult{
			err:         apierrors.NewInternalError(fmt.Errorf("failed to lookup namespace %q", a.Namespace)),
			annotations: map[string]string{"error": fmt.Sprintf("Internal error occurred: failed to lookup namespace %q: %v", a.Namespace, err)},
		}
	}
	nsPolicy, nsErrs := psapi.PolicyToEvaluate(ns.Labels, p.defaults)
	if len(nsErrs) == 0 && nsPolicy.FullyPrivileged() {
		return podSecurityResult{annotations: map[string]string{
			psapi.EnforcedPolicyAnnotationKey: psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}.String(),
		}}
	}
	pod, ok := a.Object.(*v1.Pod)
	if !ok {
		return podSecurityResult{err: apierrors.NewBadRequest("failed to decode pod")}
	}
	if a.Operation == Update {
		old, ok := a.OldObject.(*v1.Pod)
		if !ok {
			return podSecurityResult{err: apierrors.NewBadRequest("failed to decode old pod")}
		}
		if !significantPodUpdate(pod, old) {
			return podSecurityResult{}
		}
	}
	return p.evaluatePod(a, nsPolicy, nsErrs.ToAggregate(), &pod.ObjectMeta, &pod.Spec)
}

// evaluatePod checks a pod against the namespace's enforce, audit and
// warn levels, each evaluated once when they coincide.
func (p *PodSecurity) evaluatePod(a *Attributes, nsPolicy psapi.Policy, nsErr error, meta *metav1.ObjectMeta, spec *v1.PodSpec) podSecurityResult {
	if rc := spec.RuntimeClassName; rc != nil && *rc != "" && slices.Contains(p.config.Exemptions.RuntimeClasses, *rc) {
		return podSecurityResult{annotations: map[string]string{psapi.ExemptionReasonAnnotationKey: "runtimeClass"}}
	}
	r := podSecurityResult{annotations: map[string]string{}}
	if nsErr != nil {
		r.annotations["error"] = fmt.Sprintf("Failed to parse policy: %v", nsErr)
	}
	results := map[psapi.LevelVersion]policy.AggregateCheckResult{}
	evaluate := func(lv psapi.LevelVersion) policy.AggregateCheckResult {
		res, ok := results[lv]
		if !ok {
			res = policy.AggregateCheckResults(p.evaluator.EvaluatePod(lv, meta, spec))
			results[lv] = res
		}
		return res
	}
	r.annotations[psapi.EnforcedPolicyAnnotationKey] = nsPolicy.Enforce.String()
	if res := evaluate(nsPolicy.Enforce); !res.Allowed {
		r.err = apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("violates PodSecurity %q: %s", nsPolicy.Enforce.String(), res.ForbiddenDetail()))
	}
	if res := evaluate(nsPolicy.Audit); !res.Allowed {
		r.annotations[psapi.AuditViolationsAnnotationKey] = fmt.Sprintf("would violate PodSecurity %q: %s", nsPolicy.Audit.String(), res.ForbiddenDetail())
	}
	// A refused request gets no warnings besides its error.
	if r.err == nil {
		if res := evaluate(nsPolicy.Warn); !res.Allowed {
			r.warnings = append(r.warnings, fmt.Sprintf("would violate PodSecurity %q: %s", nsPolicy.Warn.String(), res.ForbiddenDetail()))
		}
	}
	return r
}

// evaluatePodsInNamespace is the dry run of a new enforce level against
// the namespace's pods: one warning per distinct violation, naming the
// first pod (by name) and how many others share it. One pod per
// controller is checked before the others, within a time and count
// bound, as kube.
func (p *PodSecurity) evaluatePodsInNamespace(ctx context.Context, namespace string, enforce psapi.LevelVersion) []string {
	timeout := podSecurityNamespaceCheckTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if half := time.Until(deadline) / 2; half < timeout {
			timeout = half
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods, err := p.ListPods(ctx, namespace)
	if err != nil {
		return []string{"failed to list pods while checking new PodSecurity enforce level"}
	}
	pods = p.prioritizePods(pods)
	total := len(pods)
	if len(pods) > podSecurityMaxPodsToCheck {
		pods = pods[:podSecurityMaxPodsToCheck]
	}
	type seen struct {
		pod   string
		count int
	}
	byWarning := map[string]*seen{}
	var order []string
	checked := len(pods)
	for i, pod := range pods {
		res := policy.AggregateCheckResults(p.evaluator.EvaluatePod(enforce, &pod.ObjectMeta, &pod.Spec))
		if !res.Allowed {
			w := res.ForbiddenReason()
			if s, ok := byWarning[w]; ok {
				s.count++
				if pod.Name < s.pod {
					s.pod = pod.Name
				}
			} else {
				byWarning[w] = &seen{pod: pod.Name, count: 1}
				order = append(order, w)
			}
		}
		if ctx.Err() != nil {
			checked = i + 1
			break
		}
	}
	var warnings []string
	if checked < total {
		warnings = append(warnings, fmt.Sprintf("new PodSecurity enforce level only checked against the first %d of %d existing pods", checked, total))
	}
	if len(order) > 0 {
		warnings = append(warnings, fmt.Sprintf("existing pods in namespace %q violate the new PodSecurity enforce level %q", namespace, enforce.String()))
	}
	podWarnings := make([]string, 0, len(order))
	for _, w := range order {
		s := byWarning[w]
		switch s.count {
		case 1:
			podWarnings = append(podWarnings, fmt.Sprintf("%s: %s", s.pod, w))
		case 2:
			podWarnings = append(podWarnings, fmt.Sprintf("%s (and 1 other pod): %s", s.pod, w))
		default:
			podWarnings = append(podWarnings, fmt.Sprintf("%s (and %d other pods): %s", s.pod, s.count-1, w))
		}
	}
	sort.Strings(podWarnings)
	return append(warnings, podWarnings...)
}

// prioritizePods drops pods of exempt runtime classes and puts one pod
// per controller first, so that a bounded check covers every controller.
func (p *PodSecurity) prioritizePods(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	var later []*v1.Pod
	controllers := map[types.UID]bool{}
	for _, pod := range pods {
		if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" && slices.Contains(p.config.Exemptions.RuntimeClasses, *rc) {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref == nil:
			out = append(out, pod)
		case controllers[ref.UID]:
			later = append(later, pod)
		default:
			controllers[ref.UID] = true
			out = append(out, pod)
		}
	}
	return append(out, later...)
}

func (p *PodSecurity) exemptNamespace(ns string) bool {
	return ns != "" && slices.Contains(p.config.Exemptions.Namespaces, ns)
}

// exemptNamespaceWarning tells that an exempt namespace's labels ask for
// a policy that will not apply ("" when they ask for nothing beyond the
// defaults or privileged).
func (p *PodSecurity) exemptNamespaceWarning(ns string, pol psapi.Policy, labels map[string]string) string {
	if pol.FullyPrivileged() || pol.Equivalent(&p.defaults) {
		return ""
	}
	var parts []string
	mode := func(name string, lv psapi.LevelVersion, levelLabel, versionLabel string) {
		_, hasLevel := labels[levelLabel]
		_, hasVersion := labels[versionLabel]
		if lv.Level != psapi.LevelPrivileged && (hasLevel || hasVersion) {
			parts = append(parts, name+"="+lv.String())
		}
	}
	mode("enforce", pol.Enforce, psapi.EnforceLevelLabel, psapi.EnforceVersionLabel)
	mode("audit", pol.Audit, psapi.AuditLevelLabel, psapi.AuditVersionLabel)
	mode("warn", pol.Warn, psapi.WarnLevelLabel, psapi.WarnVersionLabel)
	joined := ""
	for i, s := range parts {
		if i > 0 {
			joined += ", "
		}
		joined += s
	}
	return fmt.Sprintf("namespace %q is exempt from Pod Security, and the policy (%s) will be ignored", ns, joined)
}

// significantPodUpdate reports whether an update changes what PodSecurity
// checks, as kube decides it: the containers that may change on update
// are compared by count and image, ephemeral containers by name and
// image; anything else (labels, status, tolerations) is not re-checked.
func significantPodUpdate(pod, old *v1.Pod) bool {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return true
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image != old.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Image != old.Spec.InitContainers[i].Image {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		i := slices.IndexFunc(old.Spec.EphemeralContainers, func(o v1.EphemeralContainer) bool { return o.Name == c.Name })
		if i < 0 || old.Spec.EphemeralContainers[i].Image != c.Image {
			return true
		}
	}
	return false
}
