package agent

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// renewLease renews the node's Lease in kube-node-lease, creating it when
// missing, as the kubelet's lease controller: an update of the lease it
// last wrote, and on any failure a fresh read next time.
func (n *node) renewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	now := metav1.NewMicroTime(n.a.clock.Now())
	n.mu.Lock()
	cur := n.lease
	uid := n.uid
	n.mu.Unlock()

	if cur == nil {
		got, err := leases.Get(ctx, n.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := leases.Create(ctx, n.newLease(now), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create lease %s: %w", n.name, err)
			}
			n.setLease(created)
			return nil
		case err != nil:
			return fmt.Errorf("get lease %s: %w", n.name, err)
		}
		cur = got
	}
	next := cur.DeepCopy()
	next.Spec.HolderIdentity = ptr.To(n.name)
	next.Spec.LeaseDurationSeconds = ptr.To(int32(n.a.cfg.LeaseDuration.Seconds()))
	next.Spec.RenewTime = &now
	if len(next.OwnerReferences) == 0 && uid != "" {
		next.OwnerReferences = n.ownerReferences(uid)
	}
	updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		n.setLease(nil)
		return fmt.Errorf("renew lease %s: %w", n.name, err)
	}
	n.setLease(updated)
	return nil
}

func (n *node) setLease(l *coordinationv1.Lease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lease = l
}

func (n *node) ownerReferences(uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       n.name,
		UID:        uid,
	}}
}

func (n *node) newLease(now metav1.MicroTime) *coordinationv1.Lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: v1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(n.name),
			LeaseDurationSeconds: ptr.To(int32(n.a.cfg.LeaseDuration.Seconds())),
			RenewTime:            &now,
		},
	}
	if n.uid != "" {
		l.OwnerReferences = n.ownerReferences(n.uid)
	}
	return l
}
