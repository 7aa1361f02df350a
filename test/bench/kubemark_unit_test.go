package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The kubemark benchmark's arithmetic and log reading, checked without a
// cluster.

func TestHollowPodsFit(t *testing.T) {
	cfg := scaleConfig{nodes: 50, pods: 1500, cpuRequest: hollowPodCPU, memoryRequest: "64Mi"}
	if err := hollowPodsFit(cfg, simConfig{latencyPods: 500}); err != nil {
		t.Errorf("40 pods a node of 10m, 64Mi: %v", err)
	}
	// 58 pods of 64Mi fill 3740Mi; 59 do not.
	cfg.pods = 58 * 50
	if err := hollowPodsFit(cfg, simConfig{}); err != nil {
		t.Errorf("58 pods a node: %v", err)
	}
	if err := hollowPodsFit(cfg, simConfig{latencyPods: 1}); err == nil {
		t.Error("59 pods of 64Mi on a node of 3740Mi allocatable: fits, want an error")
	}
	// bench-kwok's 100m: ten a node.
	cfg.pods, cfg.cpuRequest = 550, "100m"
	if err := hollowPodsFit(cfg, simConfig{}); err == nil {
		t.Error("11 pods of 100m on a node of one CPU: fits, want an error")
	}
}

func TestFoldHollow(t *testing.T) {
	got := foldHollow([]procResult{
		{Name: "apiserver", CPUPercent: 5, RSSMeanMiB: 100},
		{Name: "hollow-1", CPUPercent: 1, RSSMeanMiB: 70},
		{Name: "hollow-2", CPUPercent: 2, RSSMeanMiB: 80},
		{Name: "controllers", CPUPercent: 3, RSSMeanMiB: 50},
	})
	want := []procResult{
		{Name: "apiserver", CPUPercent: 5, RSSMeanMiB: 100},
		{Name: "hollow x2", CPUPercent: 3, RSSMeanMiB: 150},
		{Name: "controllers", CPUPercent: 3, RSSMeanMiB: 50},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("foldHollow: %v, want %v", got, want)
	}
	if r := (simResult{mode: "kubemark"}); !isSimProc(r.mode, "hollow-7") || isSimProc(r.mode, "apiserver") {
		t.Error("isSimProc: the hollow kubelets are the simulator, the apiserver is not")
	}
}

func TestHollowProblems(t *testing.T) {
	dir := t.TempDir()
	logs := map[string]string{
		"hollow-1.log": `I1127 18:00:00.000001    1234 kubelet.go:1] "Started"
E1127 18:00:01.000001    1234 kubelet_node_status.go:466] "Error getting the current node from lister" err="node \"hollow-node-1\" not found"
E1127 18:00:02.000001    1234 reflector.go:158] "Unhandled Error" err="failed to list *v1.Foo: the server could not find the requested resource"
`,
		"hollow-2.log": `E1127 18:00:01.500000    4321 kubelet_node_status.go:466] "Error getting the current node from lister" err="node \"hollow-node-2\" not found"
W1127 18:00:03.000000    4321 container_log_manager.go:286] "Failed to stat container log" containerID="scale-00012_scale-bench_0a1b2c3d-0000-4000-8000-00000000abcd_0_nginx_0"
`,
	}
	var paths []string
	for name, data := range logs {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, missing, err := hollowProblems(paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || !strings.HasPrefix(out[0], `2x E kubelet_node_status.go:N] "Error getting the current node from lister" err="node \"hollow-node-N\" not found"`) {
		t.Errorf("problems: %q, want 3 kinds, the node lister's twice first", out)
	}
	if !slices.ContainsFunc(out, func(l string) bool { return strings.Contains(l, "scale-N_scale-bench_UID_N_nginx_N") }) {
		t.Errorf("problems: %q, want the pod's name and UID masked", out)
	}
	if len(missing) != 1 || !strings.Contains(missing[0], missingAPI) {
		t.Errorf("missing APIs: %q, want the reflector's", missing)
	}
	if _, _, err := hollowProblems([]string{filepath.Join(dir, "none.log")}); err == nil {
		t.Error("a log that is not there: no error")
	}
}
