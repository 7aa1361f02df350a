package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime/sim"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestParseThresholds(t *testing.T) {
	mi := func(n int64) int64 { return n << 20 }
	for _, tc := range []struct {
		name           string
		hard, soft, gp string
		minReclaim     string
		want           []string // signal=value@grace[+minimum reclaim], against 1000Mi
		err            string
	}{
		{name: "kube default", hard: DefaultEvictionHard,
			want: []string{"imagefs.available=150Mi@0s", "memory.available=100Mi@0s", "nodefs.available=100Mi@0s", "nodefs.inodesFree=50Mi@0s"}},
		{name: "soft with grace", hard: "memory.available<1Gi", soft: "memory.available<2Gi", gp: "memory.available=1m30s",
			want: []string{"memory.available=1Gi@0s", "memory.available=2Gi@1m30s"}},
		{name: "percentage of capacity", hard: "memory.available<10%", want: []string{"memory.available=100Mi@0s"}},
		{name: "0% and 100% are off", hard: "memory.available<0%,nodefs.available<100%"},
		{name: "soft without grace", soft: "memory.available<1Gi", err: "grace period must be specified for the soft eviction threshold memory.available"},
		{name: "unknown signal", hard: "memory.bogus<1Gi", err: "unsupported eviction signal memory.bogus"},
		{name: "unknown grace signal", gp: "memory.bogus=1m", err: "unsupported eviction signal memory.bogus"},
		{name: "over 100%", hard: "nodefs.available<120%", err: "eviction percentage threshold nodefs.available must be <= 100%: 120%"},
		{name: "negative percentage", hard: "nodefs.available<-5%", err: "must be >= 0%"},
		{name: "zero quantity", hard: "memory.available<0", err: "eviction threshold memory.available must be positive: 0"},
		{name: "duplicate", hard: "memory.available<1Gi,memory.available<2Gi", err: "found duplicate eviction threshold for signal memory.available"},
		{name: "not a pair", hard: "memory.available=1Gi", err: "malformed pair"},
		{name: "negative grace", soft: "memory.available<1Gi", gp: "memory.available=-1m", err: "invalid eviction grace period specified: -1m, must be a positive value"},
		{name: "bad quantity", hard: "memory.available<lots", err: "quantities must match"},
		{name: "minimum reclaim on hard and soft", hard: "memory.available<100Mi", soft: "memory.available<200Mi", gp: "memory.available=1m",
			minReclaim: "memory.available=50Mi,nodefs.available=5%",
			want:       []string{"memory.available=100Mi@0s+50Mi", "memory.available=200Mi@1m0s+50Mi"}},
		{name: "minimum reclaim percentage", hard: "memory.available<100Mi", minReclaim: "memory.available=10%",
			want: []string{"memory.available=100Mi@0s+100Mi"}},
		{name: "minimum reclaim 0%", minReclaim: "memory.available=0%", err: "eviction percentage minimum reclaim memory.available must be positive: 0%"},
		{name: "negative minimum reclaim", minReclaim: "memory.available=-1Mi", err: "negative eviction minimum reclaim specified for memory.available"},
		{name: "minimum reclaim signal", minReclaim: "memory.bogus=1Mi", err: "unsupported eviction signal memory.bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseThresholds(tc.hard, tc.soft, tc.gp, tc.minReclaim)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				e := th.signal + "=" + th.value(mi(1000)).String() + "@" + th.grace.String()
				if r := th.resolvedAt(mi(1000)); r != th.value(mi(1000)).Value() {
					e += "+" + resource.NewQuantity(r-th.value(mi(1000)).Value(), resource.BinarySI).String()
				}
				s = append(s, e)
			}
			if strings.Join(s, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
}

func TestConfigEvictionDefaults(t *testing.T) {
	cfg, err := Config{Capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}, EvictionHard: "memory.available<300Mi"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Allocatable[v1.ResourceMemory]; got.Cmp(resource.MustParse("724Mi")) != 0 {
		t.Errorf("allocatable memory %s, want 724Mi (capacity minus the hard threshold)", &got)
	}
	if cfg.EvictionPressureTransitionPeriod != 5*time.Minute || cfg.EvictionMonitoringPeriod != 10*time.Second {
		t.Errorf("defaults: transition %v, monitoring %v", cfg.EvictionPressureTransitionPeriod, cfg.EvictionMonitoringPeriod)
	}
	if _, err := (Config{EvictionSoft: "memory.available<1Gi"}).complete(); err == nil ||
		!strings.Contains(err.Error(), "grace period must be specified") {
		t.Errorf("soft threshold without grace: %v", err)
	}
}

// evPod is a pod with one container per request ("" is none).
func evPod(name string, priority int32, requests ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{Priority: ptr.To(priority)}}
	for i, r := range requests {
		c := v1.Container{Name: "c" + string(rune('0'+i))}
		if r != "" {
			c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(r)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func TestRankMemoryPressure(t *testing.T) {
	mi := func(n int64) int64 { return n << 20 }
	type podUse struct {
		pod   *v1.Pod
		usage int64
	}
	for _, tc := range []struct {
		name string
		pods []podUse
		want string
	}{
		{"over request before priority", []podUse{
			{evPod("guaranteed-low", -10, "500Mi"), mi(100)},
			{evPod("besteffort-high", 1000, ""), mi(10)},
		}, "besteffort-high guaranteed-low"},
		{"then lower priority", []podUse{
			{evPod("high", 100, ""), mi(500)},
			{evPod("low", 1, ""), mi(10)},
		}, "low high"},
		{"then usage above request", []podUse{
			{evPod("small", 0, "100Mi"), mi(150)},
			{evPod("big", 0, "100Mi"), mi(400)},
			{evPod("be", 0, ""), mi(200)},
		}, "big be small"},
		{"within request, larger usage above request first", []podUse{
			{evPod("a", 0, "1Gi"), mi(100)},
			{evPod("b", 0, "200Mi"), mi(150)},
		}, "b a"},
		{"requests summed over containers", []podUse{
			{evPod("two", 0, "100Mi", "100Mi"), mi(150)},
			{evPod("one", 0, "100Mi"), mi(150)},
		}, "one two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cands []evictionCandidate
			for _, p := range tc.pods {
				cands = append(cands, evictionCandidate{pod: p.pod, stats: &sim.PodMemory{Bytes: p.usage}, request: memoryRequest(p.pod)})
			}
			rankMemoryPressure(cands)
			var got []string
			for _, c := range cands {
				got = append(got, c.pod.Name)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("order %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEvictionMessage(t *testing.T) {
	pod := evPod("p", 0, "100Mi", "")
	stats := &sim.PodMemory{Containers: []sim.ContainerMemory{{Name: "c0", Bytes: 50 << 20}, {Name: "c1", Bytes: 123456 << 10}}}
	got := evictionMessage(pod, stats, ptr.To(resource.MustParse("100Mi")), resource.NewQuantity(90000<<10, resource.BinarySI))
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90000Ki. " +
		"Container c1 was using 123456Ki, request is 0, has larger consumption of memory. "
	if got != want {
		t.Errorf("message\n%q, want\n%q", got, want)
	}
}

func TestEvictionAdmit(t *testing.T) {
	n := &node{}
	be := evPod("be", 0, "")
	burstable := evPod("burstable", 0, "10Mi")
	tolerating := evPod("tolerating", 0, "")
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	critical := evPod("critical", systemCriticalPriority, "")
	for _, p := range []*v1.Pod{be, burstable, tolerating, critical} {
		if rej := n.evictionAdmit(p); rej != nil {
			t.Errorf("%s rejected without pressure: %+v", p.Name, rej)
		}
	}
	n.eviction.memoryPressure = true
	rej := n.evictionAdmit(be)
	if rej == nil || rej.reason != "Evicted" || rej.message != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort under memory pressure: %+v", rej)
	}
	for _, p := range []*v1.Pod{burstable, tolerating, critical} {
		if rej := n.evictionAdmit(p); rej != nil {
			t.Errorf("%s rejected under memory pressure: %+v", p.Name, rej)
		}
	}
}
