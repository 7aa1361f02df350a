package admission

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder is a plugin that records its calls in a shared log.
type recorder struct {
	name string
	log  *[]string
}

type mutatingRecorder struct{ recorder }

func (r *mutatingRecorder) Admit(context.Context, *Attributes) error {
	*r.log = append(*r.log, "admit "+r.name)
	return nil
}

type validatingRecorder struct{ recorder }

func (r *validatingRecorder) Validate(context.Context, *Attributes) error {
	*r.log = append(*r.log, "validate "+r.name)
	return nil
}

type bothRecorder struct{ recorder }

func (r *bothRecorder) Admit(context.Context, *Attributes) error {
	*r.log = append(*r.log, "admit "+r.name)
	return nil
}

func (r *bothRecorder) Validate(context.Context, *Attributes) error {
	*r.log = append(*r.log, "validate "+r.name)
	return nil
}

func testPlugins(log *[]string) *Plugins {
	var p Plugins
	p.Register(PluginNamespaceLifecycle, func([]byte) (any, error) { return &mutatingRecorder{recorder{"lifecycle", log}}, nil })
	p.Register(PluginServiceAccount, func([]byte) (any, error) { return &bothRecorder{recorder{"sa", log}}, nil })
	p.Register(PluginPodSecurity, func([]byte) (any, error) { return &validatingRecorder{recorder{"psa", log}}, nil })
	p.Register(PluginDefaultTolerationSeconds, func([]byte) (any, error) { return &mutatingRecorder{recorder{"dts", log}}, nil })
	p.Register(PluginNodeRestriction, nil)
	p.Register(PluginMutatingAdmissionWebhook, nil)
	p.Register(PluginValidatingAdmissionWebhook, nil)
	return &p
}

func TestPluginsEnabled(t *testing.T) {
	defaults := []string{PluginNamespaceLifecycle, PluginServiceAccount, PluginPodSecurity, PluginDefaultTolerationSeconds,
		PluginMutatingAdmissionWebhook, PluginValidatingAdmissionWebhook}
	tests := []struct {
		name             string
		enable, disable  []string
		want             []string
		wantErrFragments []string
	}{
		{name: "defaults, in kube's order", want: defaults},
		{name: "enable in any order", enable: []string{"NodeRestriction", "NamespaceLifecycle"},
			want: []string{PluginNamespaceLifecycle, PluginServiceAccount, PluginNodeRestriction, PluginPodSecurity, PluginDefaultTolerationSeconds,
				PluginMutatingAdmissionWebhook, PluginValidatingAdmissionWebhook}},
		{name: "disable", disable: []string{"PodSecurity", "ServiceAccount"},
			want: []string{PluginNamespaceLifecycle, PluginDefaultTolerationSeconds, PluginMutatingAdmissionWebhook, PluginValidatingAdmissionWebhook}},
		{name: "disable a kube plugin corekube lacks", disable: []string{"LimitRanger"}, want: defaults},
		{name: "unknown", enable: []string{"Foo"}, disable: []string{"Bar"},
			wantErrFragments: []string{`enable-admission-plugins plugin "Foo" is unknown`, `disable-admission-plugins plugin "Bar" is unknown`}},
		{name: "not supported", enable: []string{"LimitRanger"},
			wantErrFragments: []string{`enable-admission-plugins plugin "LimitRanger" is not supported by corekube`}},
		{name: "overlap", enable: []string{"PodSecurity", "NodeRestriction"}, disable: []string{"NodeRestriction", "PodSecurity"},
			wantErrFragments: []string{`[NodeRestriction PodSecurity] in enable-admission-plugins and disable-admission-plugins overlapped`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			got, err := testPlugins(&log).Enabled(tc.enable, tc.disable)
			if len(tc.wantErrFragments) > 0 {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				for _, f := range tc.wantErrFragments {
					if !strings.Contains(err.Error(), f) {
						t.Errorf("error %q lacks %q", err, f)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestChainOrder: every mutating plugin runs in kube's order, then every
// validating one; a plugin that is both runs in each half; reserved names
// run nothing.
func TestChainOrder(t *testing.T) {
	var log []string
	chain, names, err := testPlugins(&log).NewChain([]string{"NodeRestriction"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{PluginNamespaceLifecycle, PluginServiceAccount, PluginPodSecurity, PluginDefaultTolerationSeconds}; !slices.Equal(names, want) {
		t.Errorf("running %q, want %q", names, want)
	}
	a := &Attributes{Operation: Create}
	if err := chain.Mutate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := chain.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	want := []string{"admit lifecycle", "admit sa", "admit dts", "validate sa", "validate psa"}
	if !slices.Equal(log, want) {
		t.Errorf("calls %q, want %q", log, want)
	}
}

func TestChainFactoryErrors(t *testing.T) {
	var p Plugins
	p.Register(PluginPodSecurity, func([]byte) (any, error) { return nil, errors.New("bad config") })
	if _, _, err := p.NewChain(nil, nil, nil); err == nil || err.Error() != `admission plugin "PodSecurity": bad config` {
		t.Errorf("factory error: %v", err)
	}
	p.Register(PluginPodSecurity, func([]byte) (any, error) { return "not a plugin", nil })
	if _, _, err := p.NewChain(nil, nil, nil); err == nil || !strings.Contains(err.Error(), "neither a Mutator nor a Validator") {
		t.Errorf("non-plugin: %v", err)
	}
}

func TestRegisterUnknownNamePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering a name kube does not know did not panic")
		}
	}()
	var p Plugins
	p.Register("Mine", nil)
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("psa.yaml", "kind: PodSecurityConfiguration\n")
	path := write("admission.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
- name: Other
  path: psa.yaml
- name: Nothing
`)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.pluginConfig(PluginPodSecurity)); !strings.Contains(got, `"enforce":"baseline"`) {
		t.Errorf("inline configuration %q", got)
	}
	if got := string(cfg.pluginConfig("Other")); got != "kind: PodSecurityConfiguration\n" {
		t.Errorf("configuration from a relative path %q", got)
	}
	if got := cfg.pluginConfig("Nothing"); got != nil {
		t.Errorf("plugin without configuration got %q", got)
	}
	if cfg, err := LoadConfig(""); cfg != nil || err != nil || cfg.pluginConfig("x") != nil {
		t.Errorf("no file: %v %v", cfg, err)
	}

	for name, content := range map[string]string{
		"wrong kind":   "apiVersion: apiserver.config.k8s.io/v1\nkind: Nope\n",
		"unknown key":  "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugin: []\n",
		"missing path": "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: X\n  path: nowhere.yaml\n",
		"no name":      "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- path: psa.yaml\n",
	} {
		if _, err := LoadConfig(write("bad.yaml", content)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := LoadConfig(filepath.Join(dir, "absent.yaml")); err == nil {
		t.Error("absent file: no error")
	}
}
