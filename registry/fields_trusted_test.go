package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/openapi"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/leases"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// leaseTypes is structured-merge-diff's view of leases.
var leaseTypes = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	st := leases.NewStrategy()
	return openapi.TypeConverter([]openapi.Resource{{Info: st.Info(), Object: st.New(), List: st.NewList()}})
})

// trustedStep is one write of a sequence run with the live object
// converted with and without validation.
type trustedStep struct {
	desc string
	run  func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error)
}

type trustedEnv struct {
	pods, status, leases *registry.Store
}

func podUpdate(manager string, status bool, change func(*v1.Pod)) func(*testing.T, *trustedEnv, string) (runtime.Object, error) {
	return func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error) {
		store := e.pods
		if status {
			store = e.status
		}
		out, _, err := store.Update(t.Context(), "trusted", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			change(cur.(*v1.Pod))
			return cur, nil
		}, registry.UpdateOptions{FieldManager: manager})
		return out, err
	}
}

func leaseUpdate(manager string, change func(*coordinationv1.Lease)) func(*testing.T, *trustedEnv, string) (runtime.Object, error) {
	return func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error) {
		out, _, err := e.leases.Update(t.Context(), "trusted", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			change(cur.(*coordinationv1.Lease))
			return cur, nil
		}, registry.UpdateOptions{FieldManager: manager})
		return out, err
	}
}

func conditions(ready string, msg string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: v1.ConditionStatus(ready), Message: msg},
		}
	}
}

// TestFieldsTrustedLiveSameManagedFields runs sequences of writes (lease
// renewals, pods/status updates changing and not changing fields, spec
// updates by several managers, apply then update, updates changing
// nothing) twice: once validating the live object's typed form, as
// structured-merge-diff does, once trusting it. The managedFields after
// every write must be the same bytes, times aside.
func TestFieldsTrustedLiveSameManagedFields(t *testing.T) {
	if _, err := podTypes(); err != nil {
		t.Fatal(err)
	}
	if _, err := leaseTypes(); err != nil {
		t.Fatal(err)
	}
	st := newTestStorage(t)
	podStore, statusStore := newPodStores(st, true, registry.Options{})
	leaseStore := registry.NewStore(st, leases.NewStrategy(), registry.Options{TypeConverter: leaseTypes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e := &trustedEnv{pods: podStore, status: statusStore, leases: leaseStore}

	createPod := trustedStep{"create pod", func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error) {
		p := benchPod(name)
		p.Namespace = "trusted"
		return e.pods.Create(t.Context(), "trusted", p, registry.CreateOptions{FieldManager: "creator"})
	}}
	renew := func(holder string, sec int) trustedStep {
		return trustedStep{fmt.Sprintf("renew by %s at %d", holder, sec), leaseUpdate(holder, func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = &holder
			d := int32(40)
			l.Spec.LeaseDurationSeconds = &d
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(1_700_000_000+int64(sec), 0)}
		})}
	}
	sequences := map[string][]trustedStep{
		"lease renewals": {
			{"create lease", func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error) {
				holder, d := "kubelet", int32(40)
				return e.leases.Create(t.Context(), "trusted", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "trusted"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d}}, registry.CreateOptions{FieldManager: "kubelet"})
			}},
			renew("kubelet", 1), renew("kubelet", 2), renew("kubelet", 2), renew("kubelet", 3),
			renew("other-holder", 4), renew("kubelet", 5),
			{"label by kubectl", leaseUpdate("kubectl", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"a": "b"} })},
			renew("kubelet", 6),
			{"no change by kubectl", leaseUpdate("kubectl", func(*coordinationv1.Lease) {})},
		},
		"pods/status": {
			createPod,
			{"status ready", podUpdate("kubelet", true, conditions("True", "ok"))},
			{"status unchanged", podUpdate("kubelet", true, conditions("True", "ok"))},
			{"status not ready", podUpdate("kubelet", true, conditions("False", "probe failed"))},
			{"status by another manager", podUpdate("other", true, func(p *v1.Pod) { p.Status.PodIP = "10.0.0.1" })},
			{"status with spec change (reset)", podUpdate("kubelet", true, func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:2"; p.Status.Message = "m" })},
			{"status no change", podUpdate("kubelet", true, func(*v1.Pod) {})},
		},
		"spec updates": {
			createPod,
			{"label by a", podUpdate("a", false, setLabel("x", "1"))},
			{"label by b", podUpdate("b", false, setLabel("y", "2"))},
			{"b takes a's label", podUpdate("b", false, setLabel("x", "3"))},
			{"image by a", podUpdate("a", false, func(p *v1.Pod) { p.Spec.Containers[1].Image = "busybox:2" })},
			{"no change by a", podUpdate("a", false, func(*v1.Pod) {})},
			{"drop label by b", podUpdate("b", false, func(p *v1.Pod) { delete(p.Labels, "y") })},
			{"status by kubelet", podUpdate("kubelet", true, conditions("True", "ok"))},
			{"annotation by a", podUpdate("a", false, func(p *v1.Pod) { p.Annotations = map[string]string{"k": "v"} })},
		},
		"apply then update": {
			createPod,
			{"apply labels", func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error) {
				out, _, err := e.pods.Apply(t.Context(), "trusted", name, applyConfig(t, name, "metadata: {namespace: trusted, labels: {applied: first, app: bench}}"), registry.ApplyOptions{FieldManager: "applier"})
				return out, err
			}},
			{"update applied label", podUpdate("editor", false, setLabel("applied", "no"))},
			{"update other label", podUpdate("editor", false, setLabel("tier", "db"))},
			{"status", podUpdate("kubelet", true, conditions("True", "ok"))},
			{"re-apply", func(t *testing.T, e *trustedEnv, name string) (runtime.Object, error) {
				out, _, err := e.pods.Apply(t.Context(), "trusted", name, applyConfig(t, name, "metadata: {namespace: trusted, labels: {applied: again}}"), registry.ApplyOptions{FieldManager: "applier", Force: true})
				return out, err
			}},
			{"no change", podUpdate("editor", false, func(*v1.Pod) {})},
		},
	}
	for seq, steps := range sequences {
		t.Run(seq, func(t *testing.T) {
			run := func(trusted bool, name string) []string {
				restore := registry.SetSkipLiveValidation(trusted)
				defer restore()
				before := registry.TrustedConversions()
				var outs []string
				for _, s := range steps {
					obj, err := s.run(t, e, name)
					if err != nil {
						t.Fatalf("%s: %v", s.desc, err)
					}
					outs = append(outs, s.desc+": "+managedBytes(t, obj.DeepCopyObject()))
				}
				if n := registry.TrustedConversions() - before; trusted != (n > 0) {
					t.Errorf("trusted=%v: %d live objects converted without validation", trusted, n)
				}
				return outs
			}
			old := run(false, "old-"+benchPodName("t"))
			if last := old[len(old)-1]; strings.HasSuffix(last, ": null") {
				t.Fatalf("no managedFields to compare: %s", last)
			}
			cur := run(true, "new-"+benchPodName("t"))
			for i := range old {
				if old[i] != cur[i] {
					t.Errorf("step %d managedFields differ:\nvalidated: %s\ntrusted:   %s", i, old[i], cur[i])
				}
			}
		})
	}
}

// managedBytes is obj's managedFields as JSON without their times: the
// two runs happen at different seconds, and which entries get a new time
// follows from their field sets, which are compared. The entries' order
// is their times' (then operation, manager, subresource): without times,
// they are put in the order of the rest.
func managedBytes(t *testing.T, obj runtime.Object) string {
	t.Helper()
	mf := accessorOf(t, obj).GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	sort.SliceStable(mf, func(i, j int) bool {
		p, q := mf[i], mf[j]
		if p.Operation != q.Operation {
			return p.Operation < q.Operation
		}
		if p.Manager != q.Manager {
			return p.Manager < q.Manager
		}
		return p.Subresource < q.Subresource
	})
	b, err := json.Marshal(mf)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func accessorOf(t *testing.T, obj runtime.Object) metav1.Object {
	t.Helper()
	m, ok := obj.(metav1.Object)
	if !ok {
		t.Fatalf("%T has no metadata", obj)
	}
	return m
}

// BenchmarkFieldsTrustedLive: a lease renewal and a pods/status update
// with the live object's typed form validated (as before) and trusted.
func BenchmarkFieldsTrustedLive(b *testing.B) {
	if _, err := podTypes(); err != nil {
		b.Fatal(err)
	}
	if _, err := leaseTypes(); err != nil {
		b.Fatal(err)
	}
	st := newFieldsEtcd(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	podStore, statusStore := newPodStores(st, true, registry.Options{})
	leaseStore := registry.NewStore(st, leases.NewStrategy(), registry.Options{TypeConverter: leaseTypes, Logger: quiet})
	ctx := context.Background()
	for _, mode := range []struct {
		name    string
		trusted bool
	}{{"validated", false}, {"trusted", true}} {
		b.Run("lease-renewal/"+mode.name, func(b *testing.B) {
			defer registry.SetSkipLiveValidation(mode.trusted)()
			name := benchPodName("lease")
			holder, d := "node-1", int32(40)
			if _, err := leaseStore.Create(ctx, "bench", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d}}, registry.CreateOptions{FieldManager: "kubelet"}); err != nil {
				b.Fatal(err)
			}
			i := int64(0)
			renew := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				i++
				cur.(*coordinationv1.Lease).Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(1_700_000_000+i, 0)}
				return cur, nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := leaseStore.Update(ctx, "bench", name, renew, registry.UpdateOptions{FieldManager: "kubelet"}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("pods-status/"+mode.name, func(b *testing.B) {
			defer registry.SetSkipLiveValidation(mode.trusted)()
			name := benchPodName("status")
			if _, err := podStore.Create(ctx, "bench", benchPod(name), registry.CreateOptions{FieldManager: "bench"}); err != nil {
				b.Fatal(err)
			}
			i := 0
			change := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				i++
				conditions([]string{"True", "False"}[i%2], fmt.Sprint("probe ", i))(cur.(*v1.Pod))
				return cur, nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := statusStore.Update(ctx, "bench", name, change, registry.UpdateOptions{FieldManager: "kubelet"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
