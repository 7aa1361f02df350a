package webhook

import (
	"context"
	"fmt"
	"strings"

	"github.com/corekube/corekube/admission"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// NamespaceLabels returns the labels of a namespace; a NotFound Status
// error when it does not exist.
type NamespaceLabels func(ctx context.Context, name string) (map[string]string, error)

// exempt are the resources never sent to webhooks, as in kube: a webhook
// must not be able to lock out the repair of webhook configurations.
func exempt(a *admission.Attributes) bool {
	return a.Resource.Group == "admissionregistration.k8s.io" &&
		(a.Resource.Resource == "mutatingwebhookconfigurations" || a.Resource.Resource == "validatingwebhookconfigurations")
}

func isNamespace(a *admission.Attributes) bool {
	return a.Resource.Group == "" && a.Resource.Resource == "namespaces"
}

// matches reports whether h is called for a, in kube's order: namespace
// selector, object selector, then rules; a selector that could not be
// evaluated is an error only if the rules match.
func (h *Hook) matches(ctx context.Context, a *admission.Attributes, nsLabels NamespaceLabels) (bool, error) {
	if h.selectorErr != nil {
		if !h.matchesRules(a) {
			return false, nil
		}
		return false, apierrors.NewInternalError(h.selectorErr)
	}
	nsOK, nsErr := h.matchNamespace(ctx, a, nsLabels)
	if !nsOK && nsErr == nil {
		return false, nil
	}
	if !h.matchObject(a) {
		return false, nil
	}
	if !h.matchesRules(a) {
		return false, nil
	}
	if nsErr != nil {
		return false, nsErr
	}
	return true, nil
}

// matchNamespace is kube's namespace matcher: cluster-scoped objects other
// than namespaces are never exempted; a namespace's own create and update
// are judged by the labels they write.
func (h *Hook) matchNamespace(ctx context.Context, a *admission.Attributes, nsLabels NamespaceLabels) (bool, error) {
	ns := a.Namespace
	if isNamespace(a) {
		ns = a.Name
	}
	if ns == "" {
		return true, nil
	}
	if h.namespaceSelector.Empty() {
		return true, nil
	}
	if isNamespace(a) && a.Subresource == "" && (a.Operation == admission.Create || a.Operation == admission.Update) && a.Object != nil {
		m, err := meta.Accessor(a.Object)
		if err != nil {
			return false, apierrors.NewInternalError(err)
		}
		return h.namespaceSelector.Matches(labels.Set(m.GetLabels())), nil
	}
	if nsLabels == nil {
		return false, apierrors.NewInternalError(fmt.Errorf("no namespace lookup for webhook namespaceSelector"))
	}
	l, err := nsLabels(ctx, ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return h.namespaceSelector.Matches(labels.Set(l)), nil
}

// matchObject: the new or the old object's labels match.
func (h *Hook) matchObject(a *admission.Attributes) bool {
	if h.objectSelector.Empty() {
		return true
	}
	return objectMatches(a.Object, h.objectSelector) || objectMatches(a.OldObject, h.objectSelector)
}

func objectMatches(obj runtime.Object, sel labels.Selector) bool {
	if obj == nil {
		return false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(m.GetLabels()))
}

// matchesRules: any rule matches. Every resource is served in one
// version, so matchPolicy Equivalent has no other form of the request to
// try and both policies reduce to this.
func (h *Hook) matchesRules(a *admission.Attributes) bool {
	for i := range h.Rules {
		if ruleMatches(&h.Rules[i], a) {
			return true
		}
	}
	return false
}

func ruleMatches(r *admissionregistrationv1.RuleWithOperations, a *admission.Attributes) bool {
	return scopeMatches(r.Scope, a) && operationMatches(r.Operations, a.Operation) &&
		oneOf(r.APIGroups, a.Resource.Group) && oneOf(r.APIVersions, a.Resource.Version) &&
		resourceMatches(r.Resources, a.Resource.Resource, a.Subresource)
}

func oneOf(values []string, v string) bool {
	for _, x := range values {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

func operationMatches(ops []admissionregistrationv1.OperationType, op admission.Operation) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || string(o) == string(op) {
			return true
		}
	}
	return false
}

// resourceMatches knows kube's forms: "*/*" everything, "*" every
// resource but no subresource, "pods" the resource, "pods/status" one
// subresource, "pods/*" and "*/status" wildcards on either side.
func resourceMatches(rules []string, resource, sub string) bool {
	combined := resource
	if sub != "" {
		combined += "/" + sub
	}
	for _, r := range rules {
		switch {
		case r == "*/*", r == combined:
			return true
		case r == "*":
			if sub == "" {
				return true
			}
			continue
		}
		res, rsub, ok := strings.Cut(r, "/")
		if !ok {
			continue
		}
		if (res == "*" || res == resource) && (rsub == "*" || rsub == sub) {
			return true
		}
	}
	return false
}

// scopeMatches: namespaces themselves are cluster-scoped.
func scopeMatches(scope *admissionregistrationv1.ScopeType, a *admission.Attributes) bool {
	if scope == nil {
		return true
	}
	namespaced := !isNamespace(a) && a.Namespace != ""
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		return namespaced
	case admissionregistrationv1.ClusterScope:
		return !namespaced
	}
	return true
}
