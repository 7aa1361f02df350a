package integration

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/informertest"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startInformers starts two pod informers on ns through a client that
// reports to a Recorder: one for every pod, one with informertest.Selector.
func startInformers(t *testing.T, config *rest.Config, ns string) (all, selected *informertest.PodInformer, rec *informertest.Recorder) {
	t.Helper()
	rec = &informertest.Recorder{}
	client, err := kubernetes.NewForConfig(rec.Config(config))
	if err != nil {
		t.Fatal(err)
	}
	all = informertest.Start(t, client, ns, "")
	selected = informertest.Start(t, client, ns, informertest.Selector)
	return all, selected, rec
}

// churn runs informertest.Churn and fails the test on unexpected errors or
// when an operation kind never took effect.
func churn(t *testing.T, client kubernetes.Interface, ns string, opts informertest.ChurnOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	res := informertest.Churn(ctx, client, ns, opts)
	t.Logf("%d operations from %d goroutines in %v: %s", opts.Ops, opts.Workers, time.Since(start).Round(time.Millisecond), res)
	res.Check(t)
}

// TestInformersConverge: SharedInformerFactory pod informers, one for the
// whole namespace and one with a label selector, end up holding exactly
// the server's pods (names, resourceVersions, labels, image, node) after
// 400 concurrent creates, updates, label flips in and out of the selector,
// deletes and bindings; no handler ever sees an object's resourceVersion
// go backwards. Once with the classic LIST then WATCH, once with the
// WatchList protocol (sendInitialEvents, ended by the initial-events-end
// bookmark), which client-go 0.32 uses when WatchListClient is enabled.
func TestInformersConverge(t *testing.T) {
	for _, watchList := range []bool{false, true} {
		t.Run(map[bool]string{false: "ListWatch", true: "WatchList"}[watchList], func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			ns := newNamespace(t)
			for i := range 10 {
				if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), informertest.NewPod(fmt.Sprintf("p%d", i), i%2 == 0), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			all, selected, rec := startInformers(t, cfg, ns)

			// A watch-list without resourceVersion is a consistent read:
			// the informers hold exactly the server's pods as soon as they
			// have synced. (A classic informer lists at resourceVersion
			// "0", from a cache that may lag an instant, as kube's.)
			for _, inf := range []*informertest.PodInformer{all, selected} {
				if watchList {
					inf.CheckConverged(t, cs)
				} else {
					inf.WaitConverged(t, cs, 15*time.Second)
				}
			}
			if c := all.Counts(); c.Added != 10 {
				t.Errorf("informer for every pod: %d initial ADDs, want 10", c.Added)
			}
			if c := selected.Counts(); c.Added != 5 {
				t.Errorf("informer with %s: %d initial ADDs, want 5", informertest.Selector, c.Added)
			}
			checkInitialRequests(t, rec, watchList)

			churn(t, cs, ns, informertest.ChurnOptions{Workers: 16, Ops: 400, Names: 40, Seed: uint64(time.Now().UnixNano())})
			for _, inf := range []*informertest.PodInformer{all, selected} {
				took := inf.WaitConverged(t, cs, 15*time.Second)
				t.Logf("informer %s converged %v after the last write; handlers ran %+v", inf, took.Round(time.Millisecond), inf.Counts())
				inf.CheckMonotonic(t)
			}
			// Label flips moved pods in and out of the selector: the
			// selecting informer saw them arrive and leave.
			if c := selected.Counts(); c.Added <= 5 || c.Deleted == 0 {
				t.Errorf("informer with %s: handlers ran %+v, want pods arriving and leaving", informertest.Selector, c)
			}
			// Nothing in the churn made the informers relist.
			checkInitialRequests(t, rec, watchList)
		})
	}
}

// checkInitialRequests checks how the informers filled their caches: a
// LIST each, or (WatchList) a watch with sendInitialEvents each and no LIST,
// which proves that the stream ended with the initial-events-end bookmark:
// client-go falls back to LIST when it does not.
func checkInitialRequests(t *testing.T, rec *informertest.Recorder, watchList bool) {
	t.Helper()
	initial := 0
	for _, req := range rec.Requests("/pods") {
		if req.Watch() && req.Query.Get("sendInitialEvents") == "true" {
			initial++
			if req.Query.Get("resourceVersionMatch") != "NotOlderThan" || req.Query.Get("allowWatchBookmarks") != "true" || req.Status != 200 {
				t.Errorf("watch-list request %s?%s answered %d", req.Path, req.Query.Encode(), req.Status)
			}
		}
	}
	lists := rec.Lists("/pods")
	if watchList && (initial != 2 || lists != 0) {
		t.Errorf("WatchList informers made %d watch-list requests and %d LISTs, want 2 and 0 (a LIST is client-go's fallback when the watch-list fails): %+v", initial, lists, rec.Requests("/pods"))
	}
	if !watchList && (initial != 0 || lists != 2) {
		t.Errorf("classic informers made %d watch-list requests and %d LISTs, want 0 and 2: %+v", initial, lists, rec.Requests("/pods"))
	}
}

// TestWatchListClientReadsItsWrites: with WatchListClient enabled,
// client-go's typed List is a watch-list stream (sendInitialEvents,
// resourceVersion unset). Kube serves it as a consistent read, like a LIST
// without resourceVersion, and ends it with a bookmark carrying the list's
// blueprint; a client that just created a pod finds it, and never falls
// back to a plain LIST.
func TestWatchListClientReadsItsWrites(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	ns := newNamespace(t)
	rec := &informertest.Recorder{}
	client, err := kubernetes.NewForConfig(rec.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods(ns)
	for i := range 50 {
		created, err := pods.Create(t.Context(), informertest.NewPod(fmt.Sprintf("rw%d", i), true), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := pods.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, pod := range list.Items {
			found = found || pod.Name == created.Name && pod.ResourceVersion == created.ResourceVersion
		}
		if len(list.Items) != i+1 || !found {
			t.Fatalf("list right after creating %s (rv %s): %d items %v, rv %s", created.Name, created.ResourceVersion, len(list.Items), names(t, list), list.ResourceVersion)
		}
		if parseRV(t, list.ResourceVersion) < parseRV(t, created.ResourceVersion) {
			t.Fatalf("list resourceVersion %s older than the create's %s", list.ResourceVersion, created.ResourceVersion)
		}
	}
	if n := rec.Lists("/pods"); n != 0 {
		t.Errorf("%d plain LISTs: client-go fell back from the watch-list", n)
	}

	// The bookmark's blueprint is kube's: base64 of the empty PodList, in
	// the watch's encoding (JSON here; protobuf clients get protobuf).
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType = "application/json"
	jsonClient, err := kubernetes.NewForConfig(jsonCfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jsonClient.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := nextAnyEvent(t, w); ; ev = nextAnyEvent(t, w) {
		if ev.Type == watch.Bookmark {
			const kubes = "eyJraW5kIjoiUG9kTGlzdCIsImFwaVZlcnNpb24iOiJ2MSIsIm1ldGFkYXRhIjp7fSwiaXRlbXMiOm51bGx9Cg=="
			if got := ev.Object.(*v1.Pod).Annotations[metav1.InitialEventsListBlueprintAnnotationKey]; got != kubes {
				t.Errorf("initial-events-list-blueprint %q, want kube's %q", got, kubes)
			}
			break
		}
	}
}

func parseRV(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return n
}

// reserveAddr returns a loopback address that was free a moment ago, so
// that servers started one after another serve the same URL.
func reserveAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestInformersRelistAfter410: informers on a server whose watch cache
// keeps only 5 events keep up with many more writes while connected. Cut
// off while more than 5 changes happen, they resume watching from a
// resourceVersion that has left the window and get the 410 Expired event;
// client-go relists (LIST, or a watch-list with WatchListClient) and they
// converge. Then the server restarts on the same data and address: its
// watch cache begins at the current revision, so watches from before the
// restart's last writes get a 410 again, and the informers converge again,
// and keep converging.
func TestInformersRelistAfter410(t *testing.T) {
	for _, watchList := range []bool{false, true} {
		t.Run(map[bool]string{false: "ListWatch", true: "WatchList"}[watchList], func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			testInformersRelistAfter410(t, watchList)
		})
	}
}

func testInformersRelistAfter410(t *testing.T, watchList bool) {
	dir, addr := t.TempDir(), reserveAddr(t)
	start := func() *testserver.Server {
		return testserver.StartWith(t, dir, func(c *server.Config) {
			c.Listen = addr
			c.WatchCacheSize = 5
			c.Logger = testserver.Logger()
		})
	}
	s := start()
	const ns = "relist"
	if _, err := s.Client.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	offline := 0
	// write makes n changes the informers must catch up with.
	write := func(s *testserver.Server, n int) {
		t.Helper()
		pods := s.Client.CoreV1().Pods(ns)
		for range n {
			name := fmt.Sprintf("offline%d", offline)
			var err error
			switch offline % 3 {
			case 0, 1:
				_, err = pods.Create(t.Context(), informertest.NewPod(name, offline%2 == 0), metav1.CreateOptions{})
			case 2: // the previous pod, selected, leaves the selector
				_, err = pods.Patch(t.Context(), fmt.Sprintf("offline%d", offline-2), types.MergePatchType, []byte(`{"metadata":{"labels":{"sel":"out"}}}`), metav1.PatchOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			offline++
		}
	}
	write(s, 6)
	all, selected, rec := startInformers(t, testserver.ClientConfig("https://"+addr), ns)
	informers := []*informertest.PodInformer{all, selected}
	checkInitialRequests(t, rec, watchList)
	fills := func() int {
		if watchList {
			return rec.WatchLists("/pods")
		}
		return rec.Lists("/pods")
	}
	// relisted checks that since the last call both informers got a 410
	// and filled their caches again, and converged to s.
	expired, filled := 0, fills()
	relisted := func(s *testserver.Server, after string) {
		t.Helper()
		start := time.Now()
		for _, inf := range informers {
			inf.WaitConverged(t, s.Client, 15*time.Second)
		}
		t.Logf("informers converged %v after %s", time.Since(start).Round(time.Millisecond), after)
		if n := rec.Expired() - expired; n != 2 {
			t.Errorf("after %s: %d watches got the 410 Expired event, want one per informer", after, n)
		}
		if n := fills() - filled; n != 2 {
			t.Errorf("after %s: the informers filled their caches %d times, want once each", after, n)
		}
		expired, filled = rec.Expired(), fills()
	}

	// Connected informers keep up with far more writes than the window.
	churn(t, s.Client, ns, informertest.ChurnOptions{Workers: 8, Ops: 150, Names: 20, Seed: uint64(time.Now().UnixNano())})
	for _, inf := range informers {
		inf.WaitConverged(t, s.Client, 15*time.Second)
	}
	if n := rec.Expired(); n != 0 || fills() != filled {
		t.Errorf("while the informers kept up: %d watches expired, %d fills, want none", n, fills()-filled)
	}

	// Cut off while more changes than the window holds happen.
	rec.Pause()
	write(s, 9)
	rec.Resume()
	relisted(s, "falling out of the window")

	// A restart: a few changes before it, a few after. First an event
	// both informers see, for client-go treats a watch cut within a second
	// of its start, without events, as broken and relists without a 410.
	if _, err := s.Client.CoreV1().Pods(ns).Create(t.Context(), informertest.NewPod("seen", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, inf := range informers {
		inf.WaitConverged(t, s.Client, 15*time.Second)
	}
	rec.Pause()
	write(s, 3)
	s.Stop(t)
	s = start()
	write(s, 3)
	rec.Resume()
	relisted(s, "the restart")

	// And they keep converging.
	churn(t, s.Client, ns, informertest.ChurnOptions{Workers: 8, Ops: 150, Names: 20, Seed: uint64(time.Now().UnixNano())})
	for _, inf := range informers {
		inf.WaitConverged(t, s.Client, 15*time.Second)
		inf.CheckMonotonic(t)
	}
	if n := rec.Lists("/pods"); watchList && n != 0 {
		t.Errorf("%d LISTs: client-go fell back from the watch-list", n)
	}
}
