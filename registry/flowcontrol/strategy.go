// Package flowcontrol is the registry strategy of
// flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
// PriorityLevelConfigurations as kube-apiserver v1.32 has it
// (pkg/registry/flowcontrol, the v1 defaults and
// pkg/apis/flowcontrol/validation): cluster-scoped, status server-owned
// (its own subresource), spec changes bump metadata.generation.
package flowcontrol

import (
	"context"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"

	"github.com/corekube/corekube/registry"
)

// GroupName is the API group of both resources.
const GroupName = flowcontrolv1.GroupName

// FlowSchemaStrategy is the strategy of the flowschemas resource.
type FlowSchemaStrategy struct{ registry.Base }

// FlowSchemaStatusStrategy is the strategy of flowschemas/status: it keeps
// the old spec.
type FlowSchemaStatusStrategy struct{}

// PriorityLevelStrategy is the strategy of the prioritylevelconfigurations
// resource.
type PriorityLevelStrategy struct{ registry.Base }

// PriorityLevelStatusStrategy is the strategy of
// prioritylevelconfigurations/status: it keeps the old spec.
type PriorityLevelStatusStrategy struct{}

var (
	_ registry.Strategy           = (*FlowSchemaStrategy)(nil)
	_ registry.GenerationStrategy = (*FlowSchemaStrategy)(nil)
	_ registry.Defaulter          = (*FlowSchemaStrategy)(nil)
	_ registry.StatusStrategy     = (*FlowSchemaStatusStrategy)(nil)
	_ registry.Strategy           = (*PriorityLevelStrategy)(nil)
	_ registry.GenerationStrategy = (*PriorityLevelStrategy)(nil)
	_ registry.Defaulter          = (*PriorityLevelStrategy)(nil)
	_ registry.StatusStrategy     = (*PriorityLevelStatusStrategy)(nil)
)

// NewFlowSchemaStrategy returns the flowschemas strategy.
func NewFlowSchemaStrategy() *FlowSchemaStrategy {
	return &FlowSchemaStrategy{registry.Base{
		// Info describes flowschemas as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group: GroupName, Version: "v1", Resource: "flowschemas", Singular: "flowschema",
			Kind: "FlowSchema", ListKind: "FlowSchemaList",
		},
		NewObject:     func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		NewListObject: func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// NewFlowSchemaStatusStrategy returns the flowschemas/status strategy.
func NewFlowSchemaStatusStrategy() *FlowSchemaStatusStrategy { return &FlowSchemaStatusStrategy{} }

// NewPriorityLevelStrategy returns the prioritylevelconfigurations strategy.
func NewPriorityLevelStrategy() *PriorityLevelStrategy {
	return &PriorityLevelStrategy{registry.Base{
		// Info describes prioritylevelconfigurations as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group: GroupName, Version: "v1", Resource: "prioritylevelconfigurations", Singular: "prioritylevelconfiguration",
			Kind: "PriorityLevelConfiguration", ListKind: "PriorityLevelConfigurationList",
		},
		NewObject:     func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		NewListObject: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// NewPriorityLevelStatusStrategy returns the
// prioritylevelconfigurations/status strategy.
func NewPriorityLevelStatusStrategy() *PriorityLevelStatusStrategy {
	return &PriorityLevelStatusStrategy{}
}

// Default applies the v1 scheme defaults: matchingPrecedence 1000.
func (*FlowSchemaStrategy) Default(obj runtime.Object) {
	fs := obj.(*flowcontrolv1.FlowSchema)
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = 1000
	}
}

// PrepareForCreate clears the status and applies the defaults.
func (s *FlowSchemaStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*flowcontrolv1.FlowSchema).Status = flowcontrolv1.FlowSchemaStatus{}
	s.Default(obj)
}

// PrepareForUpdate keeps the old status and applies the defaults.
func (s *FlowSchemaStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*flowcontrolv1.FlowSchema).Status = old.(*flowcontrolv1.FlowSchema).Status
	s.Default(obj)
}

// SpecChanged reports whether the spec differs, which bumps generation.
func (*FlowSchemaStrategy) SpecChanged(obj, old runtime.Object) bool {
	return !equality.Semantic.DeepEqual(obj.(*flowcontrolv1.FlowSchema).Spec, old.(*flowcontrolv1.FlowSchema).Spec)
}

// Validate is kube's ValidateFlowSchema (the spec; the Store checks the
// metadata).
func (*FlowSchemaStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateFlowSchemaSpec(&obj.(*flowcontrolv1.FlowSchema).Spec, field.NewPath("spec"))
}

// ValidateUpdate validates the new spec; nothing is immutable.
func (*FlowSchemaStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateFlowSchemaSpec(&obj.(*flowcontrolv1.FlowSchema).Spec, field.NewPath("spec"))
}

// GetResetFields: the main resource never writes the status.
func (*FlowSchemaStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("flowcontrol.apiserver.k8s.io/v1", "status")
}

// PrepareForUpdate keeps the old spec.
func (*FlowSchemaStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*flowcontrolv1.FlowSchema).Spec = old.(*flowcontrolv1.FlowSchema).Spec
}

// ValidateUpdate validates the conditions (a type each), as kube's
// ValidateFlowSchemaStatus.
func (*FlowSchemaStatusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	conds := obj.(*flowcontrolv1.FlowSchema).Status.Conditions
	return validateConditionTypes(len(conds), func(i int) string { return string(conds[i].Type) })
}

// validateConditionTypes requires a type of each of n status conditions,
// typeOf(i) being the i-th's: the one status rule of both resources.
func validateConditionTypes(n int, typeOf func(i int) string) field.ErrorList {
	var allErrs field.ErrorList
	path := field.NewPath("status", "conditions")
	for i := range n {
		if typeOf(i) == "" {
			allErrs = append(allErrs, field.Required(path.Index(i).Child("type"), "must not be empty"))
		}
	}
	return allErrs
}

// GetResetFields: a status write never changes the spec.
func (*FlowSchemaStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("flowcontrol.apiserver.k8s.io/v1", "spec")
}

// Default applies kube's v1 defaults: nominalConcurrencyShares 30 and
// lendablePercent 0 for a Limited level, queues 64, handSize 8,
// queueLengthLimit 50 for its queuing, 0 and 0 for an Exempt level's
// settings when given.
func (*PriorityLevelStrategy) Default(obj runtime.Object) {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = new(int32)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = new(int32)
		}
	}
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			v := int32(30)
			l.NominalConcurrencyShares = &v
		}
		if l.LendablePercent == nil {
			l.LendablePercent = new(int32)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = 8
			}
			if q.Queues == 0 {
				q.Queues = 64
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = 50
			}
		}
	}
}

// PrepareForCreate clears the status and applies the defaults.
func (s *PriorityLevelStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*flowcontrolv1.PriorityLevelConfiguration).Status = flowcontrolv1.PriorityLevelConfigurationStatus{}
	s.Default(obj)
}

// PrepareForUpdate keeps the old status and applies the defaults.
func (s *PriorityLevelStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*flowcontrolv1.PriorityLevelConfiguration).Status = old.(*flowcontrolv1.PriorityLevelConfiguration).Status
	s.Default(obj)
}

// SpecChanged reports whether the spec differs, which bumps generation.
func (*PriorityLevelStrategy) SpecChanged(obj, old runtime.Object) bool {
	return !equality.Semantic.DeepEqual(obj.(*flowcontrolv1.PriorityLevelConfiguration).Spec, old.(*flowcontrolv1.PriorityLevelConfiguration).Spec)
}

// Validate is kube's ValidatePriorityLevelConfiguration for v1 requests.
func (*PriorityLevelStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	return validatePriorityLevelSpec(&pl.Spec, pl.Name, field.NewPath("spec"))
}

// ValidateUpdate validates the new spec; nothing is immutable.
func (*PriorityLevelStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	return validatePriorityLevelSpec(&pl.Spec, pl.Name, field.NewPath("spec"))
}

// GetResetFields: the main resource never writes the status.
func (*PriorityLevelStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("flowcontrol.apiserver.k8s.io/v1", "status")
}

// PrepareForUpdate keeps the old spec.
func (*PriorityLevelStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*flowcontrolv1.PriorityLevelConfiguration).Spec = old.(*flowcontrolv1.PriorityLevelConfiguration).Spec
}

// ValidateUpdate validates the conditions (a type each).
func (*PriorityLevelStatusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	conds := obj.(*flowcontrolv1.PriorityLevelConfiguration).Status.Conditions
	return validateConditionTypes(len(conds), func(i int) string { return string(conds[i].Type) })
}

// GetResetFields: a status write never changes the spec.
func (*PriorityLevelStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("flowcontrol.apiserver.k8s.io/v1", "spec")
}
