package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// TestAgentNodeIdentities: with a client certificate per node, under the
// Node authorizer and NodeRestriction, the nodes register, keep their
// Leases, run a pod with a ServiceAccount token (requested as the node,
// reachable through the graph) and finish its deletion; a node given
// another node's identity cannot register.
func TestAgentNodeIdentities(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemoryWith(t, func(c *server.Config) {
		c.EnableAdmissionPlugins = append(c.EnableAdmissionPlugins, "NodeRestriction")
	})
	e := &env{t: t, client: s.Client, restConfig: s.Config}
	identity := func(name string) (*rest.Config, error) {
		as := name
		if name == "node-3" {
			as = "node-1" // misconfigured: node-3 acts as node-1
		}
		pair, err := testserver.IssueClient("system:node:"+as, "system:nodes")
		if err != nil {
			return nil, err
		}
		c := rest.CopyConfig(s.Config)
		c.BearerToken, c.CertData, c.KeyData = "", pair.CertPEM, pair.KeyPEM
		return c, nil
	}
	cfg := fastConfig(3)
	cfg.NodeConfig = identity
	t.Cleanup(e.startAgent(s.Config, cfg))
	e.waitNodeReady("node-1")
	e.waitNodeReady("node-2")
	ctx := context.Background()
	e.poll(10*time.Second, "node-2's lease", func(ctx context.Context) (bool, error) {
		_, err := e.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node-2", metav1.GetOptions{})
		return err == nil, err
	})

	pod := simplePod("with-token", v1.RestartPolicyAlways)
	created := e.runPod(pod, "node-2")
	running := e.waitPod(pod, 20*time.Second, "Running", phaseIs(v1.PodRunning))
	hasToken := false
	for _, v := range running.Spec.Volumes {
		hasToken = hasToken || v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-")
	}
	if !hasToken {
		t.Errorf("the pod has no ServiceAccount token volume: the test proves nothing about tokens")
	}
	if err := e.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.poll(20*time.Second, "the pod gone", func(ctx context.Context) (bool, error) {
		p, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil && p.UID != created.UID {
			return true, nil
		}
		return false, err
	})

	// node-3, acting as node-1, is refused its Node.
	if _, err := e.client.CoreV1().Nodes().Get(ctx, "node-3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node-3 registered under node-1's identity: %v", err)
	}
}
