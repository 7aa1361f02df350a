package main

import (
	"testing"

	"github.com/corekube/corekube/server"
	"github.com/spf13/pflag"
)

// TestFlowControlFlags: kube's --max-requests-inflight and
// --max-mutating-requests-inflight, default 400 and 200.
func TestFlowControlFlags(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		readOnly, mutating int
	}{
		{nil, 400, 200},
		{[]string{"--max-requests-inflight=10", "--max-mutating-requests-inflight=5"}, 10, 5},
	} {
		var cfg server.Config
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		addAPIFlags(f, &cfg)
		if err := f.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.MaxRequestsInflight != tc.readOnly || cfg.MaxMutatingRequestsInflight != tc.mutating {
			t.Errorf("%v: %d and %d, want %d and %d", tc.args, cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight, tc.readOnly, tc.mutating)
		}
	}
}
