package rbac

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutoUpdateAnnotation on a bootstrap role or binding lets the start-up
// reconciliation add what is missing from it; "false" leaves it alone.
const AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"

// Aggregation labels of the user-facing roles.
const (
	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// rule builds a resource rule, its lists sorted as kube's rule builder
// sorts them.
func rule(verbs []string, groups []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: sorted(verbs), APIGroups: sorted(groups), Resources: sorted(resources)}
}

// urls builds a non-resource rule.
func urls(verbs []string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: sorted(verbs), NonResourceURLs: sorted(paths)}
}

func named(r rbacv1.PolicyRule, names ...string) rbacv1.PolicyRule {
	r.ResourceNames = sorted(names)
	return r
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "delete", "deletecollection", "patch", "update"}
	readWrite = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	get       = []string{"get"}
	create    = []string{"create"}
	all       = []string{"*"}
	core      = []string{""}
)

func bootstrapMeta(name string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	for k, v := range labels {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name, labels), Rules: rules}
}

func aggregated(name string, labels map[string]string, selectors ...string) *rbacv1.ClusterRole {
	r := clusterRole(name, labels)
	r.AggregationRule = &rbacv1.AggregationRule{}
	for _, s := range selectors {
		r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors,
			metav1.LabelSelector{MatchLabels: map[string]string{s: "true"}})
	}
	return r
}

// BootstrapClusterRoles is the policy kube-apiserver reconciles at start-up
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), for what corekube
// serves or is likely to: the user-facing roles (aggregated from the
// system:aggregate-to-* roles), discovery, health and version for
// everyone, the node bootstrapper, ServiceAccount issuer discovery, the
// scheduler and controller manager, and the per-controller roles
// (controller_policy.go).
func BootstrapClusterRoles() []*rbacv1.ClusterRole {
	return append([]*rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			rule(all, all, "*"),
			urls(all, "*")),
		clusterRole("system:discovery", nil,
			urls(get, "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/")),
		clusterRole("system:monitoring", nil,
			urls(get, "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*")),
		clusterRole("system:basic-user", nil,
			rule(create, []string{"authentication.k8s.io"}, "selfsubjectreviews"),
			rule(create, []string{"authorization.k8s.io"}, "selfsubjectaccessreviews", "selfsubjectrulesreviews")),
		clusterRole("system:public-info-viewer", nil,
			urls(get, "/healthz", "/livez", "/readyz", "/version", "/version/")),

		aggregated("admin", nil, aggregateToAdmin),
		aggregated("edit", map[string]string{aggregateToAdmin: "true"}, aggregateToEdit),
		aggregated("view", map[string]string{aggregateToEdit: "true"}, aggregateToView),
		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"},
			rule(create, []string{"authorization.k8s.io"}, "localsubjectaccessreviews"),
			rule(readWrite, []string{"rbac.authorization.k8s.io"}, "rolebindings", "roles")),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"},
			rule(read, core, "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"),
			rule([]string{"impersonate"}, core, "serviceaccounts"),
			rule(write, core, "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
			rule(create, core, "pods/eviction"),
			rule(write, core, "configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
				"replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
			rule(create, core, "serviceaccounts/token"),
			rule(write, []string{"apps"}, "daemonsets", "deployments", "deployments/rollback", "deployments/scale",
				"replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"),
			rule(write, []string{"autoscaling"}, "horizontalpodautoscalers"),
			rule(write, []string{"batch"}, "cronjobs", "jobs"),
			rule(write, []string{"extensions"}, "daemonsets", "deployments", "deployments/rollback", "deployments/scale",
				"ingresses", "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"),
			rule(write, []string{"policy"}, "poddisruptionbudgets"),
			rule(write, []string{"networking.k8s.io"}, "ingresses", "networkpolicies")),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToView: "true"},
			rule(read, core, "configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
				"replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"),
			rule(read, core, "bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
				"replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
			rule(read, core, "namespaces"),
			rule(read, []string{"discovery.k8s.io"}, "endpointslices"),
			rule(read, []string{"apps"}, "controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
				"deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status",
				"statefulsets", "statefulsets/scale", "statefulsets/status"),
			rule(read, []string{"autoscaling"}, "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(read, []string{"batch"}, "cronjobs", "cronjobs/status", "jobs", "jobs/status"),
			rule(read, []string{"extensions"}, "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
				"deployments/status", "ingresses", "ingresses/status", "networkpolicies", "replicasets",
				"replicasets/scale", "replicasets/status", "replicationcontrollers/scale"),
			rule(read, []string{"policy"}, "poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(read, []string{"networking.k8s.io"}, "ingresses", "ingresses/status", "networkpolicies")),

		// system:node is bound to no one, as in kube since 1.8: nodes get
		// its rules from the Node authorizer.
		clusterRole("system:node", nil, NodeRules()...),
		clusterRole("system:node-bootstrapper", nil,
			rule([]string{"create", "get", "list", "watch"}, []string{"certificates.k8s.io"}, "certificatesigningrequests")),
		// The roles of TLS bootstrapping: who may have a client certificate
		// for a node issued without a human's approval (the controllers'
		// approver asks for create on these subresources, which exist only
		// as names in rules), and who may approve per signer.
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient", nil,
			rule(create, []string{"certificates.k8s.io"}, "certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nil,
			rule(create, []string{"certificates.k8s.io"}, "certificatesigningrequests/selfnodeclient")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-approver", nil,
			named(rule([]string{"approve"}, []string{"certificates.k8s.io"}, "signers"), "kubernetes.io/kube-apiserver-client")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", nil,
			named(rule([]string{"approve"}, []string{"certificates.k8s.io"}, "signers"), "kubernetes.io/kube-apiserver-client-kubelet")),
		clusterRole("system:service-account-issuer-discovery", nil,
			urls(get, "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
		clusterRole("system:kube-scheduler", nil,
			rule([]string{"create", "patch", "update"}, []string{"", "events.k8s.io"}, "events"),
			rule(create, []string{"coordination.k8s.io"}, "leases"),
			named(rule([]string{"get", "update"}, []string{"coordination.k8s.io"}, "leases"), "kube-scheduler"),
			rule(read, core, "nodes"),
			rule([]string{"delete", "get", "list", "watch"}, core, "pods"),
			rule(create, core, "bindings", "pods/binding"),
			rule([]string{"patch", "update"}, core, "pods/status"),
			rule(read, core, "replicationcontrollers", "services", "namespaces", "persistentvolumeclaims", "persistentvolumes"),
			rule(read, []string{"apps", "extensions"}, "replicasets"),
			rule(read, []string{"apps"}, "statefulsets"),
			rule(read, []string{"policy"}, "poddisruptionbudgets"),
			rule(read, []string{"storage.k8s.io"}, "storageclasses", "csinodes", "csidrivers", "csistoragecapacities"),
			rule(create, []string{"authentication.k8s.io"}, "tokenreviews"),
			rule(create, []string{"authorization.k8s.io"}, "subjectaccessreviews")),
		clusterRole("system:kube-controller-manager", nil,
			rule([]string{"create", "patch", "update"}, []string{"", "events.k8s.io"}, "events"),
			rule(create, []string{"coordination.k8s.io"}, "leases"),
			named(rule([]string{"get", "update"}, []string{"coordination.k8s.io"}, "leases"), "kube-controller-manager"),
			rule(create, core, "secrets", "serviceaccounts"),
			rule([]string{"delete"}, core, "secrets"),
			rule(get, core, "configmaps", "namespaces", "secrets", "serviceaccounts"),
			rule([]string{"update"}, core, "secrets", "serviceaccounts"),
			rule(create, []string{"authentication.k8s.io"}, "tokenreviews"),
			rule(create, []string{"authorization.k8s.io"}, "subjectaccessreviews"),
			rule([]string{"list", "watch"}, all, "*"),
			rule(create, core, "serviceaccounts/token")),
		// The scheduler's volume binding, bound to it beside its own role.
		clusterRole("system:volume-scheduler", nil,
			rule([]string{"get", "list", "patch", "update", "watch"}, core, "persistentvolumes"),
			rule(read, []string{"storage.k8s.io"}, "storageclasses"),
			rule([]string{"get", "list", "patch", "update", "watch"}, core, "persistentvolumeclaims")),
	}, controllerRoles()...)
}

// BootstrappersGroup is the group of bootstrap identities (kube's
// bootstrap tokens are in it).
const BootstrappersGroup = "system:bootstrappers"

func clusterBinding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: bootstrapMeta(name, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// BootstrapClusterRoleBindings are kube's default bindings for the roles
// above.
func BootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	return append([]*rbacv1.ClusterRoleBinding{
		clusterBinding("cluster-admin", "cluster-admin", group("system:masters")),
		clusterBinding("system:discovery", "system:discovery", group("system:authenticated")),
		clusterBinding("system:basic-user", "system:basic-user", group("system:authenticated")),
		clusterBinding("system:public-info-viewer", "system:public-info-viewer", group("system:authenticated"), group("system:unauthenticated")),
		clusterBinding("system:monitoring", "system:monitoring", group("system:monitoring")),
		clusterBinding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery", group("system:serviceaccounts")),
		clusterBinding("system:kube-scheduler", "system:kube-scheduler", userSubject("system:kube-scheduler")),
		clusterBinding("system:kube-controller-manager", "system:kube-controller-manager", userSubject("system:kube-controller-manager")),
		clusterBinding("system:volume-scheduler", "system:volume-scheduler", userSubject("system:kube-scheduler")),
		// TLS bootstrapping, as kubeadm binds it (kube has no default
		// binding): bootstrap identities (group system:bootstrappers; kube's
		// bootstrap tokens, here a --token-auth-file entry) may create CSRs
		// and have node client certificates approved; nodes may have theirs
		// renewed.
		clusterBinding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", group(BootstrappersGroup)),
		clusterBinding("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group(BootstrappersGroup)),
		clusterBinding("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group("system:nodes")),
	}, controllerRoleBindings()...)
}
