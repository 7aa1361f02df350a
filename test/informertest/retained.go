package informertest

import (
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// ReportRetained measures what an informer transform leaves in memory: it
// decodes b.N pods from raw (protobuf, round robin), passes each through
// transform, keeps every result and reports the heap they hold as
// B/pod-kept. The scheduler's and the shared informers' transforms are
// measured this one way so that their numbers compare.
func ReportRetained(b *testing.B, raw [][]byte, transform func(obj any) (any, error)) {
	b.Helper()
	kept := make([]any, b.N)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		pod := &v1.Pod{}
		if err := pod.Unmarshal(raw[i%len(raw)]); err != nil {
			b.Fatal(err)
		}
		obj, err := transform(pod)
		if err != nil {
			b.Fatal(err)
		}
		kept[i] = obj
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/pod-kept")
	runtime.KeepAlive(kept)
}
