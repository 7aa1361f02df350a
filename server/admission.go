package server

import (
	"context"
	"fmt"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/admission/webhook"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/server/audit"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
)

// admissionStores are the Stores admission plugins read, from their watch
// caches. newAPI fills them in after building the chain: plugins look
// them up only when a request comes.
type admissionStores struct {
	namespaces, serviceAccounts, pods, nodes *registry.Store
	// priorityClasses is the Priority plugin's view of the classes;
	// Start runs it.
	priorityClasses *priorityClassCache
	// webhooks is the dispatcher of both webhook plugins, made by the
	// first of their factories that runs (nil when both are disabled).
	webhooks *webhookAdmission
	// metrics are the server's admission metrics (nil: none).
	metrics *admission.Metrics
	// podLog is pods/log, told how to reach kubelets once the server has
	// its certificates (kubeletclient.go).
	podLog *pods.LogREST
}

// webhookAdmission returns the webhook plugins' shared dispatcher.
func (d *admissionStores) webhookAdmission() *webhookAdmission {
	if d.webhooks == nil {
		d.webhooks = newWebhookAdmission(func() *registry.Store { return d.namespaces }, nil, d.metrics)
	}
	return d.webhooks
}

func (d *admissionStores) namespace(ctx context.Context, name string) (*v1.Namespace, error) {
	obj, err := d.namespaces.GetCached(ctx, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Namespace), nil
}

// namespaceLive reads a namespace from etcd, not the watch cache.
func (d *admissionStores) namespaceLive(ctx context.Context, name string) (*v1.Namespace, error) {
	obj, err := d.namespaces.Get(ctx, "", name, nil)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Namespace), nil
}

func (d *admissionStores) serviceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	obj, err := d.serviceAccounts.GetCached(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ServiceAccount), nil
}

func (d *admissionStores) pod(ctx context.Context, namespace, name string) (*v1.Pod, error) {
	obj, err := d.pods.GetCached(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Pod), nil
}

func (d *admissionStores) node(ctx context.Context, name string) (*v1.Node, error) {
	obj, err := d.nodes.GetCached(ctx, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Node), nil
}

// podsIn lists a namespace's pods from the watch cache (resourceVersion
// "0": at once, possibly an instant stale, as kube's informer lister).
func (d *admissionStores) podsIn(ctx context.Context, namespace string) ([]*v1.Pod, error) {
	obj, err := d.pods.List(ctx, namespace, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	list := obj.(*v1.PodList)
	out := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// registerAdmissionPlugins names every plugin corekube has, each factory
// building it from its configuration and the server's stores. The
// reserved names (nil) are where the webhook and node authorization work
// registers their factories. A factory runs once per server, before the
// stores are filled in: it keeps them, and reads them only when requests
// come.
func registerAdmissionPlugins(p *admission.Plugins, cfg *Config, stores *admissionStores) {
	p.Register(admission.PluginNamespaceLifecycle, func([]byte) (any, error) {
		return &admission.NamespaceLifecycle{Get: stores.namespace, GetLive: stores.namespaceLive}, nil
	})
	p.Register(admission.PluginServiceAccount, func([]byte) (any, error) {
		return &admission.ServiceAccount{Get: stores.serviceAccount}, nil
	})
	p.Register(admission.PluginPodSecurity, func(config []byte) (any, error) {
		ps, err := admission.NewPodSecurity(config)
		if err != nil {
			return nil, err
		}
		ps.GetNamespace, ps.ListPods = stores.namespace, stores.podsIn
		ps.Warn, ps.Annotate = registry.AddWarning, audit.AddAnnotation
		return ps, nil
	})
	p.Register(admission.PluginPriority, func([]byte) (any, error) {
		return &admission.Priority{
			Get: func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
				return stores.priorityClasses.get(ctx, name)
			},
			Default: func(ctx context.Context) (*schedulingv1.PriorityClass, error) {
				return stores.priorityClasses.globalDefault(ctx)
			},
		}, nil
	})
	p.Register(admission.PluginDefaultTolerationSeconds, func([]byte) (any, error) {
		return &admission.DefaultTolerationSeconds{
			NotReadySeconds:    cfg.DefaultNotReadyTolerationSeconds,
			UnreachableSeconds: cfg.DefaultUnreachableTolerationSeconds,
		}, nil
	})
	p.Register(admission.PluginNodeRestriction, func([]byte) (any, error) {
		return &admission.NodeRestriction{GetPod: stores.pod, GetNode: stores.node}, nil
	})
	p.Register(admission.PluginMutatingAdmissionWebhook, func([]byte) (any, error) {
		return webhook.NewMutating(stores.webhookAdmission().dispatcher), nil
	})
	p.Register(admission.PluginValidatingAdmissionWebhook, func([]byte) (any, error) {
		return webhook.NewValidating(stores.webhookAdmission().dispatcher), nil
	})
}

// checkAdmission checks the plugin names and reads the configuration file
// without building any plugin (a plugin is built once, by newAdmission).
func checkAdmission(cfg *Config) error {
	if _, err := admission.LoadConfig(cfg.AdmissionControlConfigFile); err != nil {
		return err
	}
	var plugins admission.Plugins
	registerAdmissionPlugins(&plugins, cfg, &admissionStores{})
	if _, err := plugins.Enabled(cfg.EnableAdmissionPlugins, cfg.DisableAdmissionPlugins); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	return nil
}

// newAdmission builds the admission chain the configuration asks for
// (--enable-admission-plugins, --disable-admission-plugins,
// --admission-control-config-file).
// It returns the names of the plugins it runs, in order.
func newAdmission(cfg *Config, stores *admissionStores) (*admission.Chain, []string, error) {
	acfg, err := admission.LoadConfig(cfg.AdmissionControlConfigFile)
	if err != nil {
		return nil, nil, err
	}
	var plugins admission.Plugins
	registerAdmissionPlugins(&plugins, cfg, stores)
	chain, names, err := plugins.NewChain(cfg.EnableAdmissionPlugins, cfg.DisableAdmissionPlugins, acfg)
	if err != nil {
		return nil, nil, fmt.Errorf("admission: %w", err)
	}
	return chain, names, nil
}
