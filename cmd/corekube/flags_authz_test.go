package main

import (
	"strings"
	"testing"

	"github.com/corekube/corekube/server"
	"github.com/spf13/pflag"
)

// TestAuthorizationModeFlag: --authorization-mode defaults to Node,RBAC
// (a kubeadm cluster's), takes kube's comma list and refuses what kube
// refuses.
func TestAuthorizationModeFlag(t *testing.T) {
	parse := func(args ...string) (server.Config, error) {
		var cfg server.Config
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		addAPIFlags(f, &cfg)
		return cfg, f.Parse(args)
	}
	cfg, err := parse()
	if err != nil || strings.Join(cfg.AuthorizationModes, ",") != "Node,RBAC" {
		t.Errorf("default: %v %v", cfg.AuthorizationModes, err)
	}
	cfg, err = parse("--authorization-mode=AlwaysAllow")
	if err != nil || strings.Join(cfg.AuthorizationModes, ",") != "AlwaysAllow" {
		t.Errorf("AlwaysAllow: %v %v", cfg.AuthorizationModes, err)
	}
	cfg, err = parse("--authorization-mode=RBAC,AlwaysAllow")
	if err != nil || strings.Join(cfg.AuthorizationModes, ",") != "RBAC,AlwaysAllow" {
		t.Errorf("RBAC,AlwaysAllow: %v %v", cfg.AuthorizationModes, err)
	}
	for _, bad := range []string{"Webhook", "RBAC,RBAC", ""} {
		if _, err := parse("--authorization-mode=" + bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
