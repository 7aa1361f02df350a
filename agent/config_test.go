package agent

import "testing"

// TestWorkersScaleWithNodes: an agent's node and pod workers grow with
// its nodes (a lease renewal, a status write or a final delete holds a
// worker for a round trip to the API server, and 1,000 nodes do not fit
// in a fixed few at the latencies of a loaded cluster); an explicit count
// is kept.
func TestWorkersScaleWithNodes(t *testing.T) {
	for _, c := range []struct {
		what       string
		nodes, set int
		want       int
	}{
		{what: "node", nodes: 1, want: 8},
		{what: "node", nodes: 160, want: 8},
		{what: "node", nodes: 161, want: 9},
		{what: "node", nodes: 1000, want: 50},
		{what: "node", nodes: 1000, set: 8, want: 8},
		{what: "pod", nodes: 1, want: 16},
		{what: "pod", nodes: 320, want: 16},
		{what: "pod", nodes: 321, want: 17},
		{what: "pod", nodes: 1000, want: 50},
		{what: "pod", nodes: 1000, set: 16, want: 16},
	} {
		field := func(cfg *Config) *int { return &cfg.NodeWorkers }
		if c.what == "pod" {
			field = func(cfg *Config) *int { return &cfg.PodWorkers }
		}
		in := Config{Nodes: c.nodes}
		*field(&in) = c.set
		cfg, err := in.complete()
		if err != nil {
			t.Fatalf("%d nodes: %v", c.nodes, err)
		}
		if got := *field(&cfg); got != c.want {
			t.Errorf("%d nodes, --%s-workers=%d: %d workers, want %d", c.nodes, c.what, c.set, got, c.want)
		}
	}
}
