// Package useragent builds the User-Agent headers corekube's components
// send, in kube's form ("kube-controller-manager/v1.32.3 (linux/amd64)
// corekube/node-lifecycle-controller"). The API server derives a write's
// field manager from the User-Agent's first word, so the managedFields of
// objects they write name the component kube's would: kubelet,
// kube-scheduler, kube-controller-manager.
package useragent

import (
	"fmt"
	"runtime"
)

// Version is the Kubernetes version corekube's components present.
const Version = "v1.32.3"

// Components as kube names them.
const (
	Kubelet               = "kubelet"
	KubeScheduler         = "kube-scheduler"
	KubeControllerManager = "kube-controller-manager"
)

// For returns the User-Agent of component (Kubelet, KubeScheduler,
// KubeControllerManager) for the corekube part called name, as client-go's
// rest.AddUserAgent writes kube's.
func For(component, name string) string {
	return fmt.Sprintf("%s/%s (%s/%s) corekube/%s", component, Version, runtime.GOOS, runtime.GOARCH, name)
}
