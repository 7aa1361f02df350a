// Package webhookconfigurations is the registry strategy of the
// admissionregistration.k8s.io/v1 MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration resources, with kube-apiserver v1.32's
// defaults (SetDefaults_* in pkg/apis/admissionregistration/v1), validation
// and messages (pkg/apis/admissionregistration/validation) and printers.
// matchConditions compile in the dispatcher's CEL environment
// (admission/webhook), which lacks kube's authorizer variable.
package webhookconfigurations

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Group and Version of the resources.
const (
	Group   = "admissionregistration.k8s.io"
	Version = "v1"
)

// MutatingStrategy is the strategy of mutatingwebhookconfigurations.
type MutatingStrategy struct{ registry.Base }

// ValidatingStrategy is the strategy of validatingwebhookconfigurations.
type ValidatingStrategy struct{ registry.Base }

var (
	_ registry.Strategy       = (*MutatingStrategy)(nil)
	_ registry.TableConvertor = (*MutatingStrategy)(nil)
	_ registry.Strategy       = (*ValidatingStrategy)(nil)
	_ registry.TableConvertor = (*ValidatingStrategy)(nil)
)

// NewMutatingStrategy returns the mutatingwebhookconfigurations strategy.
func NewMutatingStrategy() *MutatingStrategy {
	return &MutatingStrategy{registry.Base{
		// Info describes mutatingwebhookconfigurations as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group:      Group,
			Version:    Version,
			Resource:   "mutatingwebhookconfigurations",
			Singular:   "mutatingwebhookconfiguration",
			Kind:       "MutatingWebhookConfiguration",
			ListKind:   "MutatingWebhookConfigurationList",
			Categories: []string{"api-extensions"},
		},
		NewObject:     func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		NewListObject: func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// NewValidatingStrategy returns the validatingwebhookconfigurations strategy.
func NewValidatingStrategy() *ValidatingStrategy {
	return &ValidatingStrategy{registry.Base{
		// Info describes validatingwebhookconfigurations as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group:      Group,
			Version:    Version,
			Resource:   "validatingwebhookconfigurations",
			Singular:   "validatingwebhookconfiguration",
			Kind:       "ValidatingWebhookConfiguration",
			ListKind:   "ValidatingWebhookConfigurationList",
			Categories: []string{"api-extensions"},
		},
		NewObject:     func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		NewListObject: func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// Default applies kube's defaults, which kube applies when it decodes a
// request: before the field manager runs, so that the writer owns the
// defaulted fields in managedFields as on kube.
func (*MutatingStrategy) Default(obj runtime.Object) {
	DefaultMutating(obj.(*admissionregistrationv1.MutatingWebhookConfiguration))
}

// Default applies kube's defaults, as MutatingStrategy.Default.
func (*ValidatingStrategy) Default(obj runtime.Object) {
	DefaultValidating(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration))
}

// PrepareForCreate applies kube's defaults.
func (*MutatingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	DefaultMutating(obj.(*admissionregistrationv1.MutatingWebhookConfiguration))
}

// PrepareForUpdate applies kube's defaults; everything may change.
func (*MutatingStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	DefaultMutating(obj.(*admissionregistrationv1.MutatingWebhookConfiguration))
}

// PrepareForCreate applies kube's defaults.
func (*ValidatingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	DefaultValidating(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration))
}

// PrepareForUpdate applies kube's defaults; everything may change.
func (*ValidatingStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	DefaultValidating(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration))
}

// Validate validates a new configuration with kube's strictest options.
func (*MutatingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	c := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	return validateWebhooks(mutatingHooks(c.Webhooks), strictOptions())
}

// ValidateUpdate relaxes, as kube does, the rules that a stored
// configuration may predate (unique names, side effects, review versions).
func (*MutatingStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	o := old.(*admissionregistrationv1.MutatingWebhookConfiguration)
	return validateWebhooks(mutatingHooks(c.Webhooks), updateOptions(mutatingHooks(o.Webhooks)))
}

// Validate validates a new configuration with kube's strictest options.
func (*ValidatingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	return validateWebhooks(validatingHooks(c.Webhooks), strictOptions())
}

// ValidateUpdate relaxes the rules a stored configuration may predate.
func (*ValidatingStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	o := old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	return validateWebhooks(validatingHooks(c.Webhooks), updateOptions(validatingHooks(o.Webhooks)))
}

// tableColumns are kube's columns of both kinds.
func tableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
		registry.AgeColumn(),
	}
}

// TableColumns are kube's columns: NAME, WEBHOOKS, AGE.
func (*MutatingStrategy) TableColumns() []metav1.TableColumnDefinition { return tableColumns() }

// TableColumns are kube's columns: NAME, WEBHOOKS, AGE.
func (*ValidatingStrategy) TableColumns() []metav1.TableColumnDefinition { return tableColumns() }

// TableRow prints a configuration as kube's printer does.
func (*MutatingStrategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	c, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a MutatingWebhookConfiguration, got %T", obj)
	}
	return metav1.TableRow{Cells: []any{c.Name, int64(len(c.Webhooks)), registry.TableAge(c.CreationTimestamp, now)}}, nil
}

// TableRow prints a configuration as kube's printer does.
func (*ValidatingStrategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	c, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a ValidatingWebhookConfiguration, got %T", obj)
	}
	return metav1.TableRow{Cells: []any{c.Name, int64(len(c.Webhooks)), registry.TableAge(c.CreationTimestamp, now)}}, nil
}

var (
	_ registry.GenerationStrategy = (*MutatingStrategy)(nil)
	_ registry.GenerationStrategy = (*ValidatingStrategy)(nil)
)

// SpecChanged: kube bumps metadata.generation when the webhooks change.
func (*MutatingStrategy) SpecChanged(obj, old runtime.Object) bool {
	return !apiequality.Semantic.DeepEqual(obj.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks,
		old.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks)
}

// SpecChanged: kube bumps metadata.generation when the webhooks change.
func (*ValidatingStrategy) SpecChanged(obj, old runtime.Object) bool {
	return !apiequality.Semantic.DeepEqual(obj.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks,
		old.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
}
