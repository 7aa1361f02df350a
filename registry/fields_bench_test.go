package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The cost of managedFields at the Store, on a real etcd: what tracking
// adds to a create and to a status update, and a server-side apply beside
// a strategic merge patch of the same change. Run with e.g.
//
//	go test ./registry/ -run '^$' -bench Fields -benchtime 2000x
//
// B/pod is the size of the stored pod (its JSON, as etcd holds it).

// benchNames makes pod names unique across sub-benchmarks and their runs.
var benchNames atomic.Int64

func benchPodName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, benchNames.Add(1))
}

// benchPod is a small but typical pod: labels, two containers with
// ports, resources and an env var.
func benchPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench", "tier": "web"}},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "app", Image: "nginx:1.27", Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 443}},
				Env: []v1.EnvVar{{Name: "MODE", Value: "bench"}}},
			{Name: "sidecar", Image: "busybox", Command: []string{"sleep", "infinity"}},
		}},
	}
}

// tracking names the sub-benchmarks: managedFields tracking on or off.
var tracking = []struct {
	name string
	on   bool
}{{"managedFields-off", false}, {"managedFields-on", true}}

func storedSize(b *testing.B, obj runtime.Object) {
	data, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data)), "B/pod")
}

// BenchmarkFieldsCreate: Store.Create of a pod.
func BenchmarkFieldsCreate(b *testing.B) {
	if _, err := podTypes(); err != nil {
		b.Fatal(err)
	}
	st := newFieldsEtcd(b)
	for _, tr := range tracking {
		b.Run(tr.name, func(b *testing.B) {
			store, _ := newPodStores(st, tr.on, registry.Options{})
			ctx := context.Background()
			opts := registry.CreateOptions{FieldManager: "bench"}
			// The first write builds the field manager: not timed.
			if _, err := store.Create(ctx, "bench", benchPod(benchPodName("warm")), opts); err != nil {
				b.Fatal(err)
			}
			var last runtime.Object
			b.ReportAllocs()
			for b.Loop() {
				out, err := store.Create(ctx, "bench", benchPod(benchPodName("create")), opts)
				if err != nil {
					b.Fatal(err)
				}
				last = out
			}
			storedSize(b, last)
		})
	}
}

// BenchmarkFieldsUpdateStatus: Store.Update of pods/status, the kubelet's
// write: one condition changes each time.
func BenchmarkFieldsUpdateStatus(b *testing.B) {
	if _, err := podTypes(); err != nil {
		b.Fatal(err)
	}
	st := newFieldsEtcd(b)
	for _, tr := range tracking {
		b.Run(tr.name, func(b *testing.B) {
			store, status := newPodStores(st, tr.on, registry.Options{})
			ctx := context.Background()
			name := benchPodName("status")
			if _, err := store.Create(ctx, "bench", benchPod(name), registry.CreateOptions{FieldManager: "bench"}); err != nil {
				b.Fatal(err)
			}
			i := 0
			change := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				pod := cur.(*v1.Pod)
				pod.Status.Phase = v1.PodRunning
				pod.Status.Conditions = []v1.PodCondition{
					{Type: v1.PodScheduled, Status: v1.ConditionTrue},
					{Type: v1.PodReady, Status: v1.ConditionStatus([]string{"True", "False"}[i%2]), Message: fmt.Sprint("probe ", i)},
				}
				return pod, nil
			}
			opts := registry.UpdateOptions{FieldManager: "kubelet"}
			var last runtime.Object
			b.ReportAllocs()
			for b.Loop() {
				i++
				out, _, err := status.Update(ctx, "bench", name, change, opts)
				if err != nil {
					b.Fatal(err)
				}
				last = out
			}
			storedSize(b, last)
		})
	}
}

// BenchmarkFieldsApplyVsPatch: one label's value changes, by a server-side
// apply of the pod's configuration (YAML, as kubectl sends it) or by a
// strategic merge patch (as the PATCH handler applies it), each decoded
// per request as the handlers do.
func BenchmarkFieldsApplyVsPatch(b *testing.B) {
	if _, err := podTypes(); err != nil {
		b.Fatal(err)
	}
	st := newFieldsEtcd(b)
	const config = `
metadata:
  labels: {app: bench, tier: web, version: "%d"}
spec:
  containers:
  - name: app
    image: nginx:1.27
    ports: [{containerPort: 80}, {containerPort: 443}]
    env: [{name: MODE, value: bench}]
  - name: sidecar
    image: busybox
    command: [sleep, infinity]
`
	b.Run("apply", func(b *testing.B) {
		store, _ := newPodStores(st, true, registry.Options{})
		ctx := context.Background()
		name := benchPodName("apply")
		opts := registry.ApplyOptions{FieldManager: "bench"}
		if _, _, err := store.Apply(ctx, "bench", name, applyConfig(b, name, fmt.Sprintf(config, 0)), opts); err != nil {
			b.Fatal(err)
		}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			if _, _, err := store.Apply(ctx, "bench", name, applyConfig(b, name, fmt.Sprintf(config, i)), opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tr := range tracking {
		b.Run("strategic-merge-patch/"+tr.name, func(b *testing.B) {
			store, _ := newPodStores(st, tr.on, registry.Options{})
			ctx := context.Background()
			name := benchPodName("smp")
			if _, err := store.Create(ctx, "bench", benchPod(name), registry.CreateOptions{FieldManager: "bench"}); err != nil {
				b.Fatal(err)
			}
			i := 0
			patch := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				original, err := json.Marshal(cur)
				if err != nil {
					return nil, err
				}
				patched, err := strategicpatch.StrategicMergePatch(original,
					[]byte(fmt.Sprintf(`{"metadata":{"labels":{"version":"%d"}}}`, i)), &v1.Pod{})
				if err != nil {
					return nil, err
				}
				out := &v1.Pod{}
				return out, json.Unmarshal(patched, out)
			}
			opts := registry.UpdateOptions{FieldManager: "bench"}
			b.ReportAllocs()
			for b.Loop() {
				i++
				if _, _, err := store.Update(ctx, "bench", name, patch, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
