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

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

// Config returns a copy of restConfig whose User-Agent is userAgent unless
// restConfig sets one: a component's own client presents its own name, and
// a caller that chose a User-Agent keeps it. restConfig is not changed.
func Config(restConfig *rest.Config, userAgent string) *rest.Config {
	rc := rest.CopyConfig(restConfig)
	if rc.UserAgent == "" {
		rc.UserAgent = userAgent
	}
	return rc
}

// NewClient returns a client of its own for the server restConfig points
// at, with the User-Agent Config gives it. The error is client-go's,
// unwrapped, for the caller to name itself in.
func NewClient(restConfig *rest.Config, userAgent string) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(Config(restConfig, userAgent))
}
