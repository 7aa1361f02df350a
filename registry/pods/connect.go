package pods

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ConnectREST serves pods/exec, pods/attach and pods/portforward as far as
// kube-apiserver v1.32 goes before it reaches the kubelet (the pod
// registry's ExecREST, AttachREST and PortForwardREST, then
// k8s.io/apimachinery's UpgradeAwareHandler): the pod must exist (404),
// exec and attach need a valid container (400), the pod a node (400), and
// the request must ask for an upgrade (400 "Upgrade request required").
//
// An upgrade that passes those checks is refused too (400, saying why):
// corekube's node agents simulate containers and run no processes, so
// there is no stream to proxy to. Answering a clear error rather than a
// 404 tells kubectl and client libraries the subresource exists
// (discovery and the OpenAPI documents list it, as kube's do).
type ConnectREST struct {
	pods *registry.Store
	// sub is "exec", "attach" or "portforward".
	sub string
}

// NewExecREST, NewAttachREST and NewPortForwardREST return the connect
// subresources of podStore.
func NewExecREST(podStore *registry.Store) *ConnectREST {
	return &ConnectREST{pods: podStore, sub: "exec"}
}

func NewAttachREST(podStore *registry.Store) *ConnectREST {
	return &ConnectREST{pods: podStore, sub: "attach"}
}

func NewPortForwardREST(podStore *registry.Store) *ConnectREST {
	return &ConnectREST{pods: podStore, sub: "portforward"}
}

// GroupVersionKind is the kind of the subresource's options, as kube's
// discovery lists it.
func (c *ConnectREST) GroupVersionKind() schema.GroupVersionKind {
	switch c.sub {
	case "exec":
		return v1.SchemeGroupVersion.WithKind("PodExecOptions")
	case "attach":
		return v1.SchemeGroupVersion.WithKind("PodAttachOptions")
	default:
		return v1.SchemeGroupVersion.WithKind("PodPortForwardOptions")
	}
}

// NewConnectOptions returns an empty value of the subresource's options.
func (c *ConnectREST) NewConnectOptions() runtime.Object {
	switch c.sub {
	case "exec":
		return &v1.PodExecOptions{}
	case "attach":
		return &v1.PodAttachOptions{}
	default:
		return &v1.PodPortForwardOptions{}
	}
}

// Connect checks the request in kube's order and refuses it (see
// ConnectREST).
func (c *ConnectREST) Connect(ctx context.Context, namespace, name string, r *http.Request) (http.Handler, error) {
	obj, err := c.pods.Get(ctx, namespace, name, nil)
	if err != nil {
		return nil, err
	}
	pod := obj.(*v1.Pod)
	if c.sub != "portforward" {
		if err := connectContainer(pod, r.URL.Query().Get("container")); err != nil {
			return nil, err
		}
	}
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	if !isUpgradeRequest(r) {
		return nil, apierrors.NewBadRequest("Upgrade request required")
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("pods/%s is not available for pod %s: corekube's node agents simulate containers and run no processes", c.sub, name))
}

// connectContainer is kube's container check for exec and attach: with
// none named, the pod's only container; else one of the pod's.
func connectContainer(pod *v1.Pod, container string) error {
	if container == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return nil
		case 0:
			return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a container", pod.Name))
		}
		var names []string
		for _, c := range pod.Spec.InitContainers {
			names = append(names, c.Name)
		}
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		for _, c := range pod.Spec.EphemeralContainers {
			names = append(names, c.Name)
		}
		return apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			return nil
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return nil
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == container {
			return nil
		}
	}
	return apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
}

// isUpgradeRequest is k8s.io/apimachinery's httpstream.IsUpgradeRequest: a
// Connection header naming Upgrade.
func isUpgradeRequest(r *http.Request) bool {
	for _, h := range r.Header.Values("Connection") {
		if strings.Contains(strings.ToLower(h), "upgrade") {
			return true
		}
	}
	return false
}
