package openapi

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
)

// TestServedKindsMergeAsKube merges an applied configuration into a live
// object of each served group the way kube-apiserver's structured-merge-diff
// does with kube's schemas: by the list keys, set and atomic markers the
// models carry.
func TestServedKindsMergeAsKube(t *testing.T) {
	tc, err := TypeConverter(servedResources())
	if err != nil {
		t.Fatal(err)
	}
	obj := func(apiVersion, kind string, fields map[string]any) map[string]any {
		o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "x"}}
		for k, v := range fields {
			if k == "metadata" {
				for mk, mv := range v.(map[string]any) {
					o["metadata"].(map[string]any)[mk] = mv
				}
				continue
			}
			o[k] = v
		}
		return o
	}
	pod := func(spec map[string]any) map[string]any { return obj("v1", "Pod", map[string]any{"spec": spec}) }
	container := func(name string, extra map[string]any) map[string]any {
		c := map[string]any{"name": name, "image": name}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	l := func(items ...any) []any { return items }
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}

	for _, c := range []struct {
		name        string
		live, apply map[string]any
		path        []string
		want        any
	}{{
		name:  "pod containers are a map by name",
		live:  pod(m("containers", l(container("a", nil), container("b", nil)))),
		apply: pod(m("containers", l(container("a", m("image", "a:2"))))),
		path:  []string{"spec", "containers"},
		want:  l(container("a", m("image", "a:2")), container("b", nil)),
	}, {
		name: "container ports are a map by containerPort and protocol, protocol defaulting to TCP",
		live: pod(m("containers", l(container("a", m("ports", l(
			m("containerPort", int64(80), "protocol", "TCP", "name", "http"),
			m("containerPort", int64(53), "protocol", "UDP"))))))),
		apply: pod(m("containers", l(container("a", m("ports", l(
			m("containerPort", int64(80), "name", "web"),
			m("containerPort", int64(53), "protocol", "TCP"))))))),
		path: []string{"spec", "containers", "0", "ports"},
		want: l(
			m("containerPort", int64(80), "protocol", "TCP", "name", "web"),
			m("containerPort", int64(53), "protocol", "UDP"),
			m("containerPort", int64(53), "protocol", "TCP")),
	}, {
		name:  "tolerations are atomic",
		live:  pod(m("containers", l(container("a", nil)), "tolerations", l(m("key", "k", "operator", "Exists")))),
		apply: pod(m("containers", l(container("a", nil)), "tolerations", l(m("key", "other", "operator", "Exists")))),
		path:  []string{"spec", "tolerations"},
		want:  l(m("key", "other", "operator", "Exists")),
	}, {
		name:  "nodeSelector is an atomic map",
		live:  pod(m("containers", l(container("a", nil)), "nodeSelector", m("disk", "ssd"))),
		apply: pod(m("containers", l(container("a", nil)), "nodeSelector", m("zone", "a"))),
		path:  []string{"spec", "nodeSelector"},
		want:  m("zone", "a"),
	}, {
		name:  "labels are a granular map",
		live:  obj("v1", "Namespace", m("metadata", m("labels", m("a", "1")))),
		apply: obj("v1", "Namespace", m("metadata", m("labels", m("b", "2")))),
		path:  []string{"metadata", "labels"},
		want:  m("a", "1", "b", "2"),
	}, {
		name: "ownerReferences are a map by uid",
		live: obj("v1", "Namespace", m("metadata", m("ownerReferences", l(
			m("apiVersion", "v1", "kind", "Node", "name", "n1", "uid", "1"))))),
		apply: obj("v1", "Namespace", m("metadata", m("ownerReferences", l(
			m("apiVersion", "v1", "kind", "Node", "name", "n2", "uid", "2"))))),
		path: []string{"metadata", "ownerReferences"},
		want: l(m("apiVersion", "v1", "kind", "Node", "name", "n1", "uid", "1"), m("apiVersion", "v1", "kind", "Node", "name", "n2", "uid", "2")),
	}, {
		name:  "finalizers are a set",
		live:  obj("v1", "Namespace", m("metadata", m("finalizers", l("a", "b")))),
		apply: obj("v1", "Namespace", m("metadata", m("finalizers", l("c", "a")))),
		path:  []string{"metadata", "finalizers"},
		// structured-merge-diff keeps the live order and puts new items
		// where the applied list has them relative to the shared ones.
		want: l("c", "a", "b"),
	}, {
		name:  "role rules are atomic",
		live:  obj("rbac.authorization.k8s.io/v1", "Role", m("rules", l(m("apiGroups", l(""), "resources", l("pods"), "verbs", l("get"))))),
		apply: obj("rbac.authorization.k8s.io/v1", "Role", m("rules", l(m("apiGroups", l(""), "resources", l("pods"), "verbs", l("list"))))),
		path:  []string{"rules"},
		want:  l(m("apiGroups", l(""), "resources", l("pods"), "verbs", l("list"))),
	}, {
		name: "binding subjects are atomic, roleRef an atomic struct",
		live: obj("rbac.authorization.k8s.io/v1", "RoleBinding", m(
			"subjects", l(m("kind", "User", "name", "a")),
			"roleRef", m("apiGroup", "rbac.authorization.k8s.io", "kind", "Role", "name", "r"))),
		apply: obj("rbac.authorization.k8s.io/v1", "RoleBinding", m(
			"subjects", l(m("kind", "User", "name", "b")),
			"roleRef", m("kind", "ClusterRole", "name", "r"))),
		path: []string{"roleRef"},
		want: m("kind", "ClusterRole", "name", "r"),
	}, {
		name: "CSR conditions are a map by type",
		live: obj("certificates.k8s.io/v1", "CertificateSigningRequest", m(
			"spec", m("signerName", "s", "request", "cmVx"),
			"status", m("conditions", l(m("type", "Approved", "status", "True", "reason", "r1"))))),
		apply: obj("certificates.k8s.io/v1", "CertificateSigningRequest", m(
			"spec", m("signerName", "s", "request", "cmVx"),
			"status", m("conditions", l(m("type", "Failed", "status", "True"))))),
		path: []string{"status", "conditions"},
		want: l(m("type", "Approved", "status", "True", "reason", "r1"), m("type", "Failed", "status", "True")),
	}, {
		name: "webhook configurations' webhooks are a map by name",
		live: obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", m("webhooks", l(
			m("name", "a.example.com", "sideEffects", "None", "admissionReviewVersions", l("v1"), "clientConfig", m("url", "https://a"))))),
		apply: obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", m("webhooks", l(
			m("name", "b.example.com", "sideEffects", "None", "admissionReviewVersions", l("v1"), "clientConfig", m("url", "https://b"))))),
		path: []string{"webhooks"},
		want: l(m("name", "a.example.com", "sideEffects", "None", "admissionReviewVersions", l("v1"), "clientConfig", m("url", "https://a")),
			m("name", "b.example.com", "sideEffects", "None", "admissionReviewVersions", l("v1"), "clientConfig", m("url", "https://b"))),
	}, {
		name: "mutating webhooks are a map by name, their rules atomic",
		live: obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", m("webhooks", l(
			m("name", "a.example.com", "rules", l(m("operations", l("CREATE"), "apiGroups", l(""), "apiVersions", l("v1"), "resources", l("pods"))))))),
		apply: obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", m("webhooks", l(
			m("name", "a.example.com", "rules", l(m("operations", l("UPDATE"), "apiGroups", l(""), "apiVersions", l("v1"), "resources", l("pods"))))))),
		path: []string{"webhooks", "0", "rules"},
		want: l(m("operations", l("UPDATE"), "apiGroups", l(""), "apiVersions", l("v1"), "resources", l("pods"))),
	}} {
		t.Run(c.name, func(t *testing.T) {
			lt, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: c.live})
			if err != nil {
				t.Fatalf("live: %v", err)
			}
			pt, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: c.apply})
			if err != nil {
				t.Fatalf("applied: %v", err)
			}
			merged, err := lt.Merge(pt)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tc.TypedToObject(merged)
			if err != nil {
				t.Fatal(err)
			}
			got := any(out.(*unstructured.Unstructured).Object)
			for _, p := range c.path {
				switch v := got.(type) {
				case map[string]any:
					got = v[p]
				case []any:
					got = v[int(p[0]-'0')]
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%v = %#v, want %#v", c.path, got, c.want)
			}
		})
	}

	// The applied configuration owns the port by its defaulted key.
	pt, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: pod(m("containers", l(container("a", m("ports", l(m("containerPort", int64(80))))))))})
	if err != nil {
		t.Fatal(err)
	}
	set, err := pt.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	port := fieldpath.MakePathOrDie("spec", "containers", fieldpath.KeyByFields("name", "a"), "ports",
		fieldpath.KeyByFields("containerPort", int64(80), "protocol", "TCP"))
	if !set.Has(port) {
		t.Errorf("field set lacks %v:\n%v", port, set)
	}
}
