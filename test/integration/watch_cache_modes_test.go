package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestEventsWithAndWithoutWatchCache: events keep no watch cache by
// default, as in kube (--watch-cache-sizes events#0: LISTs and watches
// read etcd). The same requests against the shared server (no cache) and
// a server started with --watch-cache-sizes events#100 (cached) must give
// the same answers: resourceVersion rules, selectors, pages, Tables,
// protobuf, watches with their selector transitions and initial events.
func TestEventsWithAndWithoutWatchCache(t *testing.T) {
	cached := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.WatchCacheSizes = []string{"events#100"} })
	protoCfg := func(c *rest.Config) *rest.Config {
		c = rest.CopyConfig(c)
		c.ContentType = "application/vnd.kubernetes.protobuf"
		c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		return c
	}
	var transcripts [2][]string
	for i, target := range []struct {
		name string
		cfg  *rest.Config
	}{{"uncached", cfg}, {"cached", cached.Config}} {
		t.Run(target.name, func(t *testing.T) {
			client, err := kubernetes.NewForConfig(protoCfg(target.cfg))
			if err != nil {
				t.Fatal(err)
			}
			transcripts[i] = eventsScript(t, client)
		})
	}
	if t.Failed() {
		return
	}
	a, b := strings.Join(transcripts[0], "\n"), strings.Join(transcripts[1], "\n")
	if a != b {
		t.Fatalf("answers differ\nwithout a watch cache:\n%s\n\nwith one:\n%s", a, b)
	}
}

// eventsScript runs the requests of TestEventsWithAndWithoutWatchCache and
// returns what they answered, without what differs between servers
// (resourceVersions, namespaces, times).
func eventsScript(t *testing.T, client kubernetes.Interface) []string {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ns := newNamespaceIn(t, client)
	events := client.CoreV1().Events(ns)
	var out []string
	names := func(list *v1.EventList) string {
		var n []string
		for _, e := range list.Items {
			n = append(n, e.Name+"/"+e.InvolvedObject.Name+"/"+e.Labels["tier"])
		}
		return strings.Join(n, ",")
	}
	for i, spec := range []struct{ name, object, tier string }{{"e1", "a", "web"}, {"e2", "b", "web"}, {"e3", "a", "db"}} {
		ev := newEvent(ns, spec.name, map[string]string{"tier": spec.tier})
		ev.InvolvedObject.Name = spec.object
		if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	all, err := events.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, "list: "+names(all))
	rv := all.ResourceVersion

	for _, opts := range []metav1.ListOptions{
		{FieldSelector: "involvedObject.name=a"},
		{LabelSelector: "tier=web"},
		{LabelSelector: "tier=web", FieldSelector: "involvedObject.name=a"},
		{ResourceVersion: "0"},
		{ResourceVersion: rv},
		{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
	} {
		list, err := events.List(ctx, opts)
		if err != nil {
			t.Fatalf("list %+v: %v", opts, err)
		}
		out = append(out, fmt.Sprintf("list %s|%s|%t|%s: %s", opts.FieldSelector, opts.LabelSelector, opts.ResourceVersion != "", opts.ResourceVersionMatch, names(list)))
	}
	if out[1] != "list involvedObject.name=a||false|: e1/a/web,e3/a/db" {
		t.Errorf("field selector: %s", out[1])
	}

	// Pages: a limit gives a continue token and the remaining count.
	page, err := events.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	remaining := "nil"
	if page.RemainingItemCount != nil {
		remaining = strconv.FormatInt(*page.RemainingItemCount, 10)
	}
	out = append(out, fmt.Sprintf("page 1: %s, continue %t, remaining %s", names(page), page.Continue != "", remaining))
	if page.Continue == "" || remaining != "1" {
		t.Errorf("first page: continue %q, remaining %s", page.Continue, remaining)
	}
	page, err = events.List(ctx, metav1.ListOptions{Limit: 2, Continue: page.Continue})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, fmt.Sprintf("page 2: %s, continue %t", names(page), page.Continue != ""))

	// A resourceVersion the store has not reached: kube's 504.
	future, _ := strconv.ParseInt(rv, 10, 64)
	_, err = events.List(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(future+1000000, 10)})
	out = append(out, fmt.Sprintf("list from the future: %d %s", statusCode(err), reasonOf(err)))
	if !apierrors.IsTimeout(err) {
		t.Errorf("list from the future: %v, want a 504", err)
	}

	// Table, as kubectl get asks.
	var table metav1.Table
	if err := client.CoreV1().RESTClient().Get().Namespace(ns).Resource("events").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(&table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	out = append(out, fmt.Sprintf("table: %d rows, columns %s", len(table.Rows), strings.Join(cols, ",")))

	// A watch from the list's resourceVersion, selecting tier=web: label
	// changes move events in and out of it.
	w, err := events.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, LabelSelector: "tier=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	relabel := func(name, tier string) {
		t.Helper()
		ev, err := events.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev.Labels["tier"] = tier
		ev.Count++
		if _, err := events.Update(ctx, ev, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("e1", "db")  // leaves the selection: DELETED
	relabel("e3", "web") // enters it: ADDED
	relabel("e2", "web") // stays: MODIFIED
	if err := events.Delete(ctx, "e2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		out = append(out, "watch: "+describeNext(t, ctx, w))
	}
	want := []string{"watch: DELETED e1 db", "watch: ADDED e3 web", "watch: MODIFIED e2 web", "watch: DELETED e2 web"}
	if got := out[len(out)-4:]; strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("watch events %q, want %q", got, want)
	}

	// A watch from "0": the current state as ADDED first.
	w0, err := events.Watch(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: "involvedObject.name=a"})
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Stop()
	out = append(out, "watch 0: "+describeNext(t, ctx, w0), "watch 0: "+describeNext(t, ctx, w0))

	// WatchList: sendInitialEvents, then the bookmark that ends them.
	wl, err := events.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, LabelSelector: "tier=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Stop()
	out = append(out, "watchlist: "+describeNext(t, ctx, wl), "watchlist: "+describeNext(t, ctx, wl))
	return out
}

// describeNext describes a watch's next event: type, name and tier label, or
// for a bookmark whether it ends the initial events.
func describeNext(t *testing.T, ctx context.Context, w watch.Interface) string {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		switch o := ev.Object.(type) {
		case *v1.Event:
			if ev.Type == watch.Bookmark {
				return fmt.Sprintf("BOOKMARK end=%s", o.Annotations["k8s.io/initial-events-end"])
			}
			return fmt.Sprintf("%s %s %s", ev.Type, o.Name, o.Labels["tier"])
		default:
			return fmt.Sprintf("%s %T", ev.Type, o)
		}
	case <-ctx.Done():
		t.Fatal("no watch event in time")
	}
	return ""
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

func reasonOf(err error) metav1.StatusReason { return apierrors.ReasonForError(err) }
