package main

import (
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

// TestEvictionFlags: the kubelet's eviction flags, defaults and the
// kubelet's refusals of bad thresholds, which stop the agent at start.
func TestEvictionFlags(t *testing.T) {
	parse := func(args ...string) agent.Config {
		t.Helper()
		var o agentOptions
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.addFlags(f)
		if err := f.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		cfg, err := o.config()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return cfg
	}
	cfg := parse()
	if cfg.EvictionHard != agent.DefaultEvictionHard || cfg.EvictionSoft != "" ||
		cfg.EvictionPressureTransitionPeriod != 5*time.Minute || cfg.EvictionMaxPodGracePeriod != 0 {
		t.Errorf("defaults: hard %q soft %q transition %v max grace %d", cfg.EvictionHard, cfg.EvictionSoft,
			cfg.EvictionPressureTransitionPeriod, cfg.EvictionMaxPodGracePeriod)
	}
	cfg = parse("--eviction-hard=memory.available<1Gi", "--eviction-soft=memory.available<2Gi",
		"--eviction-soft-grace-period=memory.available=1m30s", "--eviction-pressure-transition-period=30s",
		"--eviction-max-pod-grace-period=20", "--eviction-minimum-reclaim=memory.available=500Mi")
	if cfg.EvictionHard != "memory.available<1Gi" || cfg.EvictionSoft != "memory.available<2Gi" ||
		cfg.EvictionSoftGracePeriod != "memory.available=1m30s" || cfg.EvictionPressureTransitionPeriod != 30*time.Second ||
		cfg.EvictionMaxPodGracePeriod != 20 || cfg.EvictionMinimumReclaim != "memory.available=500Mi" {
		t.Errorf("set: %+v", cfg)
	}
	if _, err := agent.New(&rest.Config{Host: "https://127.0.0.1:1"}, cfg); err != nil {
		t.Errorf("valid thresholds refused: %v", err)
	}
	bad := parse("--eviction-soft=memory.available<2Gi")
	if _, err := agent.New(&rest.Config{Host: "https://127.0.0.1:1"}, bad); err == nil ||
		!strings.Contains(err.Error(), "grace period must be specified for the soft eviction threshold memory.available") {
		t.Errorf("soft threshold without a grace period: %v", err)
	}
}
