package node

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kube's scale envelope: 150,000 pods on 5,000 nodes (30 a node).
const (
	scalePods       = 150000
	scaleNodes      = 5000
	scaleNamespaces = 50
)

// scalePod is pod i of a cluster at kube's scale envelope, as a workload
// controller makes it: named after its ReplicaSet, bound to node i%5,000
// (so a node's pods come from many namespaces), with its ServiceAccount
// (mostly "default"), the kube-api-access projected volume the
// ServiceAccount admission adds (token, the kube-root-ca.crt ConfigMap,
// the namespace through the downward API), and for some a ConfigMap or
// Secret through env or a volume.
func scalePod(i int) *v1.Pod {
	ns := fmt.Sprintf("team-%02d-services", i%scaleNamespaces)
	deploy := fmt.Sprintf("app-%03d-api", (i/scaleNamespaces)%40)
	sa := "default"
	if i%10 < 3 {
		sa = deploy
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%08x-%05x", deploy, uint32(i*2654435761)^0x5bd1e995, i)},
		Spec: v1.PodSpec{
			NodeName:           fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i%scaleNodes/250, i%scaleNodes%250, i%scaleNodes%7),
			ServiceAccountName: sa,
			Volumes: []v1.Volume{{Name: fmt.Sprintf("kube-api-access-%05x", i), VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}}},
			Containers: []v1.Container{{Name: "app", Image: "registry.example.com/app:1.2.3",
				Env: []v1.EnvVar{{Name: "MODE", Value: "production"}}}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	c := &p.Spec.Containers[0]
	switch i % 20 {
	case 0, 1, 2, 3:
		c.EnvFrom = append(c.EnvFrom, v1.EnvFromSource{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: deploy + "-config"}}})
	case 4, 5:
		c.Env = append(c.Env, v1.EnvVar{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: deploy + "-credentials"}, Key: "password"}}})
	case 6:
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: deploy + "-tls"}}})
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// decodedScalePod is scalePod(i) as the server feeds it to the graph:
// encoded and decoded by DecodePod, each string its own allocation.
func decodedScalePod(tb testing.TB, i int) *v1.Pod {
	data, err := json.Marshal(scalePod(i))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := DecodePod(data)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkGraphScale fills a graph with 150,000 decoded pods on 5,000
// nodes and reports the live heap it keeps per pod (bytes/pod, the graph
// kept alive and everything else collected), then times an Upsert (a
// status update, the common watch event, and a move to another node)
// and a decision (a ServiceAccount token, a pod by name, and an object
// no pod of the node uses).
func BenchmarkGraphScale(b *testing.B) {
	before := liveHeap()
	g := NewGraph()
	g.Replace(nil)
	for i := 0; i < scalePods; i++ {
		g.Upsert(decodedScalePod(b, i))
	}
	after := liveHeap()
	runtime.KeepAlive(g)
	perPod := float64(after-before) / scalePods

	const n = 1000
	same := make([]*v1.Pod, n)
	moved := make([]*v1.Pod, n)
	for j := range same {
		i := j * (scalePods / n)
		same[j] = decodedScalePod(b, i)
		moved[j] = decodedScalePod(b, i)
		moved[j].Spec.NodeName = decodedScalePod(b, i+1).Spec.NodeName
	}
	b.Run("heap", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
		}
		b.ReportMetric(perPod, "bytes/pod")
	})
	b.Run("upsert=same", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			g.Upsert(same[i%n])
		}
	})
	b.Run("upsert=move", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			// Alternately away and back, so that the graph stays the same.
			if i/n%2 == 0 {
				g.Upsert(moved[i%n])
			} else {
				g.Upsert(same[i%n])
			}
		}
		for j := range same {
			g.Upsert(same[j])
		}
	})
	p := same[7]
	sa := p.Spec.ServiceAccountName
	for _, bc := range []struct {
		name, kind, objName string
		want                bool
	}{
		{"related=serviceaccount", KindServiceAccount, sa, true},
		{"related=pod", KindPod, p.Name, true},
		{"related=unrelated", KindSecret, "not-used-anywhere", false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if g.Related(p.Spec.NodeName, bc.kind, p.Namespace, bc.objName) != bc.want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}
