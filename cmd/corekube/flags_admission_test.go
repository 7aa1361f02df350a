package main

import (
	"slices"
	"testing"

	"github.com/corekube/corekube/server"
	"github.com/spf13/pflag"
)

// TestAdmissionFlags: kube's flag names; the plugin lists are comma
// lists (and repeatable), the configuration file a path.
func TestAdmissionFlags(t *testing.T) {
	var cfg server.Config
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addAPIFlags(f, &cfg)
	err := f.Parse([]string{"--enable-admission-plugins=NodeRestriction,PodSecurity", "--enable-admission-plugins=NamespaceLifecycle",
		"--disable-admission-plugins=DefaultTolerationSeconds", "--admission-control-config-file=/etc/admission.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"NodeRestriction", "PodSecurity", "NamespaceLifecycle"}; !slices.Equal(cfg.EnableAdmissionPlugins, want) {
		t.Errorf("enable %q, want %q", cfg.EnableAdmissionPlugins, want)
	}
	if want := []string{"DefaultTolerationSeconds"}; !slices.Equal(cfg.DisableAdmissionPlugins, want) {
		t.Errorf("disable %q, want %q", cfg.DisableAdmissionPlugins, want)
	}
	if cfg.AdmissionControlConfigFile != "/etc/admission.yaml" {
		t.Errorf("config file %q", cfg.AdmissionControlConfigFile)
	}
}
