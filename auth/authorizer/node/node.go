// Package node is kube's Node authorizer: a node's kubelet, the user
// system:node:NAME in the group system:nodes, may do what the system:node
// rules allow, but pods and Nodes only its own (kube 1.32's
// AuthorizeNodeWithSelectors: pods listed and watched with a spec.nodeName
// field selector, its Node by name), and the objects kube ties to a node
// through its graph
// (Secrets, ConfigMaps, PersistentVolumeClaims and ServiceAccount tokens
// of the pods bound to it) only when such a pod uses them, and its Lease
// only. Everyone else gets no opinion. NodeRestriction admission narrows
// the writes further.
package node

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/selection"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/authorizer/rbac"
	"github.com/corekube/corekube/auth/user"
)

// Identity names of nodes, as kube's.
const (
	UserPrefix = "system:node:"
	Group      = "system:nodes"
	// LeaseNamespace holds the nodes' heartbeat Leases.
	LeaseNamespace = "kube-node-lease"
)

// Identity returns the node name of u, and whether u is a node (in the
// group system:nodes with a name starting system:node:); a node may have
// an empty name, which no rule allows, as kube's NodeIdentity.
func Identity(u *user.Info) (string, bool) {
	if u == nil || !strings.HasPrefix(u.Name, UserPrefix) || !u.InGroup(Group) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, UserPrefix), true
}

// Authorizer is the Node authorizer, reading its Graph.
type Authorizer struct {
	graph *Graph
	rules []rbacv1.PolicyRule
}

// New returns the authorizer deciding on graph.
func New(graph *Graph) *Authorizer {
	return &Authorizer{graph: graph, rules: rbac.NodeRules()}
}

// Authorize implements authorizer.Authorizer.
func (z *Authorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	node, ok := Identity(a.User)
	if !ok {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if node == "" {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("unknown node for user %q", a.User.Name), nil
	}
	if a.ResourceRequest {
		switch {
		case a.APIGroup == "" && a.Resource == "secrets":
			return z.readNamespaced(node, KindSecret, &a)
		case a.APIGroup == "" && a.Resource == "configmaps":
			return z.readNamespaced(node, KindConfigMap, &a)
		case a.APIGroup == "" && a.Resource == "persistentvolumeclaims":
			if a.Subresource == "status" {
				return z.statusUpdate(node, KindPersistentVolumeClaim, &a)
			}
			return z.get(node, KindPersistentVolumeClaim, &a)
		case a.APIGroup == "" && a.Resource == "persistentvolumes":
			// Volumes are reached through their claims, which corekube
			// does not bind: no volume is related to a node.
			return z.get(node, "persistentvolumes", &a)
		case a.APIGroup == "" && a.Resource == "serviceaccounts":
			return z.createToken(node, &a)
		case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
			return z.lease(node, &a)
		case a.APIGroup == "" && a.Resource == "pods":
			return z.pod(node, &a)
		case a.APIGroup == "" && a.Resource == "nodes":
			return z.nodeObject(node, &a)
		}
	}
	for i := range z.rules {
		if rbac.RuleAllows(&a, &z.rules[i]) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (z *Authorizer) related(node, kind string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Name == "" {
		return authorizer.DecisionNoOpinion, "No Object name found", nil
	}
	if !z.graph.Related(node, kind, a.Namespace, a.Name) {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node), nil
	}
	return authorizer.DecisionAllow, "", nil
}

func (z *Authorizer) readNamespaced(node, kind string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "list", "watch":
	default:
		return authorizer.DecisionNoOpinion, "can only read resources of this type", nil
	}
	if a.Subresource != "" {
		return authorizer.DecisionNoOpinion, "cannot read subresource", nil
	}
	if a.Namespace == "" {
		return authorizer.DecisionNoOpinion, "can only read namespaced object of this type", nil
	}
	return z.related(node, kind, a)
}

func (z *Authorizer) get(node, kind string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Verb != "get" {
		return authorizer.DecisionNoOpinion, "can only get individual resources of this type", nil
	}
	if a.Subresource != "" {
		return authorizer.DecisionNoOpinion, "cannot get subresource", nil
	}
	return z.related(node, kind, a)
}

func (z *Authorizer) statusUpdate(node, kind string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "update", "patch":
	default:
		return authorizer.DecisionNoOpinion, "can only get/update/patch this type", nil
	}
	if a.Subresource != "status" {
		return authorizer.DecisionNoOpinion, "can only update status subresource", nil
	}
	return z.related(node, kind, a)
}

func (z *Authorizer) createToken(node string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.Verb != "create" || a.Name == "" {
		return authorizer.DecisionNoOpinion, "can only create tokens for individual service accounts", nil
	}
	if a.Subresource != "token" {
		return authorizer.DecisionNoOpinion, "can only create token subresource of serviceaccount", nil
	}
	return z.related(node, KindServiceAccount, a)
}

func (z *Authorizer) lease(node string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return authorizer.DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.Namespace != LeaseNamespace {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", LeaseNamespace), nil
	}
	// The name of a create is not known here: NodeRestriction checks it.
	if a.Verb != "create" && a.Name != node {
		return authorizer.DecisionNoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return authorizer.DecisionAllow, "", nil
}

// pod decides on pods as kube's AuthorizeNodeWithSelectors (beta, on in
// 1.32): a node reads only the pods bound to it, one by name through the
// graph or all of them through a spec.nodeName=NAME field selector, and
// may create and delete (mirror) pods, update their status and evict them,
// which NodeRestriction narrows to its own.
func (z *Authorizer) pod(node string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return z.related(node, KindPod, a)
		case "list", "watch":
			if selectsField(a, "spec.nodeName", node) {
				return authorizer.DecisionAllow, "", nil
			}
			if a.Name != "" {
				// A metadata.name field selector: one pod, if it is this
				// node's.
				return z.related(node, KindPod, a)
			}
			return authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authorizer.DecisionAllow, "", nil
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authorizer.DecisionAllow, "", nil
		}
	case "eviction":
		if a.Verb == "create" {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// nodeObject decides on Node objects as kube's AuthorizeNodeWithSelectors:
// a node reads only its own Node (by name, or listed and watched with a
// metadata.name=NAME field selector, which RequestInfo turns into the
// name), compared by name rather than through the graph so that it can
// look for its Node before creating it; writes are left to
// NodeRestriction.
func (z *Authorizer) nodeObject(node string, a *authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return authorizer.DecisionAllow, "", nil
		case "get", "list", "watch":
			switch a.Name {
			case node:
				return authorizer.DecisionAllow, "", nil
			case "":
				return authorizer.DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authorizer.DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name), nil
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// selectsField reports whether a's field selector requires field=value
// (kube counts only the = and == operators, parsed as Equals).
func selectsField(a *authorizer.Attributes, field, value string) bool {
	for _, r := range a.FieldSelector {
		if r.Field == field && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == value {
			return true
		}
	}
	return false
}
