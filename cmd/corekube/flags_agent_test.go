package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestAgentTopologyFlags: --node-zones and --node-region reach the agent
// configuration, and values that cannot be label values are refused.
func TestAgentTopologyFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		zones   []string
		region  string
		wantErr bool
	}{
		{args: nil},
		{args: []string{"--node-zones=a, b,c", "--node-region=r"}, zones: []string{"a", "b", "c"}, region: "r"},
		{args: []string{"--node-zones=a,,b"}, wantErr: true},
		{args: []string{"--node-zones=bad zone"}, wantErr: true},
		{args: []string{"--node-region=-r"}, wantErr: true},
	} {
		var o agentOptions
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.addFlags(f)
		if err := f.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := o.config()
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: err = %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && (!slices.Equal(cfg.Zones, tc.zones) || cfg.Region != tc.region) {
			t.Errorf("%v: zones %q region %q, want %q %q", tc.args, cfg.Zones, cfg.Region, tc.zones, tc.region)
		}
	}
}
