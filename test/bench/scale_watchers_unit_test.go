package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestClosedWatchers(t *testing.T) {
	log := `time=2026-11-27T06:09:28.016Z level=INFO msg="closing a watcher that fell behind" cache=/nodes/ buffer=1000 client=kubernetes-admin
time=2026-11-27T06:09:28.020Z level=INFO msg="something else" client=system:kube-scheduler
time=2026-11-27T06:12:52.707Z level=INFO msg="closing a watcher that fell behind" cache=/pods/ buffer=1000 client=kubernetes-admin
time=2026-11-27T06:12:53.962Z level=INFO msg="closing a watcher that fell behind" cache=/pods/ buffer=1000 client=kubernetes-admin
time=2026-11-27T06:13:00.000Z level=INFO msg="closing a watcher that fell behind" cache=/pods/ buffer=1000 client="system:node:node 1" index=node-1
time=2026-11-27T06:13:01.000Z level=INFO msg="closing a watcher that fell behind" cache=/pods/ buffer=1000 client=system:kube-scheduler
time=2026-11-27T06:14:01.000Z level=INFO msg="a watcher fell behind its buffer; it goes on from the window" cache=/pods/ buffer=1000 client=kubernetes-admin revision=7
`
	path := filepath.Join(t.TempDir(), "apiserver.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := closedWatchers(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]watcherCloses{
		"kubernetes-admin /nodes/":     {1, "06:09:28", "06:09:28"},
		"kubernetes-admin /pods/":      {2, "06:12:52", "06:12:53"},
		"system:node:node 1 /pods/":    {1, "06:13:00", "06:13:00"},
		"system:kube-scheduler /pods/": {1, "06:13:01", "06:13:01"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("closedWatchers = %v, want %v", got, want)
	}
	lagged, err := laggedWatchers(path)
	if err != nil {
		t.Fatal(err)
	}
	if w := map[string]watcherCloses{"kubernetes-admin /pods/": {1, "06:14:01", "06:14:01"}}; !reflect.DeepEqual(lagged, w) {
		t.Errorf("laggedWatchers = %v, want %v", lagged, w)
	}
	if got, w := watcherLines(lagged), []string{"kubernetes-admin /pods/: 1 (06:14:01 to 06:14:01 UTC)"}; !reflect.DeepEqual(got, w) {
		t.Errorf("watcherLines = %v, want %v", got, w)
	}
	if got := orNone(watcherLines(nil)); got != "none" {
		t.Errorf("no watchers read %q", got)
	}
	own, cluster := splitClosedWatchers(got, "kubernetes-admin")
	if w := []string{"kubernetes-admin /nodes/: 1 (06:09:28 to 06:09:28 UTC)", "kubernetes-admin /pods/: 2 (06:12:52 to 06:12:53 UTC)"}; !reflect.DeepEqual(own, w) {
		t.Errorf("own = %v, want %v", own, w)
	}
	if w := []string{"system:kube-scheduler /pods/: 1 (06:13:01 to 06:13:01 UTC)", "system:node:node 1 /pods/: 1 (06:13:00 to 06:13:00 UTC)"}; !reflect.DeepEqual(cluster, w) {
		t.Errorf("cluster = %v, want %v", cluster, w)
	}
}
