package webhook

import (
	"context"
	"testing"

	"github.com/corekube/corekube/admission"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func podAttrs(op admission.Operation, sub string) *admission.Attributes {
	return &admission.Attributes{
		Operation: op, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Subresource: sub,
		Namespace: "ns", Name: "p", Object: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}},
	}
}

func rule(ops []string, groups, versions, resources []string, scope admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
	r := admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
	for _, o := range ops {
		r.Operations = append(r.Operations, admissionregistrationv1.OperationType(o))
	}
	if scope != "" {
		r.Scope = ptr.To(scope)
	}
	return r
}

func TestRuleMatching(t *testing.T) {
	core, v := []string{""}, []string{"v1"}
	nsAttrs := &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Name: "n",
		Object: &v1.Namespace{}}
	nodeAttrs := &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n"}
	leaseAttrs := &admission.Attributes{Operation: admission.Update, Resource: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, Namespace: "x"}
	tests := []struct {
		name string
		rule admissionregistrationv1.RuleWithOperations
		a    *admission.Attributes
		want bool
	}{
		{"exact", rule([]string{"CREATE"}, core, v, []string{"pods"}, ""), podAttrs(admission.Create, ""), true},
		{"other operation", rule([]string{"UPDATE"}, core, v, []string{"pods"}, ""), podAttrs(admission.Create, ""), false},
		{"any operation", rule([]string{"*"}, core, v, []string{"pods"}, ""), podAttrs(admission.Delete, ""), true},
		{"other group", rule([]string{"*"}, []string{"apps"}, v, []string{"pods"}, ""), podAttrs(admission.Create, ""), false},
		{"any group and version", rule([]string{"*"}, []string{"*"}, []string{"*"}, []string{"leases"}, ""), leaseAttrs, true},
		{"other version", rule([]string{"*"}, core, []string{"v2"}, []string{"pods"}, ""), podAttrs(admission.Create, ""), false},
		{"resource misses subresource", rule([]string{"*"}, core, v, []string{"pods"}, ""), podAttrs(admission.Update, "status"), false},
		{"star misses subresource", rule([]string{"*"}, core, v, []string{"*"}, ""), podAttrs(admission.Update, "status"), false},
		{"star matches resource", rule([]string{"*"}, core, v, []string{"*"}, ""), podAttrs(admission.Update, ""), true},
		{"star star", rule([]string{"*"}, core, v, []string{"*/*"}, ""), podAttrs(admission.Update, "status"), true},
		{"exact subresource", rule([]string{"*"}, core, v, []string{"pods/status"}, ""), podAttrs(admission.Update, "status"), true},
		{"subresource misses resource", rule([]string{"*"}, core, v, []string{"pods/status"}, ""), podAttrs(admission.Update, ""), false},
		{"pods/*", rule([]string{"*"}, core, v, []string{"pods/*"}, ""), podAttrs(admission.Create, "binding"), true},
		{"*/status", rule([]string{"*"}, core, v, []string{"*/status"}, ""), podAttrs(admission.Update, "status"), true},
		{"*/status other", rule([]string{"*"}, core, v, []string{"*/status"}, ""), podAttrs(admission.Create, "binding"), false},
		{"namespaced scope", rule([]string{"*"}, core, v, []string{"*"}, "Namespaced"), podAttrs(admission.Create, ""), true},
		{"cluster scope misses pods", rule([]string{"*"}, core, v, []string{"*"}, "Cluster"), podAttrs(admission.Create, ""), false},
		{"cluster scope nodes", rule([]string{"*"}, core, v, []string{"*"}, "Cluster"), nodeAttrs, true},
		{"namespaces are cluster scoped", rule([]string{"*"}, core, v, []string{"namespaces"}, "Cluster"), nsAttrs, true},
		{"namespaces not namespaced", rule([]string{"*"}, core, v, []string{"namespaces"}, "Namespaced"), nsAttrs, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ruleMatches(&tc.rule, tc.a); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func hookWith(nsSel, objSel *metav1.LabelSelector) *Hook {
	return CompileValidating([]*admissionregistrationv1.ValidatingWebhookConfiguration{{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:              "h.example.com",
			Rules:             []admissionregistrationv1.RuleWithOperations{rule([]string{"*"}, []string{"*"}, []string{"*"}, []string{"*"}, "")},
			NamespaceSelector: nsSel, ObjectSelector: objSel,
		}},
	}})[0]
}

func TestSelectors(t *testing.T) {
	ctx := context.Background()
	nsLabels := func(_ context.Context, name string) (map[string]string, error) {
		switch name {
		case "ns":
			return map[string]string{"team": "a"}, nil
		case "other":
			return map[string]string{"team": "b"}, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	withLabels := func(a *admission.Attributes, obj, old map[string]string) *admission.Attributes {
		a.Object.(*v1.Pod).Labels = obj
		if old != nil {
			a.OldObject = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: old}}
		}
		return a
	}
	inNS := func(ns string) *admission.Attributes { a := podAttrs(admission.Create, ""); a.Namespace = ns; return a }
	node := &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n",
		Object: &v1.Node{}}
	newNS := func(l map[string]string) *admission.Attributes {
		return &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Name: "fresh",
			Object: &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Labels: l}}}
	}
	tests := []struct {
		name string
		h    *Hook
		a    *admission.Attributes
		want bool
	}{
		{"namespace matches", hookWith(teamA, nil), inNS("ns"), true},
		{"namespace does not match", hookWith(teamA, nil), inNS("other"), false},
		{"missing namespace", hookWith(teamA, nil), inNS("gone"), false},
		{"cluster-scoped never exempted", hookWith(teamA, nil), node, true},
		{"a new namespace by its own labels", hookWith(teamA, nil), newNS(map[string]string{"team": "a"}), true},
		{"a new namespace without", hookWith(teamA, nil), newNS(nil), false},
		{"object matches", hookWith(nil, teamA), withLabels(podAttrs(admission.Create, ""), map[string]string{"team": "a"}, nil), true},
		{"object does not", hookWith(nil, teamA), withLabels(podAttrs(admission.Create, ""), map[string]string{"team": "b"}, nil), false},
		{"old object matches", hookWith(nil, teamA), withLabels(podAttrs(admission.Update, ""), nil, map[string]string{"team": "a"}), true},
		{"exists selector", hookWith(nil, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}}}),
			withLabels(podAttrs(admission.Create, ""), map[string]string{"skip": "1"}, nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.h.matches(ctx, tc.a, nsLabels)
			if err != nil || got != tc.want {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestExempt(t *testing.T) {
	a := &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}}
	if !exempt(a) {
		t.Error("webhook configurations must be exempt")
	}
	if exempt(podAttrs(admission.Create, "")) {
		t.Error("pods are not exempt")
	}
}
