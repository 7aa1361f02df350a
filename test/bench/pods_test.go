package bench

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podSeq makes pod names unique within the process, across the b.N=1
// probe run and the measured run of every benchmark.
var podSeq atomic.Int64

// newPodName returns a fresh pod name with prefix.
func newPodName(prefix string) string {
	return fmt.Sprintf("%s-%06d", prefix, podSeq.Add(1))
}

// podBody is the JSON request body of a realistic pod of about 1 KiB: an
// application container and a sidecar, with images, resource requests and
// limits, ports, environment, labels and an annotation. app is its "app"
// label.
func podBody(name, app string) []byte {
	q := resource.MustParse
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"app":                          app,
				"app.kubernetes.io/name":       "checkout",
				"app.kubernetes.io/component":  "api",
				"pod-template-hash":            "7d4b9c8f6d",
				"app.kubernetes.io/managed-by": "corekube-bench",
			},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true",
				"prometheus.io/port":   "9090",
			},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{
				{
					Name:  "app",
					Image: "registry.example.com/shop/checkout:1.27.3",
					Ports: []v1.ContainerPort{
						{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP},
						{Name: "metrics", ContainerPort: 9090, Protocol: v1.ProtocolTCP},
					},
					Env: []v1.EnvVar{
						{Name: "LOG_LEVEL", Value: "info"},
						{Name: "DB_HOST", Value: "postgres.shop.svc.cluster.local"},
						{Name: "CACHE_TTL_SECONDS", Value: "300"},
					},
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("256Mi")},
						Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("512Mi")},
					},
				},
				{
					Name:  "proxy",
					Image: "registry.example.com/infra/envoy:v1.31.2",
					Args:  []string{"--config-path", "/etc/envoy/envoy.yaml"},
					Ports: []v1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: v1.ProtocolTCP}},
					Env:   []v1.EnvVar{{Name: "ENVOY_UID", Value: "1337"}},
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: q("50m"), v1.ResourceMemory: q("64Mi")},
						Limits:   v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("128Mi")},
					},
				},
			},
		},
	}
	data, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return data
}

// podBodies pre-encodes n bodies with fresh names.
func podBodies(prefix string, n int, app func(i int) string) (names []string, bodies [][]byte) {
	names = make([]string, n)
	bodies = make([][]byte, n)
	for i := range n {
		names[i] = newPodName(prefix)
		bodies[i] = podBody(names[i], app(i))
	}
	return names, bodies
}
