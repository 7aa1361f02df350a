package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// ControllerRolePrefix starts the name of every per-controller role; the
// rest of the name is the controller's ServiceAccount in kube-system, as
// kube-controller-manager runs each controller under its own account when
// --use-service-account-credentials is set.
const ControllerRolePrefix = "system:controller:"

// eventsRule is the events permission every controller role carries.
func eventsRule() rbacv1.PolicyRule {
	return rule([]string{"create", "patch", "update"}, []string{"", "events.k8s.io"}, "events")
}

// controllerRoles are kube's per-controller roles (bootstrappolicy's
// controller policy) for the controllers corekube runs. corekube's own
// controllers use loopback credentials; the roles are served so that
// clusters, tools and external controllers see the policy kube has.
func controllerRoles() []*rbacv1.ClusterRole {
	c := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return clusterRole(ControllerRolePrefix+name, nil, rules...)
	}
	certs := []string{"certificates.k8s.io"}
	return []*rbacv1.ClusterRole{
		c("clusterrole-aggregation-controller",
			// it must be able to write any rule into an aggregated role
			rule([]string{"escalate", "get", "list", "patch", "update", "watch"}, []string{"rbac.authorization.k8s.io"}, "clusterroles")),
		c("disruption-controller",
			rule(read, []string{"apps", "extensions"}, "deployments"),
			rule(read, []string{"apps", "extensions"}, "replicasets"),
			rule(read, core, "replicationcontrollers"),
			rule(read, []string{"policy"}, "poddisruptionbudgets"),
			rule(read, []string{"apps"}, "statefulsets"),
			rule([]string{"update"}, []string{"policy"}, "poddisruptionbudgets/status"),
			rule([]string{"patch", "update"}, core, "pods/status"),
			rule(get, all, "*/scale"),
			eventsRule()),
		c("namespace-controller",
			rule([]string{"delete", "get", "list", "watch"}, core, "namespaces"),
			rule([]string{"update"}, core, "namespaces/finalize", "namespaces/status"),
			rule([]string{"delete", "deletecollection", "get", "list", "watch"}, all, "*")),
		c("node-controller",
			rule([]string{"delete", "get", "list", "patch", "update", "watch"}, core, "nodes"),
			rule([]string{"patch", "update"}, core, "nodes/status"),
			rule([]string{"patch", "update"}, core, "pods/status"),
			rule([]string{"delete", "get", "list", "watch"}, core, "pods"),
			eventsRule()),
		c("pod-garbage-collector",
			rule([]string{"delete", "list", "watch"}, core, "pods"),
			rule(read, core, "nodes"),
			rule([]string{"patch"}, core, "pods/status")),
		c("service-account-controller",
			rule(create, core, "serviceaccounts"),
			eventsRule()),
		// kube's certificate controllers (approver, signers, cleaner) all
		// run under this one account.
		c("certificate-controller",
			rule([]string{"delete", "get", "list", "watch"}, certs, "certificatesigningrequests"),
			rule([]string{"update"}, certs, "certificatesigningrequests/approval", "certificatesigningrequests/status"),
			named(rule([]string{"approve"}, certs, "signers"), "kubernetes.io/kube-apiserver-client-kubelet"),
			named(rule([]string{"sign"}, certs, "signers"),
				"kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
				"kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown"),
			rule(create, []string{"authorization.k8s.io"}, "subjectaccessreviews"),
			eventsRule()),
	}
}

// controllerRoleBindings bind each controller role to its controller's
// ServiceAccount in kube-system, named as the role is.
func controllerRoleBindings() []*rbacv1.ClusterRoleBinding {
	var out []*rbacv1.ClusterRoleBinding
	for _, r := range controllerRoles() {
		sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: r.Name[len(ControllerRolePrefix):], Namespace: "kube-system"}
		out = append(out, clusterBinding(r.Name, r.Name, sa))
	}
	return out
}
