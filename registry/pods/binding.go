package pods

import (
	"context"
	"fmt"
	"net/http"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// BindingREST serves POST pods/{name}/binding: it assigns an unbound pod
// to a node, once, as the scheduler does through kube's binding subresource.
type BindingREST struct {
	store *registry.Store
}

// NewBindingREST returns the binding subresource of the pod store.
func NewBindingREST(podStore *registry.Store) *BindingREST {
	// The binding was admitted as itself (handlers: AdmitCreate); the pod
	// write it makes is not admitted again, as in kube.
	return &BindingREST{store: podStore.Subresource("binding", bindingStrategy{}).WithoutAdmission()}
}

// New returns an empty Binding.
func (b *BindingREST) New() runtime.Object { return &v1.Binding{} }

// GroupVersionKind is v1 Binding.
func (b *BindingREST) GroupVersionKind() schema.GroupVersionKind {
	return v1.SchemeGroupVersion.WithKind("Binding")
}

var bindingResource = schema.GroupResource{Resource: "pods/binding"}

// Create binds the pod namespace/name to binding.Target.Name.
func (b *BindingREST) Create(ctx context.Context, namespace, name string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	binding := obj.(*v1.Binding)
	if binding.Name != "" && binding.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if binding.Namespace != "" && binding.Namespace != namespace {
		return nil, apierrors.NewBadRequest("namespace in URL does not match namespace in Binding object")
	}
	if errs := validateBinding(binding); len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name, errs)
	}
	node := binding.Target.Name
	assign := func(_ context.Context, current runtime.Object) (runtime.Object, error) {
		if current == nil {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
		}
		pod := current.(*v1.Pod)
		// A binding may carry the pod's uid and resourceVersion as
		// preconditions (the scheduler's view of the pod), as in kube.
		if binding.UID != "" && binding.UID != pod.UID {
			return nil, apierrors.NewConflict(bindingResource, name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", binding.UID, pod.UID))
		}
		if binding.ResourceVersion != "" && binding.ResourceVersion != pod.ResourceVersion {
			return nil, apierrors.NewConflict(bindingResource, name,
				fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", binding.ResourceVersion, pod.ResourceVersion))
		}
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(bindingResource, name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(bindingResource, name, fmt.Errorf("pod %s is already assigned to node %q", name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = node
		setScheduledCondition(pod)
		return pod, nil
	}
	if _, _, err := b.store.Update(ctx, namespace, name, assign, registry.UpdateOptions{DryRun: dryRun}); err != nil {
		return nil, err
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusCreated,
	}, nil
}

func validateBinding(b *v1.Binding) field.ErrorList {
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	return errs
}

// setScheduledCondition records PodScheduled=True, replacing a previous
// condition whole (an Unschedulable reason and message go), as kube does.
func setScheduledCondition(pod *v1.Pod) {
	scheduled := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodScheduled {
			pod.Status.Conditions[i] = scheduled
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, scheduled)
}

// bindingStrategy lets exactly what assign changes through: the binding
// is the only way spec.nodeName changes after create.
type bindingStrategy struct{}

func (bindingStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (bindingStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}
