package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/openapi"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/leases"
	"github.com/corekube/corekube/registry/nodes"
	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch/rawjson"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// nodeTypes is structured-merge-diff's view of nodes and nodes/status.
var nodeTypes = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	st := nodes.NewStrategy()
	info := st.Info()
	return openapi.TypeConverter([]openapi.Resource{{
		Info: info, Object: st.New(), List: st.NewList(),
		Subresources: []openapi.Subresource{{Name: "status", Verbs: []string{"get", "patch", "update"},
			Kind: info.GroupVersion().WithKind(info.Kind), Object: st.New()}},
	}})
})

// heartbeatEnv holds the Stores of a node's heartbeat writes, their watch
// caches running.
type heartbeatEnv struct {
	storage                                    storage.Interface
	leases, pods, podStatus, nodes, nodeStatus *registry.Store
}

func newHeartbeatEnv(t *testing.T) *heartbeatEnv {
	t.Helper()
	for _, types := range []func() (managedfields.TypeConverter, error){podTypes, leaseTypes, nodeTypes} {
		if _, err := types(); err != nil {
			t.Fatal(err)
		}
	}
	st := newTestStorage(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &heartbeatEnv{storage: st}
	e.leases = registry.NewStore(st, leases.NewStrategy(), registry.Options{TypeConverter: leaseTypes, Logger: quiet})
	e.pods, e.podStatus = newPodStores(st, true, registry.Options{})
	e.nodes = registry.NewStore(st, nodes.NewStrategy(), registry.Options{TypeConverter: nodeTypes, Logger: quiet})
	e.nodeStatus = e.nodes.Subresource("status", nodes.NewStatusStrategy())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []*registry.Store{e.leases, e.pods, e.nodes} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Run(ctx)
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range []*registry.Store{e.leases, e.pods, e.nodes} {
		for !s.CacheReady() {
			if time.Now().After(deadline) {
				t.Fatal("watch caches not ready after 30s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return e
}

// heartbeatStep is one write; last is the object the previous step
// returned (nil before the first), which a step may send back changed as
// clients do with PUT (its resourceVersion a precondition).
type heartbeatStep struct {
	desc string
	run  func(ctx context.Context, e *heartbeatEnv, name string, last runtime.Object) (runtime.Object, error)
}

// put is a PUT of the last object as change makes it (the handler's
// transform: the body, whatever is stored).
func put[T runtime.Object](store func(*heartbeatEnv) *registry.Store, manager string, change func(T)) func(context.Context, *heartbeatEnv, string, runtime.Object) (runtime.Object, error) {
	return func(ctx context.Context, e *heartbeatEnv, name string, last runtime.Object) (runtime.Object, error) {
		body := last.DeepCopyObject().(T)
		change(body)
		s := store(e)
		ns := ""
		if s.Info().Namespaced {
			ns = "hb"
		}
		out, _, err := s.Update(ctx, ns, name, func(context.Context, runtime.Object) (runtime.Object, error) {
			return body.DeepCopyObject(), nil
		}, registry.UpdateOptions{FieldManager: manager})
		return out, err
	}
}

func leaseStore(e *heartbeatEnv) *registry.Store      { return e.leases }
func podStatusStore(e *heartbeatEnv) *registry.Store  { return e.podStatus }
func podStore(e *heartbeatEnv) *registry.Store        { return e.pods }
func nodeStatusStore(e *heartbeatEnv) *registry.Store { return e.nodeStatus }

func renewAt(sec int64) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) {
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(1_700_000_000+sec, 123000)}
	}
}

func stale(change func(metav1.Object)) func(metav1.Object) {
	return func(m metav1.Object) { m.SetResourceVersion("1"); change(m) }
}

// oldTimes makes an object an unconditional write (no resourceVersion)
// whose managedFields carry other times, as a client sending back an
// older copy.
func oldTimes(m metav1.Object) {
	m.SetResourceVersion("")
	mf := m.GetManagedFields()
	for i := range mf {
		mf[i].Time = &metav1.Time{Time: time.Unix(1_600_000_000, 0)}
	}
}

func heartbeat(sec int64, ready v1.ConditionStatus) func(*v1.Node) {
	return func(n *v1.Node) {
		at := metav1.NewTime(time.Unix(1_700_000_000+sec, 0))
		n.Status.Conditions = []v1.NodeCondition{
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: at, LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_000, 0)), Reason: "KubeletHasSufficientMemory"},
			{Type: v1.NodeReady, Status: ready, LastHeartbeatTime: at, LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_000, 0)), Reason: "KubeletReady", Message: "kubelet is posting ready status"},
		}
	}
}

// heartbeatSequences are the writes of a node's kubelet and of others on
// its objects: lease renewals (changing renewTime, changing nothing, by
// another manager, with a stale resourceVersion), pods/status and
// nodes/status writes (changing, unchanged, refused).
func heartbeatSequences() map[string][]heartbeatStep {
	createLease := heartbeatStep{"create lease", func(ctx context.Context, e *heartbeatEnv, name string, _ runtime.Object) (runtime.Object, error) {
		holder, d := "node-x", int32(40)
		return e.leases.Create(ctx, "hb", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hb"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d}}, registry.CreateOptions{FieldManager: "kubelet"})
	}}
	createPod := heartbeatStep{"create pod", func(ctx context.Context, e *heartbeatEnv, name string, _ runtime.Object) (runtime.Object, error) {
		p := benchPod(name)
		p.Namespace = "hb"
		p.Spec.NodeName = "node-x"
		return e.pods.Create(ctx, "hb", p, registry.CreateOptions{FieldManager: "creator"})
	}}
	createNode := heartbeatStep{"create node", func(ctx context.Context, e *heartbeatEnv, name string, _ runtime.Object) (runtime.Object, error) {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": "node-x"}}}
		n.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourcePods: resource.MustParse("110")}
		n.Status.Allocatable = n.Status.Capacity
		heartbeat(0, v1.ConditionTrue)(n)
		n.Status.Images = []v1.ContainerImage{{Names: []string{"nginx:1.27"}, SizeBytes: 70 << 20}, {Names: []string{"busybox"}, SizeBytes: 4 << 20}}
		return e.nodes.Create(ctx, "", n, registry.CreateOptions{FieldManager: "kubelet"})
	}}
	podStatus := func(ready v1.ConditionStatus, msg string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_000, 0))},
				{Type: v1.PodReady, Status: ready, Message: msg, LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_100, 0))},
			}
		}
	}
	return map[string][]heartbeatStep{
		"lease": {
			createLease,
			{"renew", put(leaseStore, "kubelet", renewAt(10))},
			{"renew again", put(leaseStore, "kubelet", renewAt(20))},
			{"renew, same renewTime", put(leaseStore, "kubelet", renewAt(20))},
			{"renew with a stale resourceVersion", put(leaseStore, "kubelet", func(l *coordinationv1.Lease) { stale(func(metav1.Object) {})(l); renewAt(30)(l) })},
			{"unconditional PUT with older managedFields times (only times change)", put(leaseStore, "kubelet", func(l *coordinationv1.Lease) { oldTimes(l) })},
			{"unconditional PUT with older times and a new renewTime", put(leaseStore, "kubelet", func(l *coordinationv1.Lease) { oldTimes(l); renewAt(35)(l) })},
			{"label by kubectl", put(leaseStore, "kubectl", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"a": "b"} })},
			{"renew after", put(leaseStore, "kubelet", renewAt(40))},
			{"no change by kubectl", put(leaseStore, "kubectl", func(*coordinationv1.Lease) {})},
			{"invalid duration", put(leaseStore, "kubelet", func(l *coordinationv1.Lease) { d := int32(-1); l.Spec.LeaseDurationSeconds = &d })},
			{"renew by another holder", put(leaseStore, "other", func(l *coordinationv1.Lease) { h := "node-y"; l.Spec.HolderIdentity = &h; renewAt(50)(l) })},
			{"renew by kubelet", put(leaseStore, "kubelet", renewAt(60))},
		},
		"pods/status": {
			createPod,
			{"status ready", put(podStatusStore, "kubelet", podStatus(v1.ConditionTrue, "ok"))},
			{"status unchanged", put(podStatusStore, "kubelet", podStatus(v1.ConditionTrue, "ok"))},
			{"status not ready", put(podStatusStore, "kubelet", podStatus(v1.ConditionFalse, "probe failed"))},
			{"spec change through status (reset: only times change)", put(podStatusStore, "kubelet", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:2" })},
			{"unconditional status PUT with older managedFields times", put(podStatusStore, "kubelet", func(p *v1.Pod) { oldTimes(p) })},
			{"status stale", put(podStatusStore, "kubelet", func(p *v1.Pod) { stale(func(metav1.Object) {})(p); podStatus(v1.ConditionTrue, "x")(p) })},
			{"status by another manager", put(podStatusStore, "other", func(p *v1.Pod) { p.Status.PodIP = "10.0.0.1" })},
			{"label on the pod", put(podStore, "kubectl", func(p *v1.Pod) { p.Labels["tier"] = "db" })},
			{"status ready again", put(podStatusStore, "kubelet", podStatus(v1.ConditionTrue, "ok"))},
		},
		"nodes/status": {
			createNode,
			{"heartbeat", put(nodeStatusStore, "kubelet", heartbeat(10, v1.ConditionTrue))},
			{"heartbeat again", put(nodeStatusStore, "kubelet", heartbeat(20, v1.ConditionTrue))},
			{"same heartbeat", put(nodeStatusStore, "kubelet", heartbeat(20, v1.ConditionTrue))},
			{"not ready", put(nodeStatusStore, "kubelet", heartbeat(30, v1.ConditionFalse))},
			{"images", put(nodeStatusStore, "kubelet", func(n *v1.Node) {
				n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{"redis:7"}, SizeBytes: 30 << 20})
			})},
			{"label through status (reset: only times change)", put(nodeStatusStore, "kubelet", func(n *v1.Node) { n.Labels["x"] = "y" })},
			{"stale", put(nodeStatusStore, "kubelet", func(n *v1.Node) { stale(func(metav1.Object) {})(n); heartbeat(40, v1.ConditionTrue)(n) })},
			{"heartbeat by node controller", put(nodeStatusStore, "node-controller", heartbeat(50, v1.ConditionUnknown))},
		},
	}
}

// heartbeatRecord is what one step showed: its answer (the object or the
// error) and the stored value after it, with the object's name, uid,
// creation time and resourceVersion replaced (the runs write different
// objects), and when the step ran.
type heartbeatRecord struct {
	answer, stored string
	rev            int64
	start, end     time.Time
}

// TestUpdateFastPathsSameResults runs node heartbeat writes (lease
// renewals, pods/status and nodes/status updates) with the update fast
// paths (an update starting from the watch cache's copy; the object
// encoded once when only managedFields times change) and without them, on
// two objects, step by step in turn. The answers (objects and errors), the
// stored values and the watch events must be the same bytes but for the
// managedFields times, which kube's field manager takes from the clock:
// each entry's time must have been kept or set (to a time within the
// step) alike in both runs; and the entries must be in kube's order.
//
// The objects are stored as protobuf, so the fast path's updates start
// from the cache's message decoded (not its JSON): at least one must have.
func TestUpdateFastPathsSameResults(t *testing.T) {
	e := newHeartbeatEnv(t)
	fromMessages := registry.MessageStarts()
	for seq, steps := range heartbeatSequences() {
		t.Run(seq, func(t *testing.T) {
			for _, d := range runHeartbeatPair(t, e, steps, fmt.Sprintf("%s-%d", strings.ReplaceAll(seq, "/", "-"), time.Now().UnixNano())) {
				t.Error(d)
			}
		})
	}
	if registry.MessageStarts() == fromMessages {
		t.Error("no update started from an object decoded from the watch cache's protobuf message")
	}
}

func runHeartbeatPair(t *testing.T, e *heartbeatEnv, steps []heartbeatStep, base string) []string {
	ctx := t.Context()
	names := [2]string{"fast-" + base, "slow-" + base}
	var store *registry.Store
	var last [2]runtime.Object
	var recs [2][]heartbeatRecord
	var raw [2]map[int64]string // stored values by revision
	var ids [2]*identity
	for i, step := range steps {
		for mode := range 2 {
			restore := registry.SetUpdateFastPaths(mode == 0)
			r := heartbeatRecord{start: time.Now()}
			out, err := step.run(ctx, e, names[mode], last[mode])
			r.end = time.Now()
			restore()
			if i == 0 {
				if err != nil {
					t.Fatalf("%s: %v", step.desc, err)
				}
				ids[mode] = identityOf(t, out, names[mode])
				store = storeOf(e, out)
				raw[mode] = map[int64]string{}
			}
			if err != nil {
				r.answer = "error: " + ids[mode].replace(err.Error())
			} else {
				last[mode] = out
				data, jerr := registry.MarshalJSON(out)
				if jerr != nil {
					t.Fatal(jerr)
				}
				r.answer = ids[mode].replace(string(data))
			}
			key := "/" + store.Info().Resource + "/" + names[mode]
			if store.Info().Namespaced {
				key = "/" + store.Info().Resource + "/hb/" + names[mode]
			}
			kv, gerr := e.storage.Get(ctx, key)
			if gerr != nil {
				t.Fatal(gerr)
			}
			kv.Value = storedJSON(t, kv.Value)
			r.stored = ids[mode].replace(string(kv.Value))
			r.rev = kv.Revision
			raw[mode][kv.Revision] = string(kv.Value)
			recs[mode] = append(recs[mode], r)
		}
	}
	var diffs []string
	var prev [2]map[string]string // managedFields times of the last stored value
	for i := range recs[0] {
		var answers, stored [2]normalized
		for mode := range 2 {
			r := recs[mode][i]
			answers[mode] = normalizeManaged(t, r.answer, prev[mode], r.start, r.end)
			stored[mode] = normalizeManaged(t, r.stored, prev[mode], r.start, r.end)
			prev[mode] = stored[mode].times
		}
		if d := answers[0].diff(answers[1]); d != "" {
			diffs = append(diffs, fmt.Sprintf("step %q: answers %s", steps[i].desc, d))
		}
		if d := stored[0].diff(stored[1]); d != "" {
			diffs = append(diffs, fmt.Sprintf("step %q: stored values %s", steps[i].desc, d))
		}
		if wrote0, wrote1 := i == 0 || recs[0][i].rev != recs[0][i-1].rev, i == 0 || recs[1][i].rev != recs[1][i-1].rev; wrote0 != wrote1 {
			diffs = append(diffs, fmt.Sprintf("step %q: wrote with the fast paths %v, without %v", steps[i].desc, wrote0, wrote1))
		}
	}
	// The watch events of each object: one per stored write, each the
	// stored value with its resourceVersion; the writes being the same
	// (above), so are the events.
	for mode := range 2 {
		events := watchEvents(t, store, names[mode], recs[mode][0].rev, recs[mode][len(recs[mode])-1].rev)
		var wrote []int64
		for i, r := range recs[mode] {
			if i == 0 || r.rev != recs[mode][i-1].rev {
				wrote = append(wrote, r.rev)
			}
		}
		if len(events) != len(wrote) {
			diffs = append(diffs, fmt.Sprintf("mode %d: %d watch events for %d writes", mode, len(events), len(wrote)))
			continue
		}
		for j, ev := range events {
			typ := "MODIFIED"
			if j == 0 {
				typ = "ADDED"
			}
			want := raw[mode][wrote[j]]
			got := strings.Replace(ev.json, fmt.Sprintf(`"resourceVersion":"%d",`, wrote[j]), "", 1)
			if ev.typ != typ || got != want {
				diffs = append(diffs, fmt.Sprintf("mode %d: watch event %d is %s %s, want %s of the stored %s", mode, j, ev.typ, ev.json, typ, want))
			}
		}
	}
	return diffs
}

// normalized is a JSON object with its managedFields taken out: rest is
// the JSON with the managedFields array replaced by a marker, entries the
// entries without their times, sorted, with how each entry's time came
// about (timeClass).
type normalized struct {
	rest    string
	entries []string
	classes []timeClass
	times   map[string]string // entry key -> time, for the next step
}

// timeClass is how an entry's time relates to the one it had before the
// step: kept, set during the step, or either (kept, when the time it
// had is within the step's second too).
type timeClass string

const (
	timeKept   timeClass = "kept"
	timeSet    timeClass = "set"
	timeEither timeClass = "kept-or-set"
)

func (a normalized) diff(b normalized) string {
	if a.rest != b.rest {
		return firstDiff(a.rest, b.rest)
	}
	if strings.Join(a.entries, "\n") != strings.Join(b.entries, "\n") {
		return "managedFields differ:\nfast " + strings.Join(a.entries, "\n     ") + "\nslow " + strings.Join(b.entries, "\n     ")
	}
	for i := range a.classes {
		if x, y := a.classes[i], b.classes[i]; x != y && x != timeEither && y != timeEither {
			return fmt.Sprintf("managedFields entry %s: time %s with the fast paths, %s without", a.entries[i], x, y)
		}
	}
	return ""
}

// normalizeManaged takes the managedFields out of data (an object's JSON,
// or an error's text, left as it is), classing each entry's time against
// prev (the times before the step) and the step's start and end.
func normalizeManaged(t *testing.T, data string, prev map[string]string, start, end time.Time) normalized {
	t.Helper()
	md, err := rawjson.Member([]byte(data), "metadata")
	if err != nil || md == nil {
		return normalized{rest: data, times: prev}
	}
	mf, err := rawjson.Member(md, "managedFields")
	if err != nil || mf == nil {
		return normalized{rest: data, times: map[string]string{}}
	}
	at := strings.Index(data, string(mf))
	n := normalized{rest: data[:at] + "MANAGED" + data[at+len(mf):], times: map[string]string{}}
	var entries []metav1.ManagedFieldsEntry
	if err := json.Unmarshal(mf, &entries); err != nil {
		t.Fatalf("managedFields %s: %v", mf, err)
	}
	// kube's order: operation, then time (seconds), manager, apiVersion,
	// subresource.
	if !sort.SliceIsSorted(entries, func(i, j int) bool { return managedLess(entries[i], entries[j]) }) {
		t.Errorf("managedFields not in kube's order: %s", mf)
	}
	sort.Slice(entries, func(i, j int) bool { return entryKey(entries[i]) < entryKey(entries[j]) })
	from, to := start.Truncate(time.Second), end
	for _, e := range entries {
		k := entryKey(e)
		var tm string
		if e.Time != nil {
			tm = e.Time.UTC().Format(time.RFC3339)
		}
		n.times[k] = tm
		class := timeKept
		if p, ok := prev[k]; !ok || p != tm {
			class = timeSet
			if e.Time == nil || e.Time.Time.Before(from) || e.Time.Time.After(to) {
				t.Errorf("managedFields entry %s set to %s, outside of its step (%s to %s)", k, tm, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
			}
		} else if e.Time != nil && !e.Time.Time.Before(from) {
			class = timeEither
		}
		e.Time = nil
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		n.entries = append(n.entries, string(b))
		n.classes = append(n.classes, class)
	}
	return n
}

func entryKey(e metav1.ManagedFieldsEntry) string {
	return strings.Join([]string{string(e.Operation), e.Manager, e.APIVersion, e.Subresource}, "|")
}

func managedLess(p, q metav1.ManagedFieldsEntry) bool {
	if p.Operation != q.Operation {
		return p.Operation < q.Operation
	}
	var ps, qs int64
	if p.Time != nil {
		ps = p.Time.Unix()
	}
	if q.Time != nil {
		qs = q.Time.Unix()
	}
	if ps != qs {
		return ps < qs
	}
	if p.Manager != q.Manager {
		return p.Manager < q.Manager
	}
	if p.APIVersion != q.APIVersion {
		return p.APIVersion < q.APIVersion
	}
	return p.Subresource < q.Subresource
}

// identity is what differs between the two runs' objects.
type identity struct{ pairs []string }

func identityOf(t *testing.T, obj runtime.Object, name string) *identity {
	m := accessorOf(t, obj)
	created, err := m.GetCreationTimestamp().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &identity{pairs: []string{name, "NAME", string(m.GetUID()), "UID", `"creationTimestamp":` + string(created), `"creationTimestamp":"CREATED"`}}
}

// replace puts placeholders for the identity and the resourceVersion.
func (id *identity) replace(s string) string {
	s = strings.NewReplacer(id.pairs...).Replace(s)
	if i := strings.Index(s, `"resourceVersion":"`); i >= 0 {
		j := strings.IndexByte(s[i+len(`"resourceVersion":"`):], '"')
		s = s[:i] + `"resourceVersion":"RV"` + s[i+len(`"resourceVersion":"`)+j+1:]
	}
	return s
}

func storeOf(e *heartbeatEnv, obj runtime.Object) *registry.Store {
	switch obj.(type) {
	case *coordinationv1.Lease:
		return e.leases
	case *v1.Pod:
		return e.pods
	default:
		return e.nodes
	}
}

func namespaceOf(s *registry.Store) string {
	if s.Info().Namespaced {
		return "hb"
	}
	return ""
}

func revOf(t *testing.T, obj runtime.Object) int64 {
	var rev int64
	if _, err := fmt.Sscan(accessorOf(t, obj).GetResourceVersion(), &rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

// heartbeatEvent is one watch event as the watch cache sends it.
type heartbeatEvent struct{ typ, json string }

// watchEvents is every event of the object name from its creation (at
// revision first) to revision last, as the watch cache sends them.
func watchEvents(t *testing.T, s *registry.Store, name string, first, last int64) []heartbeatEvent {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := s.Watch(ctx, namespaceOf(s), &metainternalversion.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name),
		ResourceVersion: fmt.Sprint(first - 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var out []heartbeatEvent
	for {
		ev, ok := w.Next()
		if !ok {
			t.Fatalf("watch of %s ended before revision %d: %v", name, last, ctx.Err())
		}
		data, ok := ev.JSON()
		if !ok {
			t.Fatalf("watch event %s of %s has no cached JSON", ev.Type, name)
		}
		out = append(out, heartbeatEvent{typ: string(ev.Type), json: string(data)})
		if bytes.Contains(data, fmt.Appendf(nil, `"resourceVersion":"%d"`, last)) {
			return out
		}
	}
}

// TestUpdateFromStaleCache: updates through a Store whose watch cache
// has not yet seen the last write (made by another Store on the same
// storage, as another API server would) answer as if it had: the write
// with the newest resourceVersion as its precondition succeeds and keeps
// the other write's change.
func TestUpdateFromStaleCache(t *testing.T) {
	e := newHeartbeatEnv(t)
	ctx := t.Context()
	other := registry.NewStore(e.storage, leases.NewStrategy(), registry.Options{TypeConverter: leaseTypes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	holder, d := "node-x", int32(40)
	name := benchPodName("stale")
	l, err := e.leases.Create(ctx, "hb", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hb"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d}}, registry.CreateOptions{FieldManager: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	before := registry.StaleCurrents()
	for i := range 40 {
		labelled, _, err := other.Update(ctx, "hb", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			cur.(*coordinationv1.Lease).Labels = map[string]string{"round": fmt.Sprint(i)}
			return cur, nil
		}, registry.UpdateOptions{FieldManager: "labeller"})
		if err != nil {
			t.Fatalf("round %d: label: %v", i, err)
		}
		body := labelled.DeepCopyObject().(*coordinationv1.Lease)
		renewAt(int64(i))(body)
		out, _, err := e.leases.Update(ctx, "hb", name, func(context.Context, runtime.Object) (runtime.Object, error) {
			return body.DeepCopyObject(), nil
		}, registry.UpdateOptions{FieldManager: "kubelet"})
		if err != nil {
			t.Fatalf("round %d: renewal with the newest resourceVersion: %v", i, err)
		}
		got := out.(*coordinationv1.Lease)
		if got.Labels["round"] != fmt.Sprint(i) || !got.Spec.RenewTime.Equal(body.Spec.RenewTime) {
			t.Fatalf("round %d: renewal gave labels %v, renewTime %v", i, got.Labels, got.Spec.RenewTime)
		}
		if revOf(t, out) <= revOf(t, labelled) {
			t.Fatalf("round %d: renewal at revision %s, not after the label's %s", i, got.ResourceVersion, labelled.(*coordinationv1.Lease).ResourceVersion)
		}
		l = out
	}
	_ = l
	t.Logf("%d of 40 renewals started from a stale cached copy", registry.StaleCurrents()-before)
}

// firstDiff shows where fast and slow differ.
func firstDiff(fast, slow string) string {
	if fast == slow {
		return "the same"
	}
	i := 0
	for i < len(fast) && i < len(slow) && fast[i] == slow[i] {
		i++
	}
	from := max(0, i-200)
	return fmt.Sprintf("differ at byte %d:\nfast ...%s\nslow ...%s", i, fast[from:min(len(fast), i+200)], slow[from:min(len(slow), i+200)])
}
