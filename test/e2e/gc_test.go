package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestGarbageCollector: with the real kubectl against `corekube up`, the
// garbage collector removes what a deleted owner leaves: a node agent's
// Lease names its Node as owner (as the kubelet's does), a Node deleted
// once its agent is gone (KWOK's nodes, a scaled-down cluster) takes its
// Lease along, and `kubectl delete --cascade=foreground` waits for the
// owner's blocking dependents.
func TestGarbageCollector(t *testing.T) {
	bin := kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "1")
	k := p.kc(t, bin)
	k.ok("wait", "--for=condition=Ready", "node/node-1", "--timeout=30s")

	t.Run("agent lease owned by its node", func(t *testing.T) {
		k := p.kc(t, bin)
		uid := k.ok("get", "node", "node-1", "-o", "jsonpath={.metadata.uid}")
		k.eventually("v1/Node/node-1/"+uid, "get", "lease", "-n", "kube-node-lease", "node-1",
			"-o", `jsonpath={.metadata.ownerReferences[0].apiVersion}/{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}`)
	})

	t.Run("delete node removes its lease", func(t *testing.T) {
		k := p.kc(t, bin)
		// A node whose kubelet is gone, with the Lease it left.
		k.ok("apply", "-f", k.file("node.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: gone-node}\n"))
		uid := k.ok("get", "node", "gone-node", "-o", "jsonpath={.metadata.uid}")
		k.ok("apply", "-f", k.file("lease.yaml", fmt.Sprintf(`apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: gone-node
  namespace: kube-node-lease
  ownerReferences: [{apiVersion: v1, kind: Node, name: gone-node, uid: %s}]
spec: {holderIdentity: gone-node, leaseDurationSeconds: 40}
`, uid)))
		k.expect(`node "gone-node" deleted`, "delete", "node", "gone-node")
		k.eventually("", "get", "lease", "-n", "kube-node-lease", "gone-node", "--ignore-not-found", "-o", "name")
		// The live agent's Lease stays: its node exists.
		k.expect("lease.coordination.k8s.io/node-1", "get", "lease", "-n", "kube-node-lease", "node-1", "-o", "name")
	})

	t.Run("foreground delete waits for dependents", func(t *testing.T) {
		k := p.kc(t, bin)
		// Pods no node matches stay unscheduled: their delete is
		// immediate, only finalizers hold them.
		pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: %s%s}\nspec: {nodeSelector: {none: none}, containers: [{name: c, image: nginx:1.27}]}\n"
		k.ok("apply", "-f", k.file("owner.yaml", fmt.Sprintf(pod, "owner", "")))
		uid := k.ok("get", "pod", "owner", "-o", "jsonpath={.metadata.uid}")
		meta := fmt.Sprintf(", finalizers: [example.com/hold], ownerReferences: [{apiVersion: v1, kind: Pod, name: owner, uid: %s, blockOwnerDeletion: true}]", uid)
		k.ok("apply", "-f", k.file("dependent.yaml", fmt.Sprintf(pod, "dependent", meta)))

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd, stdout, stderr := k.start(ctx, "delete", "pod", "owner", "--cascade=foreground", "--timeout=50s")
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()

		// The dependent is being deleted, held by its finalizer; the
		// owner waits for it, and so does kubectl.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if ts, _, _ := k.run("get", "pod", "dependent", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the dependent has no deletionTimestamp after 30s")
			}
			time.Sleep(50 * time.Millisecond) // polling another process's state, with a deadline
		}
		k.eventually("foregroundDeletion", "get", "pod", "owner", "-o", "jsonpath={.metadata.finalizers[*]}")
		select {
		case err := <-done:
			t.Fatalf("kubectl delete --cascade=foreground returned (%v) while a blocking dependent exists:\n%s%s", err, stdout, stderr)
		default:
		}

		k.ok("patch", "pod", "dependent", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		select {
		case err := <-done:
			if err != nil || strings.TrimSpace(stdout.String()) != `pod "owner" deleted` {
				t.Errorf("kubectl delete --cascade=foreground: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
			}
		case <-ctx.Done():
			t.Fatal("kubectl delete --cascade=foreground did not return once the dependent was gone")
		}
		k.expect("", "get", "pods", "owner", "dependent", "--ignore-not-found", "-o", "name")
	})
}
