package agent

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestProcessesKeepOwnPods: two agent processes share a cluster's nodes
// (--first-node); each one's pod cache and node cache hold its own nodes'
// objects only, not the cluster's, while both run their pods.
func TestProcessesKeepOwnPods(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	first := &env{t: t, client: s.Client, restConfig: s.Config}
	t.Cleanup(first.startAgent(s.Config, fastConfig(2)))
	second := &env{t: t, client: s.Client, restConfig: s.Config}
	cfg := fastConfig(2)
	cfg.FirstNode = 3
	t.Cleanup(second.startAgent(s.Config, cfg))
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4"} {
		first.waitNodeReady(n)
	}
	pods := map[string]string{"on-1": "node-1", "on-2": "node-2", "on-3": "node-3", "on-4": "node-4"}
	for name, node := range pods {
		pod := simplePod(name, v1.RestartPolicyAlways, "sh", "-c", "sleep 3600")
		first.runPod(pod, node)
	}
	for name, node := range pods {
		pod := simplePod(name, v1.RestartPolicyAlways)
		pod.Namespace = "default"
		got := first.waitPod(pod, 20*time.Second, "Running", phaseIs(v1.PodRunning))
		if got.Spec.NodeName != node {
			t.Errorf("pod %s on %s, want %s", name, got.Spec.NodeName, node)
		}
	}
	for _, c := range []struct {
		e     *env
		pods  []string
		nodes []string
	}{
		{first, []string{"on-1", "on-2"}, []string{"node-1", "node-2"}},
		{second, []string{"on-3", "on-4"}, []string{"node-3", "node-4"}},
	} {
		a := c.e.agent
		// The informer's cache as the pods' watch events leave it: poll, as
		// the last Running status may still be on its way.
		c.e.poll(10*time.Second, "the pod cache", func(context.Context) (bool, error) {
			return len(a.podStore.ListKeys()) == len(c.pods), nil
		})
		var got []string
		for _, obj := range a.podStore.List() {
			got = append(got, obj.(*v1.Pod).Name)
		}
		sort.Strings(got)
		if len(got) != 2 || got[0] != c.pods[0] || got[1] != c.pods[1] {
			t.Errorf("agent of %v caches pods %v, want %v", c.nodes, got, c.pods)
		}
		nodes, err := a.nodeLister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, n := range nodes {
			got = append(got, n.Name)
		}
		sort.Strings(got)
		if len(got) != 2 || got[0] != c.nodes[0] || got[1] != c.nodes[1] {
			t.Errorf("agent of %v caches nodes %v", c.nodes, got)
		}
	}
}
