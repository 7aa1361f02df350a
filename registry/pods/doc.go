// Package pods implements the registry strategy of the core/v1 Pod resource
// the way kube-apiserver v1.32 behaves (pkg/registry/core/pod, the v1
// defaulting functions), written against the versioned k8s.io/api types
// (the pod parts of kube's pkg/apis/core/validation are in
// registry/pods/validation):
//
//   - Strategy (main resource): scheme defaulting plus the defaults that
//     kube's Priority admission plugin applies without a default class (a
//     fallback: the plugin, admission/priority.go, has resolved the
//     pod's class before), status reset on create
//     (phase Pending, QoS class), status preserved on update, spec
//     validation on create and kube's pod-update immutability rules,
//     graceful-deletion decision and selectable fields.
//   - StatusStrategy (/status subresource): keeps the spec of the stored
//     object and validates the status update.
//
// Pure helpers are exported for other packages (bindings, evictions, tables):
// Default, QOSClass and ToSelectableFields.
//
// ObjectMeta (name, labels, annotations syntax, uid, timestamps,
// resourceVersion, finalizers, ownerReferences) is validated and handled by
// the generic Store; only pod-specific annotation rules live in
// registry/pods/validation.
package pods
