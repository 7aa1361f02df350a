package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/informertest"
	"github.com/corekube/corekube/test/testserver"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// startedLog is a slog.Handler that passes on the messages ending in
// " started", which each controller logs once its caches have synced.
type startedLog chan string

func (h startedLog) Enabled(context.Context, slog.Level) bool { return true }
func (h startedLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h startedLog) WithGroup(string) slog.Handler            { return h }

func (h startedLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasSuffix(r.Message, " started") {
		select {
		case h <- r.Message:
		default: // the test reads a handful; never block a controller
		}
	}
	return nil
}

// TestControllersShareInformers checks that the loops of `corekube
// controllers` (node lifecycle, pod GC, disruption: all three read pods
// and two read nodes) list and watch pods once, and nodes once.
func TestControllersShareInformers(t *testing.T) {
	testserver.SkipShort(t) // a server and every controller loop
	srv := testserver.StartMemory(t)
	var rec informertest.Recorder
	started := make(startedLog, 16)
	loops, err := newLoops(rec.Config(srv.Config), namespaceLoop|controllerLoops, slog.New(started), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waitLoops := runLoops(ctx, loops)
	t.Cleanup(func() {
		cancel()
		waitLoops()
	})

	// Once every controller has logged that its caches synced, every pod
	// and node informer of the process has listed: a second informer
	// would show as a second list even before its watch.
	want := map[string]bool{"node lifecycle controller started": true, "pod GC started": true, "disruption controller started": true}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case msg := <-started:
			delete(want, msg)
		case <-deadline:
			t.Fatalf("controllers not started after 30s; waiting for %v", want)
		}
	}
	for _, path := range []string{"/api/v1/pods", "/api/v1/nodes"} {
		// The watch follows the list.
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return watches(rec.Requests(path)) > 0, nil
		}); err != nil {
			t.Fatalf("no watch on %s: %v", path, err)
		}
		reqs := rec.Requests(path)
		if n := rec.Lists(path) + rec.WatchLists(path); n != 1 {
			t.Errorf("%s: %d lists, want 1 (one shared informer): %v", path, n, reqs)
		}
		if n := watches(reqs); n != 1 {
			t.Errorf("%s: %d watches, want 1 (one shared informer): %v", path, n, reqs)
		}
	}
}

func watches(reqs []informertest.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Watch() {
			n++
		}
	}
	return n
}

// TestServiceAccountControllerAlwaysRuns: `apiserver` (controlLoops
// without all) and `up` both run the ServiceAccounts controller, on
// informers of the shared factory, without which no pod is admitted.
func TestServiceAccountControllerAlwaysRuns(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	for _, all := range []bool{false, true} {
		loops, err := controlLoops(cfg, all, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, l := range loops {
			names[l.name] = true
		}
		if !names["service account controller"] || !names["shared informers"] || !names["namespace controller"] {
			t.Errorf("all=%v: loops %v, want the namespace and service account controllers and the shared informers", all, names)
		}
		// Release what the constructors built (queues).
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		runLoops(ctx, loops)()
	}
}
