package main

import (
	"testing"

	"github.com/corekube/corekube/server"
	"github.com/spf13/pflag"
)

// TestTokenAuthFlags: kube's --token-auth-file and --authentication-config
// reach the server's Config.
func TestTokenAuthFlags(t *testing.T) {
	var cfg server.Config
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addAPIFlags(f, &cfg)
	if err := f.Parse([]string{"--token-auth-file=/etc/tokens.csv", "--authentication-config=/etc/authn.yaml"}); err != nil {
		t.Fatal(err)
	}
	if cfg.TokenAuthFile != "/etc/tokens.csv" || cfg.AuthenticationConfigFile != "/etc/authn.yaml" {
		t.Errorf("config %q, %q", cfg.TokenAuthFile, cfg.AuthenticationConfigFile)
	}
}
