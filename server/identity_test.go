package server

import (
	"context"
	"regexp"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestAPIServerIdentityName(t *testing.T) {
	a := apiserverIdentity("host", "127.0.0.1:6443")
	if !regexp.MustCompile(`^apiserver-[a-z2-7]{26}$`).MatchString(a) {
		t.Errorf("identity %q is not apiserver- and 26 lower-case base32 characters", a)
	}
	if b := apiserverIdentity("host", "127.0.0.1:6443"); b != a {
		t.Errorf("same host and address: %q then %q", a, b)
	}
	for _, other := range [][2]string{{"host", "127.0.0.1:6444"}, {"other", "127.0.0.1:6443"}, {"host1", "27.0.0.1:6443"}} {
		if b := apiserverIdentity(other[0], other[1]); b == a {
			t.Errorf("%v has the identity of host at 127.0.0.1:6443", other)
		}
	}
}

// TestIdentityLease: the server keeps its identity lease renewed and
// deletes expired identity leases, not other leases.
func TestIdentityLease(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := Start(ctx, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), UnsafeNoFsync: true, Logger: quietLogger(),
		IdentityLease: IdentityLeaseConfig{RenewInterval: 50 * time.Millisecond, GCPeriod: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	leases := kubernetes.NewForConfigOrDie(srv.LoopbackConfig()).CoordinationV1().Leases("kube-system")

	// Two expired leases, one an identity lease (collected), one not.
	old := metav1.NewMicroTime(time.Now().Add(-2 * time.Hour))
	hour := int32(3600)
	for name, labels := range map[string]map[string]string{
		"apiserver-gone": {IdentityLeaseLabel: "kube-apiserver"},
		"other":          {"app": "x"},
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: coordinationv1.LeaseSpec{RenewTime: &old, LeaseDurationSeconds: &hour}}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var first *metav1.MicroTime
	for {
		own, err := leases.Get(ctx, srv.Identity(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		_, goneErr := leases.Get(ctx, "apiserver-gone", metav1.GetOptions{})
		if err == nil {
			if first == nil {
				first = own.Spec.RenewTime
				if own.Labels[IdentityLeaseLabel] != "kube-apiserver" || own.Labels["kubernetes.io/hostname"] == "" ||
					*own.Spec.LeaseDurationSeconds != 3600 || own.Spec.HolderIdentity == nil {
					t.Fatalf("identity lease: %+v", own)
				}
			}
			if own.Spec.RenewTime.After(first.Time) && apierrors.IsNotFound(goneErr) {
				break // renewed, and the expired identity lease collected
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("identity lease %s never renewed, or expired lease never collected (%v)", srv.Identity(), goneErr)
		case <-time.After(20 * time.Millisecond): // polling the server's loops
		}
	}
	if _, err := leases.Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Errorf("an expired lease without the identity label: %v", err)
	}
}
