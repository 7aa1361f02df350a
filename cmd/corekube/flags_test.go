package main

import (
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/spf13/pflag"
)

// TestAPIFlags: --event-ttl 0 keeps events for ever, as kube's (the
// server's Config spells that negative); the defaults are kube's.
func TestAPIFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, time.Hour},
		{[]string{"--event-ttl=30m"}, 30 * time.Minute},
		{[]string{"--event-ttl=0"}, -1},
	} {
		var cfg server.Config
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		addAPIFlags(f, &cfg)
		if err := f.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.EventTTL != tc.want {
			t.Errorf("%v: EventTTL %v, want %v", tc.args, cfg.EventTTL, tc.want)
		}
		if cfg.DefaultNotReadyTolerationSeconds != 300 || cfg.DefaultUnreachableTolerationSeconds != 300 || !cfg.Profiling {
			t.Errorf("%v: defaults %+v", tc.args, cfg)
		}
	}
}
