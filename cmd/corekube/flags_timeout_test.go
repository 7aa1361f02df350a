package main

import (
	"io"
	"strings"
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

// TestTimeoutFlagsNegative: negative values are refused, with kube's
// message.
func TestTimeoutFlagsNegative(t *testing.T) {
	for _, flag := range []string{"--request-timeout", "--shutdown-delay-duration"} {
		var cfg server.Config
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f.SetOutput(io.Discard)
		addAPIFlags(f, &cfg)
		err := f.Parse([]string{flag + "=-1s"})
		if err == nil || !strings.Contains(err.Error(), flag+" can not be negative value") {
			t.Errorf("%s=-1s: %v, want kube's refusal", flag, err)
		}
	}
}
