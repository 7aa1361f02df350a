package e2e

import (
	"strings"
	"testing"
	"time"
)

// testNodeIdentity: a node impersonated by kubectl
// (--as=system:node:node-1 --as-group=system:nodes) reads its own Node and
// pods (with a spec.nodeName field selector) and no others, and the Node authorizer and NodeRestriction (on by default in
// `up`) refuse it another node's objects, a non-mirror pod, the restricted
// labels and a namespace, with kube's messages.
func testNodeIdentity(t *testing.T, k *kc) {
	k.ok("create", "namespace", "ni")
	for _, p := range []struct{ name, node string }{{"on1", "node-1"}, {"on2", "node-2"}} {
		k.ok("run", p.name, "-n", "ni", "--image=nginx:1.27", `--overrides={"spec":{"nodeName":"`+p.node+`"}}`)
	}
	as := []string{"--as=system:node:node-1", "--as-group=system:nodes"}
	node := func(args ...string) []string { return append(args, as...) }

	k.expect("node/node-1", node("get", "node", "node-1", "-o", "name")...)
	// As kube's AuthorizeNodeWithSelectors: its own pods only, through a
	// spec.nodeName field selector; only its own Node.
	k.poll(20*time.Second, "the node-1 view of the pods", func(out string) bool {
		return strings.Contains(out, "pod/on1") && !strings.Contains(out, "pod/on2")
	}, node("get", "pods", "-n", "ni", "-o", "name", "--field-selector", "spec.nodeName=node-1")...)
	k.expectFail(`Error from server (Forbidden): pods is forbidden: User "system:node:node-1" cannot list resource "pods" in API group "" in the namespace "ni": can only list/watch pods with spec.nodeName field selector`,
		node("get", "pods", "-n", "ni")...)
	k.expectFail(`Error from server (Forbidden): nodes "node-2" is forbidden: User "system:node:node-1" cannot get resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object`,
		node("get", "node", "node-2")...)
	k.expectFail(`Error from server (Forbidden): nodes is forbidden: User "system:node:node-1" cannot list resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read all nodes, only its own Node object`,
		node("get", "nodes")...)

	// kubectl label and patch read the Node first, which node-1 may not
	// (NodeRestriction's refusal of the write itself is tested in
	// test/integration).
	k.expectFail(`Error from server (Forbidden): nodes "node-2" is forbidden: User "system:node:node-1" cannot get resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object`,
		node("label", "node", "node-2", "e2e=x")...)
	k.expectFail(`Error from server (Forbidden): pods "on2" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`,
		node("delete", "pod", "on2", "-n", "ni", "--wait=false")...)
	k.expectFail(`Error from server (Forbidden): pods "rogue" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`,
		node("run", "rogue", "-n", "ni", "--image=busybox", `--overrides={"spec":{"nodeName":"node-1"}}`)...)
	k.expectFail(`Error from server (Forbidden): nodes "node-1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool`,
		node("label", "node", "node-1", "node-restriction.kubernetes.io/pool=a")...)
	k.expectFail(`Error from server (Forbidden): namespaces "ni" is forbidden: User "system:node:node-1" cannot delete resource "namespaces" in API group "" in the namespace "ni"`,
		node("delete", "namespace", "ni", "--wait=false")...)
	// What is its own it may do: label itself, delete its pod.
	k.expect("node/node-1 labeled", node("label", "node", "node-1", "e2e-node-identity=yes")...)
	k.expect(`pod "on1" deleted`, node("delete", "pod", "on1", "-n", "ni", "--wait=false")...)
}
