package node

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
)

func pod(name, node, sa string, secrets ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.PodSpec{NodeName: node, ServiceAccountName: sa}}
	for _, s := range secrets {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: s, VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: s}}})
	}
	return p
}

var node1 = &user.Info{Name: "system:node:node-1", Groups: []string{"system:nodes", "system:authenticated"}}

func res(verb, group, resource, sub, ns, name string) authorizer.Attributes {
	return authorizer.Attributes{User: node1, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub,
		Namespace: ns, Name: name, ResourceRequest: true}
}

func sel(a authorizer.Attributes, fieldSelector, labelSelector string) authorizer.Attributes {
	a.ParseSelectors(fieldSelector, labelSelector)
	return a
}

func TestAuthorize(t *testing.T) {
	g := NewGraph()
	g.Replace([]*v1.Pod{pod("a", "node-1", "sa1", "s1"), pod("b", "node-2", "sa2", "s2"), pod("c", "", "sa3")})
	g.Upsert(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Spec: v1.PodSpec{NodeName: "node-1",
		Containers: []v1.Container{{Name: "c", EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm1"}}}}}}}})
	z := New(g)
	noRel := "no relationship found between node 'node-1' and this object"
	for _, tc := range []struct {
		name   string
		attrs  authorizer.Attributes
		want   authorizer.Decision
		reason string
	}{
		{"not a node", authorizer.Attributes{User: &user.Info{Name: "system:node:node-1"}, Verb: "get", Resource: "nodes", ResourceRequest: true}, authorizer.DecisionNoOpinion, ""},
		{"node without name", authorizer.Attributes{User: &user.Info{Name: "system:node:", Groups: []string{Group}}, Verb: "get", Resource: "nodes", ResourceRequest: true}, authorizer.DecisionNoOpinion, `unknown node for user "system:node:"`},
		{"get own node", res("get", "", "nodes", "", "", "node-1"), authorizer.DecisionAllow, ""},
		{"get another node", res("get", "", "nodes", "", "", "node-2"), authorizer.DecisionNoOpinion, "node 'node-1' cannot read 'node-2', only its own Node object"},
		{"list nodes", res("list", "", "nodes", "", "", ""), authorizer.DecisionNoOpinion, "node 'node-1' cannot read all nodes, only its own Node object"},
		{"watch own node by name", res("watch", "", "nodes", "", "", "node-1"), authorizer.DecisionAllow, ""},
		{"watch another node by name", res("watch", "", "nodes", "", "", "node-2"), authorizer.DecisionNoOpinion, "node 'node-1' cannot read 'node-2', only its own Node object"},
		{"create node", res("create", "", "nodes", "", "", ""), authorizer.DecisionAllow, ""},
		{"patch node", res("patch", "", "nodes", "", "", "node-1"), authorizer.DecisionAllow, ""},
		{"node proxy", res("get", "", "nodes", "proxy", "", "node-1"), authorizer.DecisionNoOpinion, ""},
		{"list pods", res("list", "", "pods", "", "", ""), authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"list own pods", sel(res("list", "", "pods", "", "", ""), "spec.nodeName=node-1", ""), authorizer.DecisionAllow, ""},
		{"watch own pods ==", sel(res("watch", "", "pods", "", "ns", ""), "status.phase!=Failed,spec.nodeName==node-1", "app=x"), authorizer.DecisionAllow, ""},
		{"list other node's pods", sel(res("list", "", "pods", "", "", ""), "spec.nodeName=node-2", ""), authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"list pods not on node", sel(res("list", "", "pods", "", "", ""), "spec.nodeName!=node-1", ""), authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"list pods bad selector", sel(res("list", "", "pods", "", "", ""), "spec.nodeName", ""), authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"list pods label only", sel(res("list", "", "pods", "", "", ""), "", "spec.nodeName=node-1"), authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"watch own pod by name", res("watch", "", "pods", "", "ns", "a"), authorizer.DecisionAllow, ""},
		{"watch other pod by name", res("watch", "", "pods", "", "ns", "b"), authorizer.DecisionNoOpinion, noRel},
		{"get own pod", res("get", "", "pods", "", "ns", "a"), authorizer.DecisionAllow, ""},
		{"get other node's pod", res("get", "", "pods", "", "ns", "b"), authorizer.DecisionNoOpinion, noRel},
		{"get unbound pod", res("get", "", "pods", "", "ns", "c"), authorizer.DecisionNoOpinion, noRel},
		{"delete pod", res("delete", "", "pods", "", "ns", "b"), authorizer.DecisionAllow, ""},
		{"deletecollection pods", sel(res("deletecollection", "", "pods", "", "ns", ""), "spec.nodeName=node-1", ""), authorizer.DecisionNoOpinion, ""},
		{"pod log", res("get", "", "pods", "log", "ns", "a"), authorizer.DecisionNoOpinion, ""},
		{"update node status", res("update", "", "nodes", "status", "", "node-1"), authorizer.DecisionAllow, ""},
		{"delete node", res("delete", "", "nodes", "", "", "node-1"), authorizer.DecisionNoOpinion, ""},
		{"create pod", res("create", "", "pods", "", "ns", ""), authorizer.DecisionAllow, ""},
		{"update pod", res("update", "", "pods", "", "ns", "a"), authorizer.DecisionNoOpinion, ""},
		{"pod status", res("patch", "", "pods", "status", "ns", "a"), authorizer.DecisionAllow, ""},
		{"eviction", res("create", "", "pods", "eviction", "ns", "a"), authorizer.DecisionAllow, ""},
		{"events", res("create", "", "events", "", "ns", ""), authorizer.DecisionAllow, ""},
		{"delete namespace", res("delete", "", "namespaces", "", "", "ns"), authorizer.DecisionNoOpinion, ""},
		{"csr", res("create", "certificates.k8s.io", "certificatesigningrequests", "", "", ""), authorizer.DecisionAllow, ""},
		{"tokenreview", res("create", "authentication.k8s.io", "tokenreviews", "", "", ""), authorizer.DecisionAllow, ""},
		{"secret of its pod", res("get", "", "secrets", "", "ns", "s1"), authorizer.DecisionAllow, ""},
		{"secret of another node's pod", res("get", "", "secrets", "", "ns", "s2"), authorizer.DecisionNoOpinion, noRel},
		{"secret elsewhere", res("get", "", "secrets", "", "other", "s1"), authorizer.DecisionNoOpinion, noRel},
		{"list secrets", res("list", "", "secrets", "", "ns", ""), authorizer.DecisionNoOpinion, "No Object name found"},
		{"update secret", res("update", "", "secrets", "", "ns", "s1"), authorizer.DecisionNoOpinion, "can only read resources of this type"},
		{"configmap from env", res("watch", "", "configmaps", "", "ns", "cm1"), authorizer.DecisionAllow, ""},
		{"token of its pod's SA", res("create", "", "serviceaccounts", "token", "ns", "sa1"), authorizer.DecisionAllow, ""},
		{"token of another node's SA", res("create", "", "serviceaccounts", "token", "ns", "sa2"), authorizer.DecisionNoOpinion, noRel},
		{"token of an unbound pod's SA", res("create", "", "serviceaccounts", "token", "ns", "sa3"), authorizer.DecisionNoOpinion, noRel},
		{"get SA", res("get", "", "serviceaccounts", "", "ns", "sa1"), authorizer.DecisionNoOpinion, "can only create tokens for individual service accounts"},
		{"pvc of nobody", res("get", "", "persistentvolumeclaims", "", "ns", "x"), authorizer.DecisionNoOpinion, noRel},
		{"list pvcs", res("list", "", "persistentvolumeclaims", "", "ns", ""), authorizer.DecisionNoOpinion, "can only get individual resources of this type"},
		{"own lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-1"), authorizer.DecisionAllow, ""},
		{"create lease", res("create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), authorizer.DecisionAllow, ""},
		{"other lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-2"), authorizer.DecisionNoOpinion, "can only access node lease with the same name as the requesting node"},
		{"lease elsewhere", res("get", "coordination.k8s.io", "leases", "", "default", "node-1"), authorizer.DecisionNoOpinion, `can only access leases in the "kube-node-lease" system namespace`},
		{"list leases", res("list", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), authorizer.DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease"},
		{"non-resource", authorizer.Attributes{User: node1, Verb: "get", Path: "/metrics"}, authorizer.DecisionNoOpinion, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := z.Authorize(context.Background(), tc.attrs)
			if err != nil || d != tc.want || reason != tc.reason {
				t.Fatalf("got %v %q %v, want %v %q", d, reason, err, tc.want, tc.reason)
			}
		})
	}
}

func TestGraphFollowsPods(t *testing.T) {
	g := NewGraph()
	if g.Synced() {
		t.Fatal("synced before Replace")
	}
	g.Replace(nil)
	g.Upsert(pod("a", "", "sa", "s"))
	if g.Related("node-1", KindServiceAccount, "ns", "sa") {
		t.Fatal("an unbound pod ties its SA to a node")
	}
	g.Upsert(pod("a", "node-1", "sa", "s"))
	g.Upsert(pod("b", "node-1", "sa"))
	if !g.Related("node-1", KindServiceAccount, "ns", "sa") || !g.Related("node-1", KindSecret, "ns", "s") || !g.Related("node-1", KindPod, "ns", "a") {
		t.Fatal("binding a pod did not tie its objects to its node")
	}
	g.Delete("ns", "a")
	if g.Related("node-1", KindSecret, "ns", "s") || g.Related("node-1", KindPod, "ns", "a") {
		t.Fatal("a deleted pod's secret is still tied to its node")
	}
	if !g.Related("node-1", KindServiceAccount, "ns", "sa") {
		t.Fatal("the SA of the remaining pod is no longer tied")
	}
	done := pod("b", "node-1", "sa")
	done.Status.Phase = v1.PodSucceeded
	g.Upsert(done)
	if g.Related("node-1", KindServiceAccount, "ns", "sa") {
		t.Fatal("a finished pod still ties its SA")
	}
	if !g.Related("node-1", KindPod, "ns", "b") {
		t.Fatal("a finished pod is no longer its node's to read")
	}
	g.Upsert(pod("c", "node-2", "sa"))
	if g.Related("node-1", KindServiceAccount, "ns", "sa") || !g.Related("node-2", KindServiceAccount, "ns", "sa") {
		t.Fatal("wrong node")
	}
}

// BenchmarkAuthorize: a decision through the graph (a token of a pod's
// ServiceAccount among 30,000 pods on 1,000 nodes) and through the rules.
func BenchmarkAuthorize(b *testing.B) {
	g := NewGraph()
	var pods []*v1.Pod
	for i := 0; i < 30000; i++ {
		pods = append(pods, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("node-%d", i%1000+1), fmt.Sprintf("sa%d", i), fmt.Sprintf("s%d", i)))
	}
	g.Replace(pods)
	z := New(g)
	for _, bc := range []struct {
		name  string
		attrs authorizer.Attributes
	}{
		{"graph", res("create", "", "serviceaccounts", "token", "ns", "sa1000")},
		{"rules", res("create", "", "events", "", "ns", "")},
		{"selector", sel(res("watch", "", "pods", "", "", ""), "spec.nodeName=node-7", "")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d, _, _ := z.Authorize(context.Background(), bc.attrs); d != authorizer.DecisionAllow {
					b.Fatal(d)
				}
			}
		})
	}
}

// TestDecodePod: the graph's partial decode of a pod gives the graph the
// edges of the whole pod.
func TestDecodePod(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: v1.PodSpec{
			NodeName: "n", ServiceAccountName: "sa",
			ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
			Volumes: []v1.Volume{
				{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
				{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
				{Name: "p", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}},
				{Name: "e", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
				{Name: "pr", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "psec"}}}}}}},
			},
			InitContainers: []v1.Container{{Name: "i", Image: "x", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "isec"}}}}}},
			Containers: []v1.Container{{Name: "c", Image: "y", Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{
				ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "ccm"}, Key: "k"}}}}}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "d",
				EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "ecm"}}}}}}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodePod(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := podRefs(nil, decoded), podRefs(nil, pod); !reflect.DeepEqual(got, want) || len(want) != 10 {
		t.Errorf("refs of the decoded pod %v, of the pod %v", got, want)
	}
	if decoded.Spec.NodeName != "n" || decoded.Status.Phase != v1.PodRunning {
		t.Errorf("decoded %+v", decoded)
	}
}
