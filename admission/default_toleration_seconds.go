package admission

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// DefaultTolerationSeconds gives every pod that does not tolerate them
// already NoExecute tolerations of the not-ready and unreachable node
// taints for a while (300s by default), like kube's plugin of that name:
// a pod then survives a short node outage, and the node lifecycle
// controller evicts it from a dead node once that time has passed.
type DefaultTolerationSeconds struct {
	// NotReadySeconds and UnreachableSeconds are the tolerationSeconds
	// given (--default-not-ready-toleration-seconds,
	// --default-unreachable-toleration-seconds); 0 means
	// DefaultTolerationSecondsValue.
	NotReadySeconds, UnreachableSeconds int64
}

// DefaultTolerationSecondsValue is kube's default for both tolerations.
const DefaultTolerationSecondsValue = 300

var _ Mutator = (*DefaultTolerationSeconds)(nil)

// Admit implements Mutator: on pod creates and updates (not their
// subresources) it appends the tolerations the pod lacks. A toleration
// with an empty key, or an empty effect, already covers the taint, as in
// kube.
func (p *DefaultTolerationSeconds) Admit(_ context.Context, a *Attributes) error {
	if a.Resource.Group != "" || a.Resource.Resource != "pods" || a.Subresource != "" ||
		(a.Operation != Create && a.Operation != Update) {
		return nil
	}
	pod, ok := a.Object.(*v1.Pod)
	if !ok {
		return nil
	}
	notReady, unreachable := false, false
	for _, t := range pod.Spec.Tolerations {
		noExecute := t.Effect == v1.TaintEffectNoExecute || t.Effect == ""
		notReady = notReady || noExecute && (t.Key == v1.TaintNodeNotReady || t.Key == "")
		unreachable = unreachable || noExecute && (t.Key == v1.TaintNodeUnreachable || t.Key == "")
	}
	if !notReady {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, toleration(v1.TaintNodeNotReady, p.NotReadySeconds))
	}
	if !unreachable {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, toleration(v1.TaintNodeUnreachable, p.UnreachableSeconds))
	}
	return nil
}

func toleration(key string, seconds int64) v1.Toleration {
	if seconds <= 0 {
		seconds = DefaultTolerationSecondsValue
	}
	return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &seconds}
}
