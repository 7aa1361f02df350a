// Package nodes is the registry strategy of core/v1 Nodes: the defaulting,
// validation and selectable fields kube-apiserver v1.32 applies to nodes
// (pkg/registry/core/node, ValidateNode/ValidateNodeUpdate in
// pkg/apis/core/validation, the v1 NodeSpec conversion and NodeStatus
// defaults). It also owns taint validation (ValidateTaints).
//
// Admission behaviour (e.g. the NodeTaint plugin adding
// node.kubernetes.io/not-ready:NoSchedule) is not done here.
package nodes

import (
	"context"
	"fmt"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Strategy is the strategy of the nodes resource.
type Strategy struct{ registry.Base }

// StatusStrategy is the strategy of nodes/status: it keeps the old spec.
type StatusStrategy struct{}

var (
	_ registry.Strategy       = (*Strategy)(nil)
	_ registry.StatusStrategy = (*StatusStrategy)(nil)
)

// NewStrategy returns the nodes strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes nodes as kube's discovery does.
		Resource: registry.ResourceInfo{
			Version:              "v1",
			Resource:             "nodes",
			Singular:             "node",
			Kind:                 "Node",
			ListKind:             "NodeList",
			ShortNames:           []string{"no"},
			CustomFieldSelectors: true,
		},
		NewObject:     func() runtime.Object { return &v1.Node{} },
		NewListObject: func() runtime.Object { return &v1.NodeList{} },
		// AllowCreateOnUpdate is false for nodes.
	}}
}

// NewStatusStrategy returns the nodes/status strategy.
func NewStatusStrategy() *StatusStrategy { return &StatusStrategy{} }

// Default applies what kube's decoding does to a node (the v1 <-> internal
// conversion of podCIDR and podCIDRs, the status defaults) before the field
// manager runs, so that the writer owns spec.podCIDRs in managedFields as
// on kube.
func (*Strategy) Default(obj runtime.Object) {
	node := obj.(*v1.Node)
	normalizePodCIDRs(&node.Spec)
	defaultStatus(&node.Status)
}

// PrepareForCreate applies the v1 defaults and conversion normalisation.
// Nodes may set status on create; the removed dynamic kubelet config fields
// (spec.configSource, status.config) are dropped.
func (*Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	node := obj.(*v1.Node)
	node.Spec.ConfigSource = nil
	node.Status.Config = nil
	normalizePodCIDRs(&node.Spec)
	defaultStatus(&node.Status)
}

// PrepareForUpdate keeps the old status and normalises the spec.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	node, oldNode := obj.(*v1.Node), old.(*v1.Node)
	node.Status = oldNode.Status
	if oldNode.Spec.ConfigSource == nil {
		node.Spec.ConfigSource = nil
	}
	normalizePodCIDRs(&node.Spec)
}

// Validate validates a new node.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateNode(obj.(*v1.Node))
}

// ValidateUpdate validates an update of the main resource. Like kube it runs
// both the create and the update checks, so some errors appear twice.
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	node := obj.(*v1.Node)
	return append(validateNode(node), validateNodeUpdate(node, old.(*v1.Node))...)
}

// GetAttrs returns the node's labels and its selectable fields:
// metadata.name and spec.unschedulable.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return nil, nil, fmt.Errorf("not a node")
	}
	return labels.Set(node.Labels), fields.Set{
		"metadata.name":      node.Name,
		"spec.unschedulable": fmt.Sprint(node.Spec.Unschedulable),
	}, nil
}

// PrepareForUpdate keeps the old spec; status.config may only be kept, never
// introduced.
func (*StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	node, oldNode := obj.(*v1.Node), old.(*v1.Node)
	node.Spec = oldNode.Spec
	if oldNode.Status.Config == nil {
		node.Status.Config = nil
	}
	defaultStatus(&node.Status)
}

// ValidateUpdate validates a status update (kube runs only the update checks).
func (*StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateNodeUpdate(obj.(*v1.Node), old.(*v1.Node))
}

// normalizePodCIDRs mirrors kube's v1 <-> internal NodeSpec conversion: the
// internal type only has podCIDRs; podCIDR wins when both are set and
// disagree, and podCIDR is always written back as podCIDRs[0].
func normalizePodCIDRs(spec *v1.NodeSpec) {
	if spec.PodCIDR != "" && (len(spec.PodCIDRs) == 0 || spec.PodCIDRs[0] != spec.PodCIDR) {
		spec.PodCIDRs = []string{spec.PodCIDR}
	}
	spec.PodCIDR = ""
	if len(spec.PodCIDRs) > 0 {
		spec.PodCIDR = spec.PodCIDRs[0]
	}
}

// defaultStatus applies SetDefaults_NodeStatus (allocatable defaults to
// capacity) and SetDefaults_ResourceList (quantities rounded up to milli
// precision).
func defaultStatus(status *v1.NodeStatus) {
	roundUpToMilli(status.Capacity)
	roundUpToMilli(status.Allocatable)
	if status.Allocatable == nil && status.Capacity != nil {
		status.Allocatable = make(v1.ResourceList, len(status.Capacity))
		for name, q := range status.Capacity {
			status.Allocatable[name] = q.DeepCopy()
		}
	}
}

func roundUpToMilli(list v1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}

// GetResetFields: an update of the node never changes its status, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "status")
}

// GetResetFields: a status update never changes the spec, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("v1", "spec")
}
