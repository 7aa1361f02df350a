package admission

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Priority is kube's Priority plugin. As a mutator it gives every new pod
// the priority and preemption policy of its PriorityClass (the global
// default class when it names none, priority 0 when there is no default
// either), refusing a class that does not exist and a spec.priority or
// spec.preemptionPolicy that differs from the class's; on a pod update it
// keeps the stored priority when the client left it out. As a validator
// it refuses a second global default class. Since kube 1.17 the
// system-node-critical and system-cluster-critical classes may be used in
// any namespace (quota limits them instead), so no namespace is checked.
type Priority struct {
	// Get returns the named class, a NotFound error when there is none.
	// It reads a cache: pod creates are the hot path.
	Get func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error)
	// Default returns the global default class, nil when there is none:
	// of several (two API servers raced), the lowest value, as kube.
	Default func(ctx context.Context) (*schedulingv1.PriorityClass, error)
}

var (
	_ Mutator   = (*Priority)(nil)
	_ Validator = (*Priority)(nil)

	priorityClassesResource = schedulingv1.Resource("priorityclasses")
)

// Admit implements Mutator for pod creates and updates (not their
// subresources).
func (p *Priority) Admit(ctx context.Context, a *Attributes) error {
	if a.Subresource != "" || a.Resource.Group != "" || a.Resource.Resource != "pods" {
		return nil
	}
	pod, ok := a.Object.(*v1.Pod)
	if !ok {
		return nil
	}
	switch a.Operation {
	case Update:
		// The pod's priority was set at its create; an update that omits
		// it keeps it (validation refuses any other change of it).
		old, ok := a.OldObject.(*v1.Pod)
		if !ok {
			return nil
		}
		if pod.Spec.Priority == nil && old.Spec.Priority != nil {
			priority := *old.Spec.Priority
			pod.Spec.Priority = &priority
		}
		if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
			policy := *old.Spec.PreemptionPolicy
			pod.Spec.PreemptionPolicy = &policy
		}
		return nil
	case Create:
		return p.admitNewPod(ctx, a, pod)
	}
	return nil
}

func (p *Priority) admitNewPod(ctx context.Context, a *Attributes, pod *v1.Pod) error {
	var priority int32
	var policy *v1.PreemptionPolicy
	if pod.Spec.PriorityClassName == "" {
		pc, err := p.Default(ctx)
		if err != nil {
			return fmt.Errorf("failed to get default priority class: %w", err)
		}
		if pc != nil {
			pod.Spec.PriorityClassName = pc.Name
			priority, policy = pc.Value, pc.PreemptionPolicy
		} else {
			lower := v1.PreemptLowerPriority
			policy = &lower
		}
	} else {
		pc, err := p.Get(ctx, pod.Spec.PriorityClassName)
		switch {
		case apierrors.IsNotFound(err):
			return apierrors.NewForbidden(podsResource, a.Name,
				fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		case err != nil:
			return fmt.Errorf("failed to get PriorityClass with name %s: %w", pod.Spec.PriorityClassName, err)
		}
		priority, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return apierrors.NewForbidden(podsResource, a.Name, fmt.Errorf(
			"the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name",
			*pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return apierrors.NewForbidden(podsResource, a.Name, fmt.Errorf(
				"the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name",
				*pod.Spec.PreemptionPolicy, *policy))
		}
		pp := *policy
		pod.Spec.PreemptionPolicy = &pp
	}
	return nil
}

// Validate implements Validator: a class may become the global default
// only while no other class is.
func (p *Priority) Validate(ctx context.Context, a *Attributes) error {
	if a.Subresource != "" || a.Resource.GroupResource() != priorityClassesResource ||
		(a.Operation != Create && a.Operation != Update) {
		return nil
	}
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok || !pc.GlobalDefault {
		return nil
	}
	def, err := p.Default(ctx)
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %w", err)
	}
	if def != nil && (a.Operation == Create || def.Name != pc.Name) {
		return apierrors.NewForbidden(priorityClassesResource, a.Name,
			fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}
