package podresources

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(name string, req v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req}}
}

func sidecar(name string, req v1.ResourceList) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c := ctr(name, req)
	c.RestartPolicy = &always
	return c
}

func hugeOrExtended(name v1.ResourceName) bool { return IsHugePages(name) || IsExtended(name) }

func TestPodRequests(t *testing.T) {
	const gpu, huge, vols = "example.com/gpu", "hugepages-2Mi", "attachable-volumes-csi-x"
	all := func(name v1.ResourceName) bool { return hugeOrExtended(name) || IsAttachableVolumes(name) }
	tests := []struct {
		name string
		spec v1.PodSpec
		opts Options
		want Resources
	}{
		{
			name: "empty pod",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil)}},
			want: Resources{},
		},
		{
			name: "containers add up",
			spec: v1.PodSpec{Containers: []v1.Container{
				ctr("a", rl("cpu", "500m", "memory", "1Ki", "ephemeral-storage", "1k")),
				ctr("b", rl("cpu", "1", "memory", "1Ki")),
			}},
			want: Resources{MilliCPU: 1500, Memory: 2048, EphemeralStorage: 1000},
		},
		{
			name: "init containers: the largest, per resource",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("i1", rl("cpu", "2", "memory", "1Ki")), ctr("i2", rl("cpu", "1", "memory", "4Ki"))},
				Containers:     []v1.Container{ctr("a", rl("cpu", "500m", "memory", "2Ki"))},
			},
			want: Resources{MilliCPU: 2000, Memory: 4096},
		},
		{
			name: "sidecars run beside later init containers and the app",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					ctr("before", rl("cpu", "2")), // runs alone: 2
					sidecar("side", rl("cpu", "1")),
					ctr("init", rl("cpu", "3")), // beside the sidecar: 4
				},
				Containers: []v1.Container{ctr("app", rl("cpu", "1"))}, // 1 + 1
			},
			want: Resources{MilliCPU: 4000},
		},
		{
			name: "sidecars alone outweigh init containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar("s1", rl("memory", "3Ki")), sidecar("s2", rl("memory", "3Ki")), ctr("i", rl("memory", "1Ki"))},
				Containers:     []v1.Container{ctr("app", rl("memory", "1Ki"))},
			},
			want: Resources{Memory: 7 * 1024},
		},
		{
			name: "overhead on top",
			spec: v1.PodSpec{
				Overhead:       rl("cpu", "250m", gpu, "1"),
				InitContainers: []v1.Container{ctr("i", rl("cpu", "2"))},
				Containers:     []v1.Container{ctr("a", rl("cpu", "1", gpu, "2"))},
			},
			opts: Options{Scalar: hugeOrExtended},
			want: Resources{MilliCPU: 2250, Scalar: map[v1.ResourceName]int64{gpu: 3}},
		},
		{
			name: "no scalar: only cpu, memory, ephemeral storage",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "1", gpu, "2", huge, "4Mi", "pods", "3"))}},
			want: Resources{MilliCPU: 1000},
		},
		{
			name: "hugepages and extended, not attachable volumes nor requests.* nor kubernetes.io",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl(
				gpu, "2", huge, "4Mi", vols, "1", "requests.example.com/x", "1", "kubernetes.io/x", "1", "example.kubernetes.io/x", "1"))}},
			opts: Options{Scalar: hugeOrExtended},
			want: Resources{Scalar: map[v1.ResourceName]int64{gpu: 2, huge: 4 << 20}},
		},
		{
			name: "scheduler's scalars: attachable volumes too",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl(gpu, "2", huge, "4Mi", vols, "1"))}},
			opts: Options{Scalar: all},
			want: Resources{Scalar: map[v1.ResourceName]int64{gpu: 2, huge: 4 << 20, vols: 1}},
		},
		{
			name: "skipped container requests, not overhead",
			spec: v1.PodSpec{
				Overhead:       rl(gpu, "1"),
				InitContainers: []v1.Container{ctr("i", rl(gpu, "5", "cpu", "1"))},
				Containers:     []v1.Container{ctr("a", rl(gpu, "2", huge, "2Mi"))},
			},
			opts: Options{Scalar: hugeOrExtended, SkipContainerRequest: func(name v1.ResourceName) bool { return name == gpu }},
			want: Resources{MilliCPU: 1000, Scalar: map[v1.ResourceName]int64{gpu: 1, huge: 2 << 20}},
		},
		{
			name: "non-missing requests fill in what a container does not name",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("i", rl("cpu", "0"))},
				Containers:     []v1.Container{ctr("a", nil), ctr("b", rl("cpu", "1"))},
			},
			opts: Options{NonMissingContainerRequests: rl("cpu", "100m", "memory", "200Mi")},
			// containers: 100m+1 cpu, 2*200Mi; init: 0 cpu (named), 200Mi.
			want: Resources{MilliCPU: 1100, Memory: 400 << 20},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequests(&v1.Pod{Spec: tc.spec}, tc.opts)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PodRequests = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestArithmetic(t *testing.T) {
	const a, b = v1.ResourceName("example.com/a"), v1.ResourceName("hugepages-1Gi")
	sc := func(kv ...any) map[v1.ResourceName]int64 {
		if len(kv) == 0 {
			return nil
		}
		m := map[v1.ResourceName]int64{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(v1.ResourceName)] = int64(kv[i+1].(int))
		}
		return m
	}
	tests := []struct {
		name string
		op   func(r *Resources, o Resources)
		r, o Resources
		want Resources
	}{
		{"add", (*Resources).Add,
			Resources{MilliCPU: 1, Memory: 2, EphemeralStorage: 3, Scalar: sc(a, 1)},
			Resources{MilliCPU: 10, Memory: 20, EphemeralStorage: 30, Scalar: sc(a, 2, b, 5)},
			Resources{MilliCPU: 11, Memory: 22, EphemeralStorage: 33, Scalar: sc(a, 3, b, 5)}},
		{"add to nothing", (*Resources).Add,
			Resources{}, Resources{Scalar: sc(a, 2)}, Resources{Scalar: sc(a, 2)}},
		{"sub drops what reaches zero", (*Resources).Sub,
			Resources{MilliCPU: 11, Memory: 22, EphemeralStorage: 33, Scalar: sc(a, 3, b, 5)},
			Resources{MilliCPU: 10, Memory: 20, EphemeralStorage: 30, Scalar: sc(a, 3, b, 2)},
			Resources{MilliCPU: 1, Memory: 2, EphemeralStorage: 3, Scalar: sc(b, 3)}},
		{"sub below zero", (*Resources).Sub,
			Resources{MilliCPU: 1}, Resources{MilliCPU: 2, Scalar: sc(a, 1)},
			Resources{MilliCPU: -1, Scalar: sc(a, -1)}},
		{"setMax per resource", (*Resources).SetMax,
			Resources{MilliCPU: 5, Memory: 1, EphemeralStorage: 7, Scalar: sc(a, 4, b, 1)},
			Resources{MilliCPU: 2, Memory: 9, EphemeralStorage: 7, Scalar: sc(a, 3, b, 6)},
			Resources{MilliCPU: 5, Memory: 9, EphemeralStorage: 7, Scalar: sc(a, 4, b, 6)}},
		{"setMax into nothing", (*Resources).SetMax,
			Resources{}, Resources{Scalar: sc(a, 3)}, Resources{Scalar: sc(a, 3)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o.Clone()
			tc.op(&tc.r, tc.o)
			if !reflect.DeepEqual(tc.r, tc.want) {
				t.Errorf("got %+v, want %+v", tc.r, tc.want)
			}
			if !reflect.DeepEqual(tc.o, o) {
				t.Errorf("operand changed: %+v, was %+v", tc.o, o)
			}
		})
	}

	var r Resources
	if !r.IsZero() {
		t.Error("zero Resources not IsZero")
	}
	r.AddScalar(a, 1)
	if r.IsZero() {
		t.Error("IsZero with a scalar")
	}
	c := r.Clone()
	c.AddScalar(a, 1)
	if r.Scalar[a] != 1 {
		t.Errorf("Clone shares its scalar map: %v", r.Scalar)
	}
	r.AddScalar(a, -1)
	if !r.IsZero() || len(r.Scalar) != 0 {
		t.Errorf("scalar back to 0 not dropped: %+v", r)
	}

	var alloc Resources
	alloc.AddList(rl("cpu", "1500m", "memory", "1Gi", "ephemeral-storage", "10Gi", "pods", "110", string(a), "4", string(b), "2Gi"), IsExtended)
	want := Resources{MilliCPU: 1500, Memory: 1 << 30, EphemeralStorage: 10 << 30, Scalar: sc(a, 4)}
	if !reflect.DeepEqual(alloc, want) {
		t.Errorf("AddList = %+v, want %+v", alloc, want)
	}
}
