package admission

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corekube/corekube/auth/user"
)

func TestNodeRestriction(t *testing.T) {
	pods := map[string]*v1.Pod{
		"mine":   {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", UID: "u-mine"}, Spec: v1.PodSpec{NodeName: "node-1"}},
		"theirs": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs", UID: "u-theirs"}, Spec: v1.PodSpec{NodeName: "node-2"}},
	}
	p := &NodeRestriction{
		GetPod: func(_ context.Context, ns, name string) (*v1.Pod, error) {
			if p, ok := pods[name]; ok && ns == "ns" {
				return p, nil
			}
			return nil, apierrors.NewNotFound(podsResource, name)
		},
		GetNode: func(_ context.Context, name string) (*v1.Node, error) {
			return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}, nil
		},
	}
	node1 := user.WithUser(context.Background(), &user.Info{Name: "system:node:node-1", Groups: []string{"system:nodes"}})
	admin := user.WithUser(context.Background(), &user.Info{Name: "admin", Groups: []string{"system:masters"}})
	nodesR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	leasesR := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	saR := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	node := func(name string, labels map[string]string, taints ...v1.Taint) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{Taints: taints}}
	}
	yes, no := true, false
	mirror := func(mut func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "static-node-1",
			Annotations:     map[string]string{MirrorPodAnnotation: "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "uid-node-1", Controller: &yes}}},
			Spec: v1.PodSpec{NodeName: "node-1"}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	token := func(name string, uid types.UID) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid}}}
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		a    Attributes
		want string // "" allowed; else the 403 message
	}{
		{"admin passes", admin, Attributes{Operation: Update, Resource: nodesR, Name: "node-2", Object: node("node-2", nil), OldObject: node("node-2", nil)}, ""},
		{"create own node", node1, Attributes{Operation: Create, Resource: nodesR, Object: node("node-1", map[string]string{"kubernetes.io/hostname": "node-1", "node.kubernetes.io/x": "y", "example.com/a": "b"})}, ""},
		{"create other node", node1, Attributes{Operation: Create, Resource: nodesR, Name: "node-2", Object: node("node-2", nil)},
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"create with restricted labels", node1, Attributes{Operation: Create, Resource: nodesR, Object: node("node-1", map[string]string{"node-restriction.kubernetes.io/a": "b", "foo.k8s.io/b": "c"})},
			`nodes is forbidden: node "node-1" is not allowed to set the following labels: foo.k8s.io/b, node-restriction.kubernetes.io/a`},
		{"update other node", node1, Attributes{Operation: Update, Resource: nodesR, Name: "node-2", Object: node("node-2", nil), OldObject: node("node-2", nil)},
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"delete other node", node1, Attributes{Operation: Delete, Resource: nodesR, Name: "node-2"},
			`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`},
		{"label itself restricted", node1, Attributes{Operation: Update, Resource: nodesR, Name: "node-1",
			Object: node("node-1", map[string]string{"node-restriction.kubernetes.io/x": "y"}), OldObject: node("node-1", nil)},
			`nodes "node-1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/x`},
		{"label itself freely", node1, Attributes{Operation: Update, Resource: nodesR, Name: "node-1",
			Object: node("node-1", map[string]string{"team": "a"}), OldObject: node("node-1", nil)}, ""},
		{"taint itself", node1, Attributes{Operation: Update, Resource: nodesR, Name: "node-1",
			Object: node("node-1", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}), OldObject: node("node-1", nil)},
			`nodes "node-1" is forbidden: node "node-1" is not allowed to modify taints`},
		{"own status", node1, Attributes{Operation: Update, Resource: nodesR, Subresource: "status", Name: "node-1", Object: node("node-1", nil), OldObject: node("node-1", nil)}, ""},
		{"non-mirror pod", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Object: &v1.Pod{Spec: v1.PodSpec{NodeName: "node-1"}}},
			`pods is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`},
		{"mirror pod", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(nil)}, ""},
		{"mirror pod elsewhere", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(func(p *v1.Pod) { p.Spec.NodeName = "node-2" })},
			`pods "static-node-1" is forbidden: node "node-1" can only create pods with spec.nodeName set to itself`},
		{"mirror pod without owner", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(func(p *v1.Pod) { p.OwnerReferences = nil })},
			`pods "static-node-1" is forbidden: node "node-1" can only create pods with an owner reference set to itself`},
		{"mirror pod not controller", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(func(p *v1.Pod) { p.OwnerReferences[0].Controller = &no })},
			`pods "static-node-1" is forbidden: node "node-1" can only create pods with a controller owner reference set to itself`},
		{"mirror pod wrong uid", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(func(p *v1.Pod) { p.OwnerReferences[0].UID = "x" })},
			`pods "static-node-1" is forbidden: node node-1 UID mismatch: expected uid-node-1 got x`},
		{"mirror pod with secret", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}}
		})}, `pods "static-node-1" is forbidden: node "node-1" can not create pods that reference secrets`},
		{"mirror pod with SA", node1, Attributes{Operation: Create, Resource: podsR, Namespace: "ns", Name: "static-node-1", Object: mirror(func(p *v1.Pod) { p.Spec.ServiceAccountName = "default" })},
			`pods "static-node-1" is forbidden: node "node-1" can not create pods that reference a service account`},
		{"delete own pod", node1, Attributes{Operation: Delete, Resource: podsR, Namespace: "ns", Name: "mine", OldObject: pods["mine"]}, ""},
		{"delete their pod", node1, Attributes{Operation: Delete, Resource: podsR, Namespace: "ns", Name: "theirs", OldObject: pods["theirs"]},
			`pods "theirs" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`},
		{"delete their pod (mutating phase)", node1, Attributes{Operation: Delete, Resource: podsR, Namespace: "ns", Name: "theirs"},
			`pods "theirs" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`},
		{"update a pod", node1, Attributes{Operation: Update, Resource: podsR, Namespace: "ns", Name: "mine", Object: pods["mine"], OldObject: pods["mine"]},
			`pods "mine" is forbidden: unexpected operation "UPDATE", node "node-1" can only create and delete mirror pods`},
		{"own pod status", node1, Attributes{Operation: Update, Resource: podsR, Subresource: "status", Namespace: "ns", Name: "mine", Object: pods["mine"], OldObject: pods["mine"]}, ""},
		{"their pod status", node1, Attributes{Operation: Update, Resource: podsR, Subresource: "status", Namespace: "ns", Name: "theirs", Object: pods["theirs"], OldObject: pods["theirs"]},
			`pods "theirs" is forbidden: node "node-1" can only update pod status for pods with spec.nodeName set to itself`},
		{"evict own", node1, Attributes{Operation: Create, Resource: podsR, Subresource: "eviction", Namespace: "ns", Name: "mine", Object: &policyv1.Eviction{}}, ""},
		{"evict theirs", node1, Attributes{Operation: Create, Resource: podsR, Subresource: "eviction", Namespace: "ns", Name: "theirs", Object: &policyv1.Eviction{}},
			`pods "theirs" is forbidden: node node-1 can only evict pods with spec.nodeName set to itself`},
		{"token for own pod", node1, Attributes{Operation: Create, Resource: saR, Subresource: "token", Namespace: "ns", Name: "default", Object: token("mine", "u-mine")}, ""},
		{"token for their pod", node1, Attributes{Operation: Create, Resource: saR, Subresource: "token", Namespace: "ns", Name: "default", Object: token("theirs", "u-theirs")},
			`serviceaccounts "default" is forbidden: node requested token bound to a pod scheduled on a different node`},
		{"unbound token", node1, Attributes{Operation: Create, Resource: saR, Subresource: "token", Namespace: "ns", Name: "default", Object: &authenticationv1.TokenRequest{}},
			`serviceaccounts "default" is forbidden: node requested token not bound to a pod`},
		{"token of a recreated pod", node1, Attributes{Operation: Create, Resource: saR, Subresource: "token", Namespace: "ns", Name: "default", Object: token("mine", "old")},
			`serviceaccounts "default" is forbidden: the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated`},
		{"own lease", node1, Attributes{Operation: Create, Resource: leasesR, Namespace: "kube-node-lease", Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}, ""},
		{"other lease", node1, Attributes{Operation: Create, Resource: leasesR, Namespace: "kube-node-lease", Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}},
			`leases.coordination.k8s.io is forbidden: can only access node lease with the same name as the requesting node`},
		{"lease elsewhere", node1, Attributes{Operation: Update, Resource: leasesR, Namespace: "default", Name: "node-1", Object: &coordinationv1.Lease{}},
			`leases.coordination.k8s.io "node-1" is forbidden: can only access leases in the "kube-node-lease" system namespace`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			err := p.Validate(tc.ctx, &a)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
