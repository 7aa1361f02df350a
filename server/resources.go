package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/openapi"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/certificatesigningrequests"
	"github.com/corekube/corekube/registry/clusterrolebindings"
	"github.com/corekube/corekube/registry/clusterroles"
	"github.com/corekube/corekube/registry/events"
	flowcontrolregistry "github.com/corekube/corekube/registry/flowcontrol"
	"github.com/corekube/corekube/registry/leases"
	"github.com/corekube/corekube/registry/namespaces"
	"github.com/corekube/corekube/registry/nodes"
	"github.com/corekube/corekube/registry/poddisruptionbudgets"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/registry/priorityclasses"
	"github.com/corekube/corekube/registry/rolebindings"
	"github.com/corekube/corekube/registry/roles"
	"github.com/corekube/corekube/registry/serviceaccounts"
	"github.com/corekube/corekube/registry/webhookconfigurations"
	"github.com/corekube/corekube/storage"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newAPI builds the Store of every served resource, the admission chain
// and the API that serves them: the one table of what corekube serves.
// cfg supplies the resource-specific settings (event TTL, default
// tolerations); mutators run after the admission plugins' (RBAC's
// escalation check, which kube runs in its storage: after mutating
// admission, before defaulting and validation; no plugin, so it cannot be
// disabled). The admission stores it returns hold what runs in the
// background: the webhook admission (nil when both webhook plugins are
// disabled), which follows its configurations, and the Priority plugin's
// class cache.
func newAPI(st storage.Interface, opts registry.Options, cfg *Config, metrics *admission.Metrics, mutators ...admission.Mutator) (*handlers.API, *registry.Store, *admissionStores, error) {
	// Plugins read namespaces, ServiceAccounts (about one per namespace,
	// small) and pods from the watch caches (admission.go).
	stores := &admissionStores{metrics: metrics}
	chain, names, err := newAdmission(cfg, stores)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Logger.Info("admission plugins", "order", strings.Join(names, ","))
	chain.Mutators = append(chain.Mutators, mutators...)
	chain.Validators = append(chain.Validators, newCertificateAdmission(mutators))
	chain.Instrument(metrics)
	opts.Admission = chain
	store := func(s registry.Strategy) *registry.Store { return registry.NewStore(st, s, opts) }

	eventStrategy := events.NewStrategy(events.WithTTL(cfg.EventTTL))
	nsStore := store(namespaces.NewStrategy())
	podStore := registry.NewStore(st, pods.NewStrategy(), withDeletedObject(opts))
	nodeStore := store(nodes.NewStrategy())
	pdbStore := store(poddisruptionbudgets.NewStrategy())
	saStore := store(serviceaccounts.NewStrategy())
	stores.namespaces, stores.serviceAccounts, stores.pods = nsStore, saStore, podStore
	stores.nodes = nodeStore
	stores.podLog = pods.NewLogREST(podStore, nodeStore)
	pcStore := store(priorityclasses.NewStrategy())
	stores.priorityClasses = &priorityClassCache{store: pcStore, log: cfg.Logger}
	mutatingWebhooksStore := store(webhookconfigurations.NewMutatingStrategy())
	validatingWebhooksStore := store(webhookconfigurations.NewValidatingStrategy())
	csrStore := store(certificatesigningrequests.NewStrategy())
	fsStore := store(flowcontrolregistry.NewFlowSchemaStrategy())
	plStore := store(flowcontrolregistry.NewPriorityLevelStrategy())
	if w := stores.webhooks; w != nil {
		w.mutating, w.validating, w.log = mutatingWebhooksStore, validatingWebhooksStore, cfg.Logger
	}

	api := handlers.NewAPI(
		&handlers.Resource{Store: nsStore, Subresources: map[string]handlers.Subresource{
			"status":   {Store: nsStore.Subresource("status", namespaces.NewStatusStrategy())},
			"finalize": {Store: nsStore.Subresource("finalize", namespaces.NewFinalizeStrategy()), UpdateOnly: true},
		}},
		&handlers.Resource{Store: podStore, Subresources: map[string]handlers.Subresource{
			"status":   {Store: podStore.Subresource("status", pods.NewStatusStrategy())},
			"binding":  {Creater: pods.NewBindingREST(podStore)},
			"eviction": {Creater: pods.NewEvictionREST(podStore, pdbStore)},
			"log":      {Getter: stores.podLog},
			// Refused with kube's checks and answers: see pods.ConnectREST.
			"exec":        {Connecter: pods.NewExecREST(podStore)},
			"attach":      {Connecter: pods.NewAttachREST(podStore)},
			"portforward": {Connecter: pods.NewPortForwardREST(podStore)},
		}},
		&handlers.Resource{Store: nodeStore, Subresources: map[string]handlers.Subresource{
			"status": {Store: nodeStore.Subresource("status", nodes.NewStatusStrategy())},
		}},
		&handlers.Resource{Store: store(eventStrategy)},
		// The same events through events.k8s.io/v1 (same storage).
		&handlers.Resource{Store: store(events.NewV1Strategy(eventStrategy))},
		&handlers.Resource{Store: store(leases.NewStrategy())},
		&handlers.Resource{Store: saStore},
		&handlers.Resource{Store: pdbStore, Subresources: map[string]handlers.Subresource{
			"status": {Store: pdbStore.Subresource("status", poddisruptionbudgets.NewStatusStrategy())},
		}},
		&handlers.Resource{Store: store(roles.NewStrategy())},
		&handlers.Resource{Store: store(clusterroles.NewStrategy())},
		&handlers.Resource{Store: store(rolebindings.NewStrategy())},
		&handlers.Resource{Store: store(clusterrolebindings.NewStrategy())},
		&handlers.Resource{Store: mutatingWebhooksStore},
		&handlers.Resource{Store: validatingWebhooksStore},
		&handlers.Resource{Store: csrStore, Subresources: map[string]handlers.Subresource{
			"status":   {Store: csrStore.Subresource("status", certificatesigningrequests.NewStatusStrategy())},
			"approval": {Store: csrStore.Subresource("approval", certificatesigningrequests.NewApprovalStrategy())},
		}},
		&handlers.Resource{Store: pcStore},
		&handlers.Resource{Store: fsStore, Subresources: map[string]handlers.Subresource{
			"status": {Store: fsStore.Subresource("status", flowcontrolregistry.NewFlowSchemaStatusStrategy())},
		}},
		&handlers.Resource{Store: plStore, Subresources: map[string]handlers.Subresource{
			"status": {Store: plStore.Subresource("status", flowcontrolregistry.NewPriorityLevelStatusStrategy())},
		}},
	)
	api.SetAdmission(chain)
	return api, nsStore, stores, nil
}

// openAPIResources describes the served resources for the OpenAPI
// documents: types from the strategies, subresource verbs as
// handlers.Subresource serves them.
func openAPIResources(api *handlers.API) []openapi.Resource {
	var out []openapi.Resource
	for _, res := range api.Resources() {
		st := res.Store.Strategy()
		info := res.Store.Info()
		r := openapi.Resource{Info: info, Object: st.New(), List: st.NewList(), DeleteReturnsObject: res.Store.ReturnsDeletedObject()}
		for name, sub := range res.Subresources {
			s := openapi.Subresource{Name: name, Verbs: []string{"get", "patch", "update"}, Kind: info.GroupVersion().WithKind(info.Kind), Object: st.New()}
			switch {
			case sub.Creater != nil:
				s.Verbs, s.Kind, s.Object = []string{"create"}, sub.Creater.GroupVersionKind(), sub.Creater.New()
			case sub.Getter != nil:
				s.Verbs, s.Kind, s.GetOptions = []string{"get"}, sub.Getter.GroupVersionKind(), sub.Getter.NewGetOptions()
				// A Getter that streams says in what (kube's
				// rest.StorageMetadata); its answer is documented as a string.
				if p, ok := sub.Getter.(interface{ ProducesMIMETypes() []string }); ok {
					s.Produces = p.ProducesMIMETypes()
				}
			case sub.Connecter != nil:
				s.Verbs, s.Kind, s.GetOptions, s.Connect = []string{"create", "get"}, sub.Connecter.GroupVersionKind(), sub.Connecter.NewConnectOptions(), true
			case sub.UpdateOnly:
				s.Verbs = []string{"update"}
			}
			r.Subresources = append(r.Subresources, s)
		}
		out = append(out, r)
	}
	for _, c := range api.CreateOnly() {
		out = append(out, openapi.Resource{Info: c.Info, Object: c.Creater.New()})
	}
	return out
}

// systemNamespaces exist in every cluster, as in kube.
var systemNamespaces = []string{
	metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, v1.NamespaceNodeLease,
}

// ensureSystemNamespaces creates the system namespaces that do not exist.
func ensureSystemNamespaces(ctx context.Context, nsStore *registry.Store) error {
	for _, name := range systemNamespaces {
		if _, err := nsStore.Get(ctx, "", name, &metav1.GetOptions{}); err == nil {
			continue // a restart: nothing to write
		}
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := nsStore.Create(ctx, "", ns, registry.CreateOptions{FieldManager: apiserverFieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// withDeletedObject: DELETE answers the deleted object (kube does so for
// pods) rather than a Success Status.
func withDeletedObject(opts registry.Options) registry.Options {
	opts.ReturnDeletedObject = true
	return opts
}
