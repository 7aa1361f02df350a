package rbac

import rbacv1 "k8s.io/api/rbac/v1"

// NodeRules are the rules of the system:node ClusterRole, as kube v1.32's
// bootstrap policy has them: what a kubelet needs (its Node and status,
// reading pods and services, pod status, mirror pods, evictions, events,
// leases, CSRs, token and access reviews, ServiceAccount tokens). The Node
// authorizer grants them to system:node:NAME users, narrowing the
// objects reached through its graph; NodeRestriction narrows the writes.
func NodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(create, []string{"authentication.k8s.io"}, "tokenreviews"),
		rule(create, []string{"authorization.k8s.io"}, "localsubjectaccessreviews", "subjectaccessreviews"),
		rule(read, core, "services"),
		rule([]string{"create", "get", "list", "watch"}, core, "nodes"),
		rule([]string{"patch", "update"}, core, "nodes/status"),
		rule([]string{"patch", "update"}, core, "nodes"),
		rule([]string{"create", "patch", "update"}, core, "events"),
		rule(read, core, "pods"),
		rule([]string{"create", "delete"}, core, "pods"),
		rule([]string{"patch", "update"}, core, "pods/status"),
		rule(create, core, "pods/eviction"),
		rule(read, core, "configmaps", "secrets"),
		rule(get, core, "persistentvolumeclaims", "persistentvolumes"),
		rule(get, core, "endpoints"),
		rule([]string{"create", "get", "list", "watch"}, []string{"certificates.k8s.io"}, "certificatesigningrequests"),
		rule([]string{"create", "delete", "get", "patch", "update"}, []string{"coordination.k8s.io"}, "leases"),
		rule(get, []string{"storage.k8s.io"}, "volumeattachments"),
		rule(create, core, "serviceaccounts/token"),
		rule([]string{"get", "patch", "update"}, core, "persistentvolumeclaims/status"),
		rule(read, []string{"storage.k8s.io"}, "csidrivers"),
		rule([]string{"create", "delete", "get", "patch", "update"}, []string{"storage.k8s.io"}, "csinodes"),
		rule(read, []string{"node.k8s.io"}, "runtimeclasses"),
	}
}
