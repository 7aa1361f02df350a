package main

import (
	"os"
	"path/filepath"
	"strings"
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

// TestServiceAccountFlags: kube's flag names and defaults for the
// ServiceAccount tokens (kubeadm's issuer; repeatable files and issuers).
func TestServiceAccountFlags(t *testing.T) {
	var cfg server.Config
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addAPIFlags(f, &cfg)
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ServiceAccountIssuers) != 1 || cfg.ServiceAccountIssuers[0] != "https://kubernetes.default.svc.cluster.local" ||
		!cfg.ServiceAccountExtendTokenExpiration || cfg.ServiceAccountMaxTokenExpiration != 0 || cfg.APIAudiences != nil {
		t.Errorf("defaults %+v", cfg)
	}
	cfg = server.Config{}
	f = pflag.NewFlagSet("test", pflag.ContinueOnError)
	addAPIFlags(f, &cfg)
	err := f.Parse([]string{"--service-account-key-file=a.pem", "--service-account-key-file=b.pem", "--service-account-signing-key-file=s.key",
		"--service-account-issuer=https://one", "--service-account-issuer=https://two", "--api-audiences=x,y",
		"--service-account-max-token-expiration=48h", "--service-account-jwks-uri=https://keys/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.ServiceAccountKeyFiles, ",") != "a.pem,b.pem" || cfg.ServiceAccountSigningKeyFile != "s.key" ||
		strings.Join(cfg.ServiceAccountIssuers, ",") != "https://one,https://two" || strings.Join(cfg.APIAudiences, ",") != "x,y" ||
		cfg.ServiceAccountMaxTokenExpiration != 48*time.Hour || cfg.ServiceAccountJWKSURI != "https://keys/jwks" {
		t.Errorf("parsed %+v", cfg)
	}
}

// TestUpServiceAccountKey: `up` makes <data-dir>/pki/sa.key once and uses
// it to sign and verify, unless told otherwise.
func TestUpServiceAccountKey(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir}
	if err := upServiceAccountKey(&cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pki", "sa.key")
	if cfg.ServiceAccountSigningKeyFile != path || len(cfg.ServiceAccountKeyFiles) != 1 || cfg.ServiceAccountKeyFiles[0] != path {
		t.Errorf("config %+v", cfg)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg = server.Config{DataDir: dir}
	if err := upServiceAccountKey(&cfg); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Error("the key changed on the second start")
	}
	cfg = server.Config{DataDir: t.TempDir(), ServiceAccountSigningKeyFile: path, ServiceAccountKeyFiles: []string{"old.pem", path}}
	if err := upServiceAccountKey(&cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "pki", "sa.key")); err == nil || len(cfg.ServiceAccountKeyFiles) != 2 {
		t.Errorf("given keys were not kept: %+v", cfg)
	}
}

// TestLeaderElectFlags: `scheduler` and `controllers` have kube's
// leader election flags and defaults, each with its component's lease.
func TestLeaderElectFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease string
	}{{"scheduler", "kube-scheduler"}, {"controllers", "kube-controller-manager"}} {
		cmd := newRootCommand()
		sub, _, err := cmd.Find([]string{tc.name})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"leader-elect": "true", "leader-elect-lease-duration": "15s", "leader-elect-renew-deadline": "10s",
			"leader-elect-retry-period": "2s", "leader-elect-resource-namespace": "kube-system",
			"leader-elect-resource-name": tc.lease, "leader-elect-resource-lock": "leases",
		}
		for flag, def := range want {
			f := sub.Flags().Lookup(flag)
			if f == nil {
				t.Errorf("%s: no --%s", tc.name, flag)
				continue
			}
			if f.DefValue != def {
				t.Errorf("%s --%s: default %q, want %q", tc.name, flag, f.DefValue, def)
			}
		}
	}
}
