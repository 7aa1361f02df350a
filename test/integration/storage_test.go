package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// kubeProtobuf is k8s.io/apimachinery's protobuf serializer, which
// kube-apiserver reads etcd with.
var kubeProtobuf = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// TestStorageLayout checks the storage keys (/<resource>/<namespace>/<name>,
// which etcd holds under --etcd-prefix: /registry/pods/NS/NAME as kube),
// that the values are kube's protobuf encoding (its serializer reads them)
// and that an object's resourceVersion is the etcd revision of its key.
func TestStorageLayout(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	node := uniqueName(t, "n")
	type stored struct {
		key string
		rv  string
	}
	var objs []stored
	add := func(key string, m metav1.Object, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, stored{key, m.GetResourceVersion()})
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("p", nil), metav1.CreateOptions{})
	add("/pods/"+ns+"/p", pod, err)
	n, err := cs.CoreV1().Nodes().Create(ctx, newNode(node, nil), metav1.CreateOptions{})
	add("/nodes/"+node, n, err)
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	add("/namespaces/"+ns, nsObj, err)
	ev, err := cs.CoreV1().Events(ns).Create(ctx, newEvent(ns, "e", nil), metav1.CreateOptions{})
	add("/events/"+ns+"/e", ev, err)
	lease, err := cs.CoordinationV1().Leases(ns).Create(ctx, newLease("l", nil), metav1.CreateOptions{})
	add("/leases/"+ns+"/l", lease, err)
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, newPDB("b", nil), metav1.CreateOptions{})
	add("/poddisruptionbudgets/"+ns+"/b", pdb, err)

	for _, o := range objs {
		kv, err := srv.Storage().Get(ctx, o.key)
		if err != nil {
			t.Errorf("etcd key %s: %v", o.key, err)
			continue
		}
		if strconv.FormatInt(kv.Revision, 10) != o.rv {
			t.Errorf("%s: revision %d, object resourceVersion %s", o.key, kv.Revision, o.rv)
		}
		// Stored as kube stores it: its protobuf serializer reads it.
		obj, gvk, err := kubeProtobuf.Decode(kv.Value, nil, nil)
		if err != nil {
			t.Errorf("%s: stored value is not in kube's protobuf encoding: %v", o.key, err)
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Errorf("%s: stored %s has no metadata: %v", o.key, gvk, err)
			continue
		}
		if gvk.Kind == "" || m.GetUID() == "" || m.GetResourceVersion() != "" {
			t.Errorf("%s: stored object lacks kind or uid, or has a resourceVersion: %s %+v", o.key, gvk, m)
		}
	}

	// A failed write leaves etcd as it was.
	before, err := srv.Storage().CurrentRevision(ctx, "/pods/")
	if err != nil {
		t.Fatal(err)
	}
	bad := pod.DeepCopy()
	bad.Spec.RestartPolicy = v1.RestartPolicyNever
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid update: %v", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("p", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("duplicate create: %v", err)
	}
	after, err := srv.Storage().CurrentRevision(ctx, "/pods/")
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("refused writes moved the etcd revision from %d to %d", before, after)
	}
}

// TestSystemMetadata: the server owns uid, creationTimestamp,
// resourceVersion and generation; labels, annotations, finalizers and
// ownerReferences are stored as given.
func TestSystemMetadata(t *testing.T) {
	ns := newNamespace(t)
	leases := cs.CoordinationV1().Leases(ns)
	l := newLease("meta", map[string]string{"l": "1"})
	l.UID = "client-chosen-uid"
	l.CreationTimestamp = metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	l.Annotations = map[string]string{"a": "1"}
	l.Finalizers = []string{holdFinalizer}
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "owner", UID: "owner-uid", Controller: ptr(true)}}
	created, err := leases.Create(t.Context(), l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = leases.Patch(context.Background(), "meta", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if created.UID == "client-chosen-uid" || created.CreationTimestamp.Year() == 2000 {
		t.Errorf("client set uid %s / creationTimestamp %v", created.UID, created.CreationTimestamp)
	}
	if created.Annotations["a"] != "1" || created.Labels["l"] != "1" || len(created.Finalizers) != 1 ||
		len(created.OwnerReferences) != 1 || created.OwnerReferences[0].UID != "owner-uid" {
		t.Errorf("metadata not stored: %+v", created.ObjectMeta)
	}

	// resourceVersion on create is a 400.
	l2 := newLease("with-rv", nil)
	l2.ResourceVersion = "5"
	_, err = leases.Create(t.Context(), l2, metav1.CreateOptions{})
	checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "resourceVersion should not be set on objects to be created")

	// An update cannot move creationTimestamp; another uid is a conflict.
	u := created.DeepCopy()
	u.CreationTimestamp = metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	out, err := leases.Update(t.Context(), u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.CreationTimestamp.Equal(&created.CreationTimestamp) {
		t.Errorf("update moved creationTimestamp to %v", out.CreationTimestamp)
	}
	u = out.DeepCopy()
	u.UID = "another"
	_, err = leases.Update(t.Context(), u, metav1.UpdateOptions{})
	checkStatusErr(t, err, 409, metav1.StatusReasonConflict, "")
}
