// Package registry holds the generic Store that implements every REST verb
// for every resource over storage.Interface, and the Strategy interface
// through which each resource (one sub-package per resource) supplies its
// type, defaults, validation and selectable fields. Storage errors become
// Kubernetes Status errors here, in one table (errors.go).
package registry
