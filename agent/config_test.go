package agent

import "testing"

// TestNodeWorkersScaleWithNodes: an agent's node workers grow with its
// nodes (lease renewals of 1,000 nodes do not fit in 8 workers at the
// API server latencies of a loaded cluster); an explicit count is kept.
func TestNodeWorkersScaleWithNodes(t *testing.T) {
	for _, c := range []struct{ nodes, set, want int }{
		{nodes: 1, want: 8},
		{nodes: 160, want: 8},
		{nodes: 161, want: 9},
		{nodes: 1000, want: 50},
		{nodes: 1000, set: 8, want: 8},
	} {
		cfg, err := Config{Nodes: c.nodes, NodeWorkers: c.set}.complete()
		if err != nil {
			t.Fatalf("%d nodes: %v", c.nodes, err)
		}
		if cfg.NodeWorkers != c.want {
			t.Errorf("%d nodes, --node-workers=%d: %d workers, want %d", c.nodes, c.set, cfg.NodeWorkers, c.want)
		}
	}
}

// TestPodWorkersScaleWithNodes: an agent's pod workers grow with its
// nodes (a sync that writes holds a worker for a round trip to the API
// server); an explicit count is kept.
func TestPodWorkersScaleWithNodes(t *testing.T) {
	for _, c := range []struct{ nodes, set, want int }{
		{nodes: 1, want: 16},
		{nodes: 160, want: 16},
		{nodes: 161, want: 17},
		{nodes: 1000, want: 100},
		{nodes: 1000, set: 16, want: 16},
	} {
		cfg, err := Config{Nodes: c.nodes, PodWorkers: c.set}.complete()
		if err != nil {
			t.Fatalf("%d nodes: %v", c.nodes, err)
		}
		if cfg.PodWorkers != c.want {
			t.Errorf("%d nodes, --pod-workers=%d: %d workers, want %d", c.nodes, c.set, cfg.PodWorkers, c.want)
		}
	}
}
