package e2e

import "testing"

// testRBAC: with RBAC on (corekube up's default, Node,RBAC), a
// ServiceAccount given a Role by kubectl can do what the Role says and no
// more (kube's Forbidden message through kubectl), cannot grant more than
// it holds, and kubectl prints RBAC objects as against kube.
func testRBAC(t *testing.T, k *kc) {
	k.ok("create", "namespace", "rb")
	k.ok("create", "serviceaccount", "bot", "-n", "rb")
	k.ok("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods", "-n", "rb")
	k.ok("create", "rolebinding", "bot-reads", "--role=pod-reader", "--serviceaccount=rb:bot", "-n", "rb")
	k.expect(lines(
		"NAME        ROLE              AGE   USERS   GROUPS   SERVICEACCOUNTS",
		"bot-reads   Role/pod-reader   0s                     rb/bot"),
		"get", "rolebinding", "-n", "rb", "-o", "wide")
	k.expect(lines(
		"NAME            ROLE                        AGE",
		"cluster-admin   ClusterRole/cluster-admin   0s"),
		"get", "clusterrolebinding", "cluster-admin")

	const bot = "--as=system:serviceaccount:rb:bot"
	k.eventually("", "get", "pods", "-n", "rb", bot)
	k.expectFail(`Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:rb:bot" cannot list resource "pods" in API group "" in the namespace "default"`,
		"get", "pods", "-n", "default", bot)
	k.expectFail(`Error from server (Forbidden): pods "x" is forbidden: User "system:serviceaccount:rb:bot" cannot delete resource "pods" in API group "" in the namespace "rb"`,
		"delete", "pod", "x", "-n", "rb", bot)
	k.expectFail(`Error from server (Forbidden): roles.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:rb:bot" cannot create resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "rb"`,
		"create", "role", "more", "--verb=delete", "--resource=pods", "-n", "rb", bot)

	// A user who may write roles but holds only pod reads: escalation is
	// refused with kube's message.
	k.ok("create", "role", "role-writer", "--verb=create", "--resource=roles.rbac.authorization.k8s.io", "-n", "rb")
	k.ok("create", "rolebinding", "bot-writes", "--role=role-writer", "--serviceaccount=rb:bot", "-n", "rb")
	k.eventually("role.rbac.authorization.k8s.io/held created", "create", "role", "held", "--verb=get", "--resource=pods", "-n", "rb", bot)
	k.expectFail(`Error from server (Forbidden): roles.rbac.authorization.k8s.io "more" is forbidden: user "system:serviceaccount:rb:bot" (groups=["system:serviceaccounts" "system:serviceaccounts:rb" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`,
		"create", "role", "more", "--verb=delete", "--resource=pods", "-n", "rb", bot)
}
