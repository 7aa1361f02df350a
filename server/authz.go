package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/authorizer/node"
	"github.com/corekube/corekube/auth/authorizer/rbac"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/server/audit"
	"github.com/corekube/corekube/storage/trace"
)

// DefaultAuthorizationModes is --authorization-mode's default, a kubeadm
// cluster's.
var DefaultAuthorizationModes = []string{authorizer.ModeNode, authorizer.ModeRBAC}

// authorization is the server's authorization: the authorizer every
// request goes through, and RBAC's state when RBAC is on.
type authorization struct {
	authz authorizer.Authorizer
	// rbac is nil unless RBAC is a mode.
	rbac       *rbac.Authorizer
	cache      *rbac.Cache
	escalation *rbac.EscalationCheck
	// stores are the RBAC resources' Stores, by resource.
	stores map[string]*registry.Store
	// nodeGraph ties nodes to their pods' objects; nil unless the Node
	// mode is on.
	nodeGraph *node.Graph
}

// privilegedContext is ctx acting as the server itself (system:masters),
// for its own writes that admission checks (the bootstrap policy, the
// aggregation controller).
func (s *Server) privilegedContext(ctx context.Context) context.Context {
	return user.WithUser(ctx, &user.Info{Name: user.APIServer, UID: s.loopbackUID, Groups: []string{user.SystemPrivilegedGroup}})
}

// rbacStores finds the RBAC resources' Stores among api's.
func rbacStores(api *handlers.API) map[string]*registry.Store {
	out := map[string]*registry.Store{}
	for _, r := range api.Resources() {
		if info := r.Store.Info(); info.Group == rbacv1.GroupName {
			out[info.Resource] = r.Store
		}
	}
	return out
}

var rbacKinds = map[string]string{
	"roles":               rbac.KindRole,
	"clusterroles":        rbac.KindClusterRole,
	"rolebindings":        rbac.KindRoleBinding,
	"clusterrolebindings": rbac.KindClusterRoleBinding,
}

// setupAuthorization builds the authorizer of the configured modes
// (system:masters first, always), and for RBAC: the cache fed by the RBAC
// resources' watches, the bootstrap policy reconciled, the aggregation
// controller; it returns once the cache holds the current policy, so that
// the first requests are decided on it.
func (s *Server) setupAuthorization(ctx context.Context, api *handlers.API) error {
	modes := s.cfg.AuthorizationModes
	if len(modes) == 0 {
		modes = DefaultAuthorizationModes
	}
	a := s.authorization
	a.stores = rbacStores(api)
	// The cache is kept in every mode: escalation checks read what RBAC
	// grants a user even when RBAC does not authorize requests.
	a.cache = rbac.NewCache()
	union := authorizer.Union{authorizer.Privileged}
	for _, m := range modes {
		switch m {
		case authorizer.ModeAlwaysAllow:
			union = append(union, s.authMetrics.instrumented(m, authorizer.AlwaysAllow))
		case authorizer.ModeAlwaysDeny:
			union = append(union, s.authMetrics.instrumented(m, authorizer.AlwaysDeny))
		case authorizer.ModeNode:
			// The Node authorizer, its graph fed by the pods' watch
			// (started below with the RBAC caches).
			a.nodeGraph = node.NewGraph()
			union = append(union, s.authMetrics.instrumented(m, node.New(a.nodeGraph)))
		case authorizer.ModeRBAC:
			if a.rbac == nil {
				a.rbac = rbac.New(a.cache)
				union = append(union, s.authMetrics.instrumented(m, a.rbac))
			}
		default:
			return fmt.Errorf("unknown authorization mode %q", m)
		}
	}
	a.authz = union
	// Escalation checks apply in every mode, as kube's RBAC storage: what
	// a user holds is what RBAC grants them, and escalate/bind are asked
	// of the whole authorizer (AlwaysAllow grants them).
	a.escalation.Authorizer = union
	a.escalation.Rules = rbac.New(a.cache)

	// The aggregation controller runs on every ClusterRole change, from
	// the first (set before the watches start, so that none is missed).
	trigger := make(chan struct{}, 1)
	kick := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	a.cache.OnClusterRoleChange(kick)

	watchCtx, cancel := context.WithCancel(context.Background())
	stopCaches := s.stopCaches
	s.stopCaches = func() { cancel(); stopCaches() }
	for resource, kind := range rbacKinds {
		st := a.stores[resource]
		s.caches.Add(1)
		go func() {
			defer s.caches.Done()
			s.feedRBAC(watchCtx, st, kind, a.cache)
		}()
	}
	if a.nodeGraph != nil {
		s.startNodeGraph(watchCtx, podStore(api), a.nodeGraph)
	}
	written, err := s.reconcileBootstrapPolicy(ctx)
	if err != nil {
		return err
	}
	kick()
	s.caches.Add(1)
	go func() {
		defer s.caches.Done()
		s.aggregateClusterRoles(watchCtx, trigger)
	}()
	// Synced, and holding the bootstrap policy as just reconciled (the
	// watch delivers it a little after the writes): until then, requests
	// of anyone but system:masters could be refused.
	holds := func() bool {
		for k, rv := range written {
			if !a.cache.HasVersion(k[0], k[1], rv) {
				return false
			}
		}
		return true
	}
	for !a.cache.Synced() || !holds() || (a.nodeGraph != nil && !a.nodeGraph.Synced()) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the RBAC caches: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// feedRBAC keeps cache current with one RBAC resource through the
// server's own watch cache (no etcd read per decision): the initial state
// as one Replace, then each change; a cut watch starts over.
func (s *Server) feedRBAC(ctx context.Context, st *registry.Store, kind string, cache *rbac.Cache) {
	for ctx.Err() == nil {
		w, err := st.Watch(ctx, "", &metainternalversion.ListOptions{AllowWatchBookmarks: true})
		if err != nil {
			s.log.Error("watch for the RBAC cache", "resource", st.Info().Resource, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		initial := map[string]runtime.Object{}
		synced := false
		for {
			ev, ok := w.Next()
			if !ok {
				break
			}
			if ev.Type == apiwatch.Bookmark {
				if m, err := metaOf(ev.Object); err == nil && !synced && m.GetAnnotations()["k8s.io/initial-events-end"] == "true" {
					objs := make([]runtime.Object, 0, len(initial))
					for _, o := range initial {
						objs = append(objs, o)
					}
					cache.Replace(kind, objs)
					synced, initial = true, nil
				}
				continue
			}
			if ev.Type == apiwatch.Error {
				break
			}
			obj, err := ev.Decoded()
			if err != nil {
				s.log.Error("decode for the RBAC cache", "resource", st.Info().Resource, "err", err)
				continue
			}
			switch {
			case !synced:
				m, _ := metaOf(obj)
				key := m.GetNamespace() + "/" + m.GetName()
				if ev.Type == apiwatch.Deleted {
					delete(initial, key)
				} else {
					initial[key] = obj
				}
			case ev.Type == apiwatch.Deleted:
				cache.Delete(obj)
			default:
				cache.Upsert(obj)
			}
		}
		w.Stop()
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	if obj == nil {
		return nil, errors.New("no object")
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// reconcileBootstrapPolicy creates the bootstrap ClusterRoles and
// ClusterRoleBindings that are missing and adds to the existing ones what
// they lack (unless annotated autoupdate "false"), as kube-apiserver's
// start-up hook.
//
// It returns the resourceVersion of each (kind, name) as reconciled, for
// the wait for the RBAC cache to hold it.
func (s *Server) reconcileBootstrapPolicy(ctx context.Context) (map[[2]string]string, error) {
	ctx = s.privilegedContext(ctx)
	written := map[[2]string]string{}
	roles, bindings := s.authorization.stores["clusterroles"], s.authorization.stores["clusterrolebindings"]
	for _, want := range rbac.BootstrapClusterRoles() {
		rv, err := s.reconcileOne(ctx, roles, want.Name, want, func(cur runtime.Object) (runtime.Object, bool, bool) {
			out, changed := rbac.ReconcileClusterRole(cur.(*rbacv1.ClusterRole), want)
			return out, changed, false
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile clusterrole %s: %w", want.Name, err)
		}
		written[[2]string{rbac.KindClusterRole, want.Name}] = rv
	}
	for _, want := range rbac.BootstrapClusterRoleBindings() {
		rv, err := s.reconcileOne(ctx, bindings, want.Name, want, func(cur runtime.Object) (runtime.Object, bool, bool) {
			return rbac.ReconcileClusterRoleBinding(cur.(*rbacv1.ClusterRoleBinding), want)
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile clusterrolebinding %s: %w", want.Name, err)
		}
		written[[2]string{rbac.KindClusterRoleBinding, want.Name}] = rv
	}
	return written, nil
}

// reconcileOne creates want when name is missing, or updates it with what
// merge computes (recreating it when merge says so), retrying conflicts.
// It returns the resourceVersion the object has now.
func (s *Server) reconcileOne(ctx context.Context, st *registry.Store, name string, want runtime.Object,
	merge func(cur runtime.Object) (out runtime.Object, changed, recreate bool)) (string, error) {
	for attempt := 0; ; attempt++ {
		cur, err := st.Get(ctx, "", name, &metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			created, err := st.Create(ctx, "", want.DeepCopyObject(), registry.CreateOptions{FieldManager: apiserverFieldManager})
			if apierrors.IsAlreadyExists(err) && attempt < 5 {
				continue
			}
			return resourceVersion(created), err
		}
		if err != nil {
			return "", err
		}
		out, changed, recreate := merge(cur)
		if !changed {
			return resourceVersion(cur), nil
		}
		if recreate {
			if _, _, err := st.Delete(ctx, "", name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return "", err
			}
			continue
		}
		updated, _, err := st.Update(ctx, "", name, func(context.Context, runtime.Object) (runtime.Object, error) { return out, nil }, registry.UpdateOptions{FieldManager: apiserverFieldManager})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		return resourceVersion(updated), err
	}
}

func resourceVersion(obj runtime.Object) string {
	if m, err := metaOf(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// aggregateClusterRoles is kube's ClusterRole aggregation controller: each
// time a ClusterRole changes, every ClusterRole with an aggregationRule
// gets the rules of the ClusterRoles its selectors match.
func (s *Server) aggregateClusterRoles(ctx context.Context, trigger <-chan struct{}) {
	a := s.authorization
	st := a.stores["clusterroles"]
	pctx := s.privilegedContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		}
		all := a.cache.ClusterRoles()
		for _, role := range all {
			rules, ok := rbac.AggregatedRules(role, all)
			if !ok || equalRules(rules, role.Rules) {
				continue
			}
			patch, err := aggregatedRulesApply(role.Name, rules)
			if err == nil {
				// kube's controller applies the rules, forced, as its own
				// field manager: .rules is then its, and a client applying
				// rules conflicts with it.
				_, _, err = st.Apply(pctx, "", role.Name, patch, registry.ApplyOptions{FieldManager: "clusterrole-aggregation-controller", Force: true})
			}
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				s.log.Error("aggregate clusterrole", "name", role.Name, "err", err)
			}
		}
	}
}

// aggregatedRulesApply is the applied configuration kube's aggregation
// controller sends: the ClusterRole's name and rules, no rules field at
// all when there are none.
func aggregatedRulesApply(name string, rules []rbacv1.PolicyRule) (*unstructured.Unstructured, error) {
	obj := map[string]any{
		"apiVersion": rbacv1.SchemeGroupVersion.String(),
		"kind":       "ClusterRole",
		"metadata":   map[string]any{"name": name},
	}
	if len(rules) > 0 {
		items := make([]any, len(rules))
		for i := range rules {
			rule, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rules[i])
			if err != nil {
				return nil, fmt.Errorf("aggregated rules of %s: %w", name, err)
			}
			items[i] = rule
		}
		obj["rules"] = items
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalRule(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

func equalRule(a, b *rbacv1.PolicyRule) bool {
	eq := func(x, y []string) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return eq(a.Verbs, b.Verbs) && eq(a.APIGroups, b.APIGroups) && eq(a.Resources, b.Resources) &&
		eq(a.ResourceNames, b.ResourceNames) && eq(a.NonResourceURLs, b.NonResourceURLs)
}

// attributesOf is what authorization decides on for the request of u.
func attributesOf(u *user.Info, ri *handlers.RequestInfo) authorizer.Attributes {
	a := authorizer.Attributes{
		User: u, Verb: ri.Verb, Namespace: ri.Namespace, APIGroup: ri.APIGroup, APIVersion: ri.APIVersion,
		Resource: ri.Resource, Subresource: ri.Subresource, Name: ri.Name,
		ResourceRequest: ri.IsResourceRequest, Path: ri.Path,
	}
	a.ParseSelectors(ri.FieldSelector, ri.LabelSelector)
	return a
}

// withAuthorization lets the request run when the authorizer allows it,
// and answers kube's 403 otherwise (500 when it could not decide).
func (s *Server) withAuthorization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri, ok := handlers.RequestInfoFrom(r.Context())
		if !ok {
			ri = handlers.NewRequestInfo(r)
		}
		u, _ := user.From(r.Context())
		attrs := attributesOf(u, ri)
		start := monotonic()
		d, reason, err := s.authorization.authz.Authorize(r.Context(), attrs)
		s.authMetrics.authorized(d, err, monotonic()-start)
		// The decision and its reason go into the request's audit event,
		// under kube's annotation keys.
		if reason != "" {
			audit.AddAnnotation(r.Context(), "authorization.k8s.io/reason", reason)
		}
		if d == authorizer.DecisionAllow {
			audit.AddAnnotation(r.Context(), "authorization.k8s.io/decision", "allow")
			trace.Mark(r.Context(), trace.Authorized)
			if attrs.ResourceRequest && (attrs.Verb == "patch" || attrs.Verb == "update") {
				r = r.WithContext(registry.WithCreateAuthorizer(r.Context(), s.createAuthorizer(attrs)))
			}
			if s.requests != nil && !longRunning(ri) {
				// Executing: past flow control and authorization, as
				// kube's inflight counts.
				defer s.requests.executing(ri.Verb).Add(-1)
			}
			next.ServeHTTP(w, r)
			return
		}
		audit.AddAnnotation(r.Context(), "authorization.k8s.io/decision", "forbid")
		if err != nil {
			handlers.WriteError(w, r, apierrors.NewInternalError(err))
			return
		}
		s.log.Debug("forbidden", "uri", r.RequestURI, "user", userName(u), "reason", reason)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		handlers.WriteError(w, r, forbidden(attrs, reason))
	})
}

// createAuthorizer is kube's check of a patch or an update that creates
// (a server-side apply, a PUT to a missing name): the user must be
// allowed to create as well, else a 403 with the authorizer's reason
// (kube's withAuthorization of the create).
func (s *Server) createAuthorizer(attrs authorizer.Attributes) func(context.Context) error {
	attrs.Verb = "create"
	return func(ctx context.Context) error {
		d, reason, err := s.authorization.authz.Authorize(ctx, attrs)
		if d == authorizer.DecisionAllow {
			return nil
		}
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		return apierrors.NewForbidden(schema.GroupResource{Group: attrs.APIGroup, Resource: attrs.Resource}, attrs.Name, errors.New(reason))
	}
}

func userName(u *user.Info) string {
	if u == nil {
		return ""
	}
	return u.Name
}

// forbidden is kube's 403 for attrs: who cannot do what, where, and the
// authorizers' reason after a colon when they gave one.
func forbidden(a authorizer.Attributes, reason string) error {
	msg := forbiddenMessage(a)
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	if !a.ResourceRequest {
		gr = schema.GroupResource{}
	}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}

// forbiddenMessage is kube's forbiddenMessage.
func forbiddenMessage(a authorizer.Attributes) string {
	name := userName(a.User)
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.Verb, resource, a.APIGroup)
}
