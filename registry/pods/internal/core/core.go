// Package core mirrors the few kube internal (k8s.io/kubernetes/pkg/apis/core)
// types that kube-apiserver prints with %#v inside validation error
// messages, so that corekube's messages read exactly like kube's
// (e.g. `Duplicate value: core.PodIP{IP:"10.0.0.1"}`). They are only ever
// used as field.Error bad values.
package core

// PodIP mirrors core.PodIP.
type PodIP struct {
	IP string
}

// HostIP mirrors core.HostIP.
type HostIP struct {
	IP string
}
