package main

import (
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/spf13/pflag"
)

// TestTimeoutFlags: --request-timeout and --shutdown-delay-duration, with
// kube-apiserver's names and defaults (a minute, none).
func TestTimeoutFlags(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		request, delay time.Duration
	}{
		{nil, time.Minute, 0},
		{[]string{"--request-timeout=3s", "--shutdown-delay-duration=15s"}, 3 * time.Second, 15 * time.Second},
	} {
		var cfg server.Config
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		addAPIFlags(f, &cfg)
		if err := f.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.RequestTimeout != tc.request || cfg.ShutdownDelayDuration != tc.delay {
			t.Errorf("%v: RequestTimeout %v, ShutdownDelayDuration %v; want %v, %v", tc.args, cfg.RequestTimeout, cfg.ShutdownDelayDuration, tc.request, tc.delay)
		}
	}
}
