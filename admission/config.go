package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Config is the admission configuration file
// (--admission-control-config-file): an apiserver.config.k8s.io/v1
// AdmissionConfiguration whose plugins entries configure plugins by name,
// inline (configuration) or in another file (path, relative to this one).
type Config struct {
	plugins map[string][]byte
}

// admissionConfiguration is the file's schema; kube also accepts the
// older group versions below.
type admissionConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Plugins    []struct {
		Name          string          `json:"name"`
		Path          string          `json:"path"`
		Configuration json.RawMessage `json:"configuration"`
	} `json:"plugins"`
}

var admissionConfigVersions = map[string]bool{
	"apiserver.config.k8s.io/v1":       true,
	"apiserver.config.k8s.io/v1alpha1": true,
	"apiserver.k8s.io/v1alpha1":        true,
}

// LoadConfig reads the admission configuration file; "" is no
// configuration (every plugin gets nil).
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read admission configuration: %w", err)
	}
	return parseConfig(data, filepath.Dir(path))
}

// parseConfig parses an AdmissionConfiguration; dir resolves relative
// plugin paths.
func parseConfig(data []byte, dir string) (*Config, error) {
	var ac admissionConfiguration
	if err := yaml.UnmarshalStrict(data, &ac); err != nil {
		return nil, fmt.Errorf("admission configuration: %w", err)
	}
	if ac.Kind != "AdmissionConfiguration" || !admissionConfigVersions[ac.APIVersion] {
		return nil, fmt.Errorf("admission configuration: unexpected kind %q in version %q, want AdmissionConfiguration in apiserver.config.k8s.io/v1", ac.Kind, ac.APIVersion)
	}
	cfg := &Config{plugins: map[string][]byte{}}
	for _, p := range ac.Plugins {
		if p.Name == "" {
			return nil, fmt.Errorf("admission configuration: a plugins entry has no name")
		}
		inline := len(bytes.TrimSpace(p.Configuration)) > 0 && !bytes.Equal(bytes.TrimSpace(p.Configuration), []byte("null"))
		switch {
		case inline:
			cfg.plugins[p.Name] = p.Configuration
		case p.Path != "":
			path := p.Path
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("admission configuration of plugin %q: %w", p.Name, err)
			}
			cfg.plugins[p.Name] = b
		}
	}
	return cfg, nil
}

// pluginConfig returns the configuration of the named plugin, nil when
// there is none.
func (c *Config) pluginConfig(name string) []byte {
	if c == nil {
		return nil
	}
	return c.plugins[name]
}
