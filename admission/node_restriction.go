package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corekube/corekube/auth/user"
)

// nodeRestrictionLabelPrefix is the label namespace nodes may not set on
// themselves, so that workloads can be steered by labels nodes cannot forge.
const nodeRestrictionLabelPrefix = "node-restriction.kubernetes.io/"

// NodeRestriction is kube's plugin of that name: a node (system:node:NAME
// in system:nodes) may only write its own Node (not labels of the
// restricted namespaces, not its taints once registered), only create
// mirror pods bound to itself, only delete, evict or update the status of
// pods bound to it, only request tokens bound to its pods, and only its
// own Lease. Requests of anyone else pass.
type NodeRestriction struct {
	// GetPod and GetNode read the watch caches (a NotFound error when
	// absent).
	GetPod  func(ctx context.Context, namespace, name string) (*v1.Pod, error)
	GetNode func(ctx context.Context, name string) (*v1.Node, error)
}

var _ Validator = (*NodeRestriction)(nil)

var (
	nodesGR  = schema.GroupResource{Resource: "nodes"}
	leasesGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

// nodeIdentity is kube's NodeIdentity (auth/authorizer/node.Identity,
// not imported: admission sits below auth's authorizers).
func nodeIdentity(ctx context.Context) (string, bool) {
	u, ok := user.From(ctx)
	if !ok || u == nil || !strings.HasPrefix(u.Name, "system:node:") || !u.InGroup("system:nodes") {
		return "", false
	}
	return strings.TrimPrefix(u.Name, "system:node:"), true
}

// Validate implements Validator. It validates rather than mutates, so
// that a delete sees the object it deletes.
func (p *NodeRestriction) Validate(ctx context.Context, a *Attributes) error {
	node, ok := nodeIdentity(ctx)
	if !ok {
		return nil
	}
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf(format, args...))
	}
	if node == "" {
		u, _ := user.From(ctx)
		return deny("could not determine node from user %q", u.Name)
	}
	switch a.Resource.GroupResource() {
	case nodesGR:
		return p.node(node, a, deny)
	case podsResource:
		switch a.Subresource {
		case "":
			return p.pod(ctx, node, a, deny)
		case "status":
			return p.podStatus(node, a, deny)
		case "eviction":
			return p.eviction(ctx, node, a, deny)
		default:
			return deny("unexpected subresource %q", a.Subresource)
		}
	case schema.GroupResource{Resource: "serviceaccounts"}:
		return p.token(ctx, node, a, deny)
	case leasesGR:
		return p.lease(node, a, deny)
	}
	return nil
}

type denyFunc func(format string, args ...any) error

func (p *NodeRestriction) node(node string, a *Attributes, deny denyFunc) error {
	name := a.Name
	if a.Operation == Create {
		if n, ok := a.Object.(*v1.Node); ok {
			name = n.Name
		}
	}
	if name != node {
		return deny("node %q is not allowed to modify node %q", node, name)
	}
	switch a.Operation {
	case Create:
		n, ok := a.Object.(*v1.Node)
		if !ok {
			return apierrors.NewBadRequest(fmt.Sprintf("unexpected type %T", a.Object))
		}
		if bad := forbiddenNodeLabels(n.Labels, nil); len(bad) > 0 {
			return deny("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case Update:
		n, ok1 := a.Object.(*v1.Node)
		old, ok2 := a.OldObject.(*v1.Node)
		if !ok1 || !ok2 {
			return apierrors.NewBadRequest(fmt.Sprintf("unexpected type %T", a.Object))
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return deny("node %q is not allowed to modify taints", node)
		}
		if bad := forbiddenNodeLabels(n.Labels, old.Labels); len(bad) > 0 {
			return deny("is not allowed to modify labels: %s", strings.Join(bad, ", "))
		}
	}
	return nil
}

// forbiddenNodeLabels lists, sorted, the labels set, changed or removed
// from old to labels that a node may not touch: the
// node-restriction.kubernetes.io/ ones, and those of kubernetes.io or k8s.io
// (and their subdomains) other than the kubelet's own.
func forbiddenNodeLabels(labels, old map[string]string) []string {
	var out []string
	check := func(k string) {
		if forbiddenNodeLabel(k) {
			out = append(out, k)
		}
	}
	for k, v := range labels {
		if ov, ok := old[k]; !ok || ov != v {
			check(k)
		}
	}
	for k := range old {
		if _, ok := labels[k]; !ok {
			check(k)
		}
	}
	sort.Strings(out)
	return out
}

// kubeletLabels are the kubernetes.io labels a kubelet sets on its Node.
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname": true, "kubernetes.io/arch": true, "kubernetes.io/os": true,
	"topology.kubernetes.io/zone": true, "topology.kubernetes.io/region": true,
	"node.kubernetes.io/instance-type": true,
	"beta.kubernetes.io/instance-type": true, "beta.kubernetes.io/arch": true, "beta.kubernetes.io/os": true,
	"failure-domain.beta.kubernetes.io/zone": true, "failure-domain.beta.kubernetes.io/region": true,
}

func forbiddenNodeLabel(key string) bool {
	if strings.HasPrefix(key, nodeRestrictionLabelPrefix) {
		return true
	}
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	kube := func(d string) bool { return d == "kubernetes.io" || strings.HasSuffix(d, ".kubernetes.io") }
	if !kube(domain) && domain != "k8s.io" && !strings.HasSuffix(domain, ".k8s.io") {
		return false
	}
	if kubeletLabels[key] || domain == "kubelet.kubernetes.io" || strings.HasSuffix(domain, ".kubelet.kubernetes.io") ||
		domain == "node.kubernetes.io" || strings.HasSuffix(domain, ".node.kubernetes.io") {
		return false
	}
	return true
}

func (p *NodeRestriction) pod(ctx context.Context, node string, a *Attributes, deny denyFunc) error {
	switch a.Operation {
	case Create:
		return p.mirrorPod(ctx, node, a, deny)
	case Delete:
		pod, ok := a.OldObject.(*v1.Pod)
		if !ok {
			var err error
			if pod, err = p.GetPod(ctx, a.Namespace, a.Name); err != nil {
				return podLookupError(err, deny)
			}
		}
		if pod.Spec.NodeName != node {
			return deny("node %q can only delete pods with spec.nodeName set to itself", node)
		}
		return nil
	default:
		return deny("unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, node)
	}
}

func podLookupError(err error, deny denyFunc) error {
	if apierrors.IsNotFound(err) {
		return err
	}
	return deny("%v", err)
}

func (p *NodeRestriction) mirrorPod(ctx context.Context, node string, a *Attributes, deny denyFunc) error {
	pod, ok := a.Object.(*v1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected type %T", a.Object))
	}
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; !mirror {
		return deny("pod does not have %q annotation, node %q can only create mirror pods", MirrorPodAnnotation, node)
	}
	if pod.Spec.NodeName != node {
		return deny("node %q can only create pods with spec.nodeName set to itself", node)
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return deny("node %q can only create pods with an owner reference set to itself", node)
	case 1:
	default:
		return deny("node %q can only create pods with a single owner reference set to itself", node)
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != node {
		return deny("node %q can only create pods with an owner reference set to itself", node)
	}
	if owner.Controller == nil || !*owner.Controller {
		return deny("node %q can only create pods with a controller owner reference set to itself", node)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return deny("node %q must not set blockOwnerDeletion on an owner reference", node)
	}
	n, err := p.GetNode(ctx, node)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return deny("error looking up node %s to verify uid: %v", node, err)
	}
	if owner.UID != n.UID {
		return deny("node %s UID mismatch: expected %s got %s", node, n.UID, owner.UID)
	}
	// A mirror pod references no other object: the node could otherwise
	// reach secrets and the like through the graph.
	if podUsesSecrets(pod) {
		return deny("node %q can not create pods that reference secrets", node)
	}
	if podUsesConfigMaps(pod) {
		return deny("node %q can not create pods that reference configmaps", node)
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return deny("node %q can not create pods that reference persistentvolumeclaims", node)
		}
	}
	if pod.Spec.ServiceAccountName != "" {
		return deny("node %q can not create pods that reference a service account", node)
	}
	return nil
}

func allContainers(pod *v1.Pod) []v1.Container {
	out := append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, e := range pod.Spec.EphemeralContainers {
		out = append(out, v1.Container{Env: e.Env, EnvFrom: e.EnvFrom})
	}
	return out
}

func podUsesSecrets(pod *v1.Pod) bool {
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					return true
				}
			}
		}
	}
	for _, c := range allContainers(pod) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return true
			}
		}
	}
	return false
}

func podUsesConfigMaps(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					return true
				}
			}
		}
	}
	for _, c := range allContainers(pod) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				return true
			}
		}
	}
	return false
}

func (p *NodeRestriction) podStatus(node string, a *Attributes, deny denyFunc) error {
	if a.Operation != Update {
		return deny("unexpected operation %q", a.Operation)
	}
	old, ok1 := a.OldObject.(*v1.Pod)
	pod, ok2 := a.Object.(*v1.Pod)
	if !ok1 || !ok2 {
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected type %T", a.OldObject))
	}
	if old.Spec.NodeName != node {
		return deny("node %q can only update pod status for pods with spec.nodeName set to itself", node)
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return deny("node %q cannot update labels through pod status", node)
	}
	return nil
}

func (p *NodeRestriction) eviction(ctx context.Context, node string, a *Attributes, deny denyFunc) error {
	if a.Operation != Create {
		return deny("unexpected operation %s", a.Operation)
	}
	name := a.Name
	if name == "" {
		if ev, ok := a.Object.(*policyv1.Eviction); ok {
			name = ev.Name
		}
		if name == "" {
			return apierrors.NewBadRequest("could not determine pod from request data")
		}
	}
	pod, err := p.GetPod(ctx, a.Namespace, name)
	if err != nil {
		return podLookupError(err, deny)
	}
	if pod.Spec.NodeName != node {
		return deny("node %s can only evict pods with spec.nodeName set to itself", node)
	}
	return nil
}

func (p *NodeRestriction) token(ctx context.Context, node string, a *Attributes, deny denyFunc) error {
	if a.Operation != Create || a.Subresource != "token" {
		return nil
	}
	tr, ok := a.Object.(*authenticationv1.TokenRequest)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("unexpected type %T", a.Object))
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return deny("node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return deny("node requested token with a pod binding without a uid")
	}
	pod, err := p.GetPod(ctx, a.Namespace, ref.Name)
	if err != nil {
		return podLookupError(err, deny)
	}
	if ref.UID != pod.UID {
		return deny("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID)
	}
	if pod.Spec.NodeName != node {
		return deny("node requested token bound to a pod scheduled on a different node")
	}
	return nil
}

func (p *NodeRestriction) lease(node string, a *Attributes, deny denyFunc) error {
	if a.Namespace != "kube-node-lease" {
		return deny("can only access leases in the %q system namespace", "kube-node-lease")
	}
	name := a.Name
	if a.Operation == Create {
		l, ok := a.Object.(*coordinationv1.Lease)
		if !ok {
			return apierrors.NewBadRequest(fmt.Sprintf("unexpected type %T", a.Object))
		}
		name = l.Name
	}
	if name != node {
		return deny("%v", errors.New("can only access node lease with the same name as the requesting node"))
	}
	return nil
}
