package integration

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// nodeClients are node-1's clients: by its client certificate and by
// impersonation from the admin.
func nodeClients(t *testing.T, s *testserver.Server) map[string]kubernetes.Interface {
	t.Helper()
	pair, err := testserver.IssueClient("system:node:node-1", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	cert := rest.CopyConfig(s.Config)
	cert.CertData, cert.KeyData = pair.CertPEM, pair.KeyPEM
	imp := rest.CopyConfig(s.Config)
	imp.Impersonate = rest.ImpersonationConfig{UserName: "system:node:node-1", Groups: []string{"system:nodes"}}
	out := map[string]kubernetes.Interface{}
	for name, c := range map[string]*rest.Config{"cert": cert, "impersonated": imp} {
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = cs
	}
	return out
}

// TestNodeAuthorization: with the default modes (Node,RBAC) and
// NodeRestriction, node-1 reads its Node and pods, writes its own Node and
// the status of its pods, and is refused the rest with kube's messages;
// ServiceAccount tokens follow the pods bound to it.
func TestNodeAuthorization(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) {
		c.EnableAdmissionPlugins = append(c.EnableAdmissionPlugins, "NodeRestriction")
	})
	ctx := context.Background()
	admin := s.Client
	ns := "nodes-test"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod := func(name, node, sa string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		p, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, sa := range []string{"sa1", "sa2"} {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for how, node := range nodeClients(t, s) {
		t.Run(how, func(t *testing.T) {
			mine := mkPod("mine-"+how, "node-1", "sa1")
			theirs := mkPod("theirs-"+how, "node-2", "sa2")
			if _, err := node.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
				t.Errorf("get own node: %v", err)
			}
			checkNodeReads(ctx, t, node, ns, mine, theirs)
			n1, err := node.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n1.Labels = map[string]string{"team": how}
			if _, err := node.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
				t.Errorf("label itself: %v", err)
			}
			_, err = node.CoreV1().Nodes().Patch(ctx, "node-1", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"x"}}}`), metav1.PatchOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`nodes "node-1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool`)
			_, err = node.CoreV1().Nodes().Patch(ctx, "node-2", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2"`)
			err = node.CoreV1().Nodes().Delete(ctx, "node-2", metav1.DeleteOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`nodes "node-2" is forbidden: User "system:node:node-1" cannot delete resource "nodes" in API group "" at the cluster scope`)
			err = node.CoreV1().Pods(ns).Delete(ctx, theirs.Name, metav1.DeleteOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`pods "`+theirs.Name+`" is forbidden: node "node-1" can only delete pods with spec.nodeName set to itself`)
			err = node.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: theirs.Name}})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`pods "`+theirs.Name+`" is forbidden: node node-1 can only evict pods with spec.nodeName set to itself`)
			_, err = node.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rogue"}, Spec: v1.PodSpec{NodeName: "node-1",
				Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`pods "rogue" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-1" can only create mirror pods`)
			err = node.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`namespaces "`+ns+`" is forbidden: User "system:node:node-1" cannot delete resource "namespaces" in API group "" in the namespace "`+ns+`"`)
			theirs.Status.Message = "x"
			_, err = node.CoreV1().Pods(ns).UpdateStatus(ctx, theirs, metav1.UpdateOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`pods "`+theirs.Name+`" is forbidden: node "node-1" can only update pod status for pods with spec.nodeName set to itself`)
			mine.Status.Message = "running"
			if _, err := node.CoreV1().Pods(ns).UpdateStatus(ctx, mine, metav1.UpdateOptions{}); err != nil {
				t.Errorf("own pod status: %v", err)
			}

			// Tokens: only for the ServiceAccount of a pod bound to node-1,
			// bound to that pod.
			tr := func(pod *v1.Pod) *authenticationv1.TokenRequest {
				return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
					APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}
			}
			if _, err := node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa1", tr(mine), metav1.CreateOptions{}); err != nil {
				t.Errorf("token of own pod's SA: %v", err)
			}
			_, err = node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa2", tr(theirs), metav1.CreateOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`serviceaccounts "sa2" is forbidden: User "system:node:node-1" cannot create resource "serviceaccounts/token" in API group "" in the namespace "`+ns+`": no relationship found between node 'node-1' and this object`)
			_, err = node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa1", tr(theirs), metav1.CreateOptions{})
			checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
				`serviceaccounts "sa1" is forbidden: node requested token bound to a pod scheduled on a different node`)

			// The graph follows the pods: bound to node-1, sa2's tokens
			// become reachable; deleted, no longer.
			moved := mkPod("moved-"+how, "node-1", "sa2")
			eventually(t, 10*time.Second, "sa2's token for the pod bound to node-1", func(context.Context) (bool, error) {
				_, err := node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa2", tr(moved), metav1.CreateOptions{})
				return err == nil, nil
			})
			// A bound pod stays until its kubelet confirms: delete at once.
			zero := int64(0)
			if err := node.CoreV1().Pods(ns).Delete(ctx, moved.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatalf("delete own pod: %v", err)
			}
			eventually(t, 10*time.Second, "sa2's token refused once the pod is gone", func(context.Context) (bool, error) {
				_, err := node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa2", tr(theirs), metav1.CreateOptions{})
				return err != nil && containsAll(err.Error(), "no relationship found"), nil
			})
		})
	}
}

// checkNodeReads: as kube's AuthorizeNodeWithSelectors, node-1 lists and
// watches pods only with its own spec.nodeName field selector, gets only
// the pods bound to it, and reads only its own Node (by name or with a
// metadata.name field selector).
func checkNodeReads(ctx context.Context, t *testing.T, node kubernetes.Interface, ns string, mine, theirs *v1.Pod) {
	t.Helper()
	list, err := node.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
	if err != nil {
		t.Errorf("list own pods: %v", err)
	} else {
		for _, p := range list.Items {
			if p.Spec.NodeName != "node-1" {
				t.Errorf("listed %s of %q", p.Name, p.Spec.NodeName)
			}
		}
	}
	w, err := node.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName==node-1", LabelSelector: "app!=x"})
	if err != nil {
		t.Errorf("watch own pods: %v", err)
	} else {
		w.Stop()
	}
	const podsReason = ": can only list/watch pods with spec.nodeName field selector"
	_, err = node.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`pods is forbidden: User "system:node:node-1" cannot list resource "pods" in API group "" in the namespace "`+ns+`"`+podsReason)
	_, err = node.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-2"})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`pods is forbidden: User "system:node:node-1" cannot list resource "pods" in API group "" at the cluster scope`+podsReason)
	_, err = node.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=node-1"})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`pods is forbidden: User "system:node:node-1" cannot watch resource "pods" in API group "" in the namespace "`+ns+`"`+podsReason)
	// An access review with the same selector agrees.
	for sel, want := range map[string]bool{"spec.nodeName=node-1": true, "spec.nodeName=node-2": false, "": false} {
		ra := &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: ns}
		if sel != "" {
			ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{RawSelector: sel}
		}
		r, err := node.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
		if err != nil || r.Status.Allowed != want {
			t.Errorf("can list pods with %q: %+v %v, want %v", sel, r, err, want)
		}
	}
	// The graph learns of the new pod through the watch cache.
	eventually(t, 10*time.Second, "the node's own pod readable", func(context.Context) (bool, error) {
		_, err := node.CoreV1().Pods(ns).Get(ctx, mine.Name, metav1.GetOptions{})
		return err == nil, nil
	})
	_, err = node.CoreV1().Pods(ns).Get(ctx, theirs.Name, metav1.GetOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`pods "`+theirs.Name+`" is forbidden: User "system:node:node-1" cannot get resource "pods" in API group "" in the namespace "`+ns+`": no relationship found between node 'node-1' and this object`)

	if _, err := node.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
		t.Errorf("get own node: %v", err)
	}
	if l, err := node.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-1"}); err != nil || len(l.Items) != 1 {
		t.Errorf("list own node: %v %v", l, err)
	}
	_, err = node.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`nodes "node-2" is forbidden: User "system:node:node-1" cannot get resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object`)
	_, err = node.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`nodes is forbidden: User "system:node:node-1" cannot list resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read all nodes, only its own Node object`)
	_, err = node.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-2"})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`nodes "node-2" is forbidden: User "system:node:node-1" cannot watch resource "nodes" in API group "" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object`)
}

// TestNodeModeOnly: with --authorization-mode=Node alone, a node gets the
// system:node rules and nothing more.
func TestNodeModeOnly(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.AuthorizationModes = []string{"Node"} })
	ctx := context.Background()
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// system:node is in the bootstrap policy, bound to no one (as kube).
	role, err := s.Client.RbacV1().ClusterRoles().Get(ctx, "system:node", metav1.GetOptions{})
	if err != nil || len(role.Rules) == 0 {
		t.Errorf("system:node: %v %v", role, err)
	}
	if b, err := s.Client.RbacV1().ClusterRoleBindings().Get(ctx, "system:node", metav1.GetOptions{}); err == nil {
		t.Errorf("system:node is bound: %v", b.Subjects)
	}
	node := nodeClients(t, s)["cert"]
	if _, err := node.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
		t.Errorf("get own node: %v", err)
	}
	_, err = node.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`secrets is forbidden: User "system:node:node-1" cannot list resource "secrets" in API group "" in the namespace "default": No Object name found`)
}
