// Package validation is the pod part of kube-apiserver v1.32's
// pkg/apis/core/validation, written against the versioned k8s.io/api types:
// ValidatePod (create), ValidatePodSpec, ValidatePodUpdate (kube's
// immutability rules and the ones relaxed for pods stored before a stricter
// rule) and ValidatePodStatusUpdate, with kube's field paths and messages.
//
// It is its own package, as in kube, so that the pod strategy
// (registry/pods) stays small and the rules can be read and tested on their
// own; it knows nothing of the registry. ObjectMeta syntax is the generic
// Store's; only pod-specific annotation rules live here.
package validation
