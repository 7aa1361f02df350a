package admission

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Names of the admission plugins corekube implements or reserves, as kube
// spells them.
const (
	PluginNamespaceLifecycle         = "NamespaceLifecycle"
	PluginServiceAccount             = "ServiceAccount"
	PluginNodeRestriction            = "NodeRestriction"
	PluginPodSecurity                = "PodSecurity"
	PluginDefaultTolerationSeconds   = "DefaultTolerationSeconds"
	PluginPriority                   = "Priority"
	PluginMutatingAdmissionWebhook   = "MutatingAdmissionWebhook"
	PluginValidatingAdmissionWebhook = "ValidatingAdmissionWebhook"
)

// AllOrderedPlugins is kube-apiserver v1.32's list of admission plugins
// in the order they run, whatever order the flags name them in. Only
// those registered with Plugins exist here; the others are names kube
// knows, which --disable-admission-plugins accepts and
// --enable-admission-plugins refuses as not supported.
var AllOrderedPlugins = []string{
	"AlwaysAdmit",
	"NamespaceAutoProvision",
	PluginNamespaceLifecycle,
	"NamespaceExists",
	"LimitPodHardAntiAffinityTopology",
	"LimitRanger",
	PluginServiceAccount,
	PluginNodeRestriction,
	"TaintNodesByCondition",
	"AlwaysPullImages",
	"ImagePolicyWebhook",
	PluginPodSecurity,
	"PodNodeSelector",
	PluginPriority,
	PluginDefaultTolerationSeconds,
	"PodTolerationRestriction",
	"EventRateLimit",
	"ExtendedResourceToleration",
	"DefaultStorageClass",
	"StorageObjectInUseProtection",
	"OwnerReferencesPermissionEnforcement",
	"PersistentVolumeClaimResize",
	"RuntimeClass",
	"CertificateApproval",
	"CertificateSigning",
	"ClusterTrustBundleAttest",
	"CertificateSubjectRestriction",
	"DefaultIngressClass",
	"DenyServiceExternalIPs",
	// Webhooks, quota and deny go last, as in kube.
	"MutatingAdmissionPolicy",
	PluginMutatingAdmissionWebhook,
	"ValidatingAdmissionPolicy",
	PluginValidatingAdmissionWebhook,
	"ResourceQuota",
	"AlwaysDeny",
}

// DefaultOnPlugins are the plugins kube-apiserver v1.32 enables without
// --enable-admission-plugins, restricted to those corekube has (kube's
// default set also holds LimitRanger, ResourceQuota and others
// whose resources corekube does not serve). NodeRestriction is off by
// default, as in kube (kubeadm turns it on).
var DefaultOnPlugins = []string{
	PluginNamespaceLifecycle,
	PluginServiceAccount,
	PluginPodSecurity,
	PluginPriority,
	PluginDefaultTolerationSeconds,
	PluginMutatingAdmissionWebhook,
	PluginValidatingAdmissionWebhook,
}

// Factory builds a plugin from its configuration: the plugin's entry of
// the admission configuration file (JSON or YAML; nil when it has none).
// What it returns must be a Mutator, a Validator or both.
type Factory func(config []byte) (any, error)

// Plugins is the set of named plugins a server can run. Factories close
// over what their plugin needs from the server (caches, clocks), so the
// registry itself knows only names.
type Plugins struct {
	factories map[string]Factory
}

// Register names a plugin. A nil factory reserves the name for a plugin
// still to be implemented (the webhooks, NodeRestriction): enabled, it
// admits everything, so that kube's default set can be named today.
// Registering a name twice replaces the factory, which is how later work
// fills a reserved name in.
func (p *Plugins) Register(name string, f Factory) {
	if !slices.Contains(AllOrderedPlugins, name) {
		// A name outside kube's order has no place in the chain.
		panic(fmt.Sprintf("admission plugin %q is not one of kube's", name))
	}
	if p.factories == nil {
		p.factories = map[string]Factory{}
	}
	p.factories[name] = f
}

// Registered returns the registered names, sorted.
func (p *Plugins) Registered() []string {
	out := make([]string, 0, len(p.factories))
	for name := range p.factories {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Enabled returns the plugins to run, in kube's order: the default set,
// plus enable, minus disable, with kube's errors for names it does not
// know and for a name in both lists. A name kube knows but corekube does
// not implement may be disabled, not enabled.
func (p *Plugins) Enabled(enable, disable []string) ([]string, error) {
	var errs []error
	check := func(flag string, names []string, mustExist bool) {
		for _, name := range names {
			switch _, ok := p.factories[name]; {
			case !slices.Contains(AllOrderedPlugins, name):
				errs = append(errs, fmt.Errorf("%s plugin %q is unknown", flag, name))
			case mustExist && !ok:
				errs = append(errs, fmt.Errorf("%s plugin %q is not supported by corekube", flag, name))
			}
		}
	}
	check("enable-admission-plugins", enable, true)
	check("disable-admission-plugins", disable, false)
	var both []string
	for _, name := range enable {
		if slices.Contains(disable, name) && !slices.Contains(both, name) {
			both = append(both, name)
		}
	}
	if len(both) > 0 {
		sort.Strings(both)
		errs = append(errs, fmt.Errorf("%v in enable-admission-plugins and disable-admission-plugins overlapped", both))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []string
	for _, name := range AllOrderedPlugins {
		on := slices.Contains(DefaultOnPlugins, name) || slices.Contains(enable, name)
		if _, ok := p.factories[name]; ok && on && !slices.Contains(disable, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// NewChain builds the chain of the enabled plugins (Enabled) with their
// configuration from cfg (nil: none). It returns the names it runs, in
// order, for the start-up log.
func (p *Plugins) NewChain(enable, disable []string, cfg *Config) (*Chain, []string, error) {
	names, err := p.Enabled(enable, disable)
	if err != nil {
		return nil, nil, err
	}
	chain := &Chain{}
	var running []string
	for _, name := range names {
		f := p.factories[name]
		if f == nil {
			continue
		}
		plugin, err := f(cfg.pluginConfig(name))
		if err != nil {
			return nil, nil, fmt.Errorf("admission plugin %q: %w", name, err)
		}
		if err := chain.add(name, plugin); err != nil {
			return nil, nil, fmt.Errorf("admission plugin %q: %w", name, err)
		}
		running = append(running, name)
	}
	return chain, running, nil
}

// pluginOperations are the operations kube's plugins handle, for those
// that handle fewer than all: the chain does not call them for the others
// (nor time them, as kube).
var pluginOperations = map[string][]Operation{
	PluginNamespaceLifecycle:       {Create, Update, Delete},
	PluginServiceAccount:           {Create},
	PluginNodeRestriction:          {Create, Update, Delete},
	PluginPodSecurity:              {Create, Update},
	PluginPriority:                 {Create, Update, Delete},
	PluginDefaultTolerationSeconds: {Create, Update},
}

// add appends plugin, named name, to the mutators, the validators or both.
func (c *Chain) add(name string, plugin any) error {
	m, isMutator := plugin.(Mutator)
	v, isValidator := plugin.(Validator)
	if !isMutator && !isValidator {
		return fmt.Errorf("%T is neither a Mutator nor a Validator", plugin)
	}
	if len(c.mutating) != len(c.Mutators) || len(c.validating) != len(c.Validators) {
		return fmt.Errorf("admission plugin %q: named plugins must come before unnamed ones", name)
	}
	info := func() *pluginInfo {
		p := &pluginInfo{labels: []string{name}}
		if ops, ok := pluginOperations[name]; ok {
			p.skips = [4]bool{true, true, true, true}
			for _, op := range ops {
				p.skips[opIndex(op)] = false
			}
		}
		return p
	}
	if isMutator {
		c.Mutators = append(c.Mutators, m)
		c.mutating = append(c.mutating, info())
	}
	if isValidator {
		c.Validators = append(c.Validators, v)
		c.validating = append(c.validating, info())
	}
	return nil
}
