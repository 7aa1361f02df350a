package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/openapi"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/storage"
	etcdstore "github.com/corekube/corekube/storage/etcd"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/yaml"
)

// podTypes is structured-merge-diff's view of pods and pods/status, built
// from the OpenAPI models the server publishes (as server/managedfields.go
// builds it for every resource), once per test binary: building it is the
// expensive part of turning managedFields on.
var podTypes = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	st := pods.NewStrategy()
	info := st.Info()
	return openapi.TypeConverter([]openapi.Resource{{
		Info: info, Object: st.New(), List: st.NewList(),
		Subresources: []openapi.Subresource{{Name: "status", Verbs: []string{"get", "patch", "update"},
			Kind: info.GroupVersion().WithKind(info.Kind), Object: st.New()}},
	}})
})

// fieldsEnv is a pod Store (and its status subresource) tracking
// managedFields, on a real embedded etcd.
type fieldsEnv struct {
	etcd   storage.Interface
	pods   *registry.Store
	status *registry.Store
}

// newFieldsEtcd starts an embedded etcd for one test or benchmark.
func newFieldsEtcd(tb testing.TB) storage.Interface {
	tb.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	etcd, err := etcdstore.StartEmbedded(context.Background(), etcdstore.EmbeddedConfig{Dir: tb.TempDir(), UnsafeNoFsync: true, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { etcd.Close() })
	return etcdstore.New(etcd.Client())
}

// newPodStores returns the pods Store on st and its status subresource;
// tracking turns managedFields on (Options.TypeConverter).
func newPodStores(st storage.Interface, tracking bool, opts registry.Options) (*registry.Store, *registry.Store) {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if tracking {
		opts.TypeConverter = podTypes
	}
	store := registry.NewStore(st, pods.NewStrategy(), opts)
	return store, store.Subresource("status", pods.NewStatusStrategy())
}

func newFieldsEnv(t *testing.T) *fieldsEnv {
	t.Helper()
	if _, err := podTypes(); err != nil {
		t.Fatalf("type converter: %v", err)
	}
	st := newFieldsEtcd(t)
	store, status := newPodStores(st, true, registry.Options{})
	return &fieldsEnv{etcd: st, pods: store, status: status}
}

// applyConfig is the apply patch of a pod from YAML: apiVersion, kind and
// name are added when the YAML lacks them, as every client sends them.
func applyConfig(tb testing.TB, name, config string) *unstructured.Unstructured {
	tb.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{}}
	// sigs.k8s.io/yaml, as the apply-patch+yaml handler decodes bodies.
	if err := yaml.Unmarshal([]byte(config), &u.Object); err != nil {
		tb.Fatalf("apply config %q: %v", config, err)
	}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	if u.GetAPIVersion() == "" {
		u.SetAPIVersion("v1")
	}
	if u.GetKind() == "" {
		u.SetKind("Pod")
	}
	if u.GetName() == "" {
		u.SetName(name)
	}
	return u
}

// fieldsEntry is one managedFields entry in a comparable form: its
// fieldsV1 set as the sorted paths of its members, as structured-merge-diff
// prints them (.metadata.labels.a, .spec.containers[name="c"].image,
// .metadata.finalizers[="example.com/a"]). A path is listed only when the
// set has it as a member (a "." in fieldsV1 for a map or list element).
//
// Untimed is an entry without a time: kube 1.32 leaves the entry of an
// applier whose apply changed nothing in the object (it applied what
// others had already set) without one (kubernetes#127938).
type fieldsEntry struct {
	Manager, Operation, Subresource string
	Fields                          []string
	Untimed                         bool
}

// untimed is the entry without a time.
func (e fieldsEntry) untimed() fieldsEntry {
	e.Untimed = true
	return e
}

func (e fieldsEntry) String() string {
	s := e.Operation + " " + e.Manager
	if e.Subresource != "" {
		s += " (" + e.Subresource + ")"
	}
	if e.Untimed {
		s += " without time"
	}
	return s + ":\n\t\t" + strings.Join(e.Fields, "\n\t\t")
}

// flatten turns strings and []string into one list.
func flatten(parts []any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("path %v (%T)", p, p))
		}
	}
	sort.Strings(out)
	return out
}

// applied, updated, appliedStatus and updatedStatus are the expected
// entries of a manager; paths are strings or []string.
func applied(manager string, paths ...any) fieldsEntry {
	return fieldsEntry{Manager: manager, Operation: "Apply", Fields: flatten(paths)}
}

func updated(manager string, paths ...any) fieldsEntry {
	return fieldsEntry{Manager: manager, Operation: "Update", Fields: flatten(paths)}
}

func appliedStatus(manager string, paths ...any) fieldsEntry {
	return fieldsEntry{Manager: manager, Operation: "Apply", Subresource: "status", Fields: flatten(paths)}
}

func updatedStatus(manager string, paths ...any) fieldsEntry {
	return fieldsEntry{Manager: manager, Operation: "Update", Subresource: "status", Fields: flatten(paths)}
}

// ctr is the paths a manager owns in container name: its key, name and
// the given fields.
func ctr(name string, fields ...string) []string {
	c := `.spec.containers[name="` + name + `"]`
	out := []string{c, c + ".name"}
	for _, f := range fields {
		out = append(out, c+"."+f)
	}
	return out
}

// entriesOf is managedFields in the comparable form, sorted by operation,
// manager and subresource (kube sorts by time within an operation, which a
// test cannot fix to the second). Every entry must be a well-formed v1
// FieldsV1 entry.
func entriesOf(t *testing.T, managed []metav1.ManagedFieldsEntry) []fieldsEntry {
	t.Helper()
	var out []fieldsEntry
	for _, m := range managed {
		if m.APIVersion != "v1" || m.FieldsType != "FieldsV1" || m.FieldsV1 == nil {
			t.Errorf("managedFields entry of %q: apiVersion %q, fieldsType %q, fieldsV1 %v; want v1, FieldsV1 and fields",
				m.Manager, m.APIVersion, m.FieldsType, m.FieldsV1)
		}
		set := &fieldpath.Set{}
		if m.FieldsV1 != nil {
			if err := set.FromJSON(bytes.NewReader(m.FieldsV1.Raw)); err != nil {
				t.Errorf("fieldsV1 of %q: %v", m.Manager, err)
			}
		}
		var paths []string
		set.Iterate(func(p fieldpath.Path) { paths = append(paths, p.String()) })
		sort.Strings(paths)
		out = append(out, fieldsEntry{m.Manager, string(m.Operation), m.Subresource, paths, m.Time == nil})
	}
	sortEntries(out)
	return out
}

func sortEntries(es []fieldsEntry) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Operation != b.Operation {
			return a.Operation < b.Operation
		}
		if a.Manager != b.Manager {
			return a.Manager < b.Manager
		}
		return a.Subresource < b.Subresource
	})
}

// expectEntries compares managedFields with want (in any order).
func expectEntries(t *testing.T, managed []metav1.ManagedFieldsEntry, want []fieldsEntry) {
	t.Helper()
	want = slices.Clone(want)
	sortEntries(want)
	got := entriesOf(t, managed)
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.Manager == w.Manager && g.Operation == w.Operation && g.Subresource == w.Subresource &&
			slices.Equal(g.Fields, w.Fields) && g.Untimed == w.Untimed
	}
	if !same {
		t.Errorf("managedFields:\n\t%v\nwant\n\t%v", joinEntries(got), joinEntries(want))
	}
}

func joinEntries(es []fieldsEntry) string {
	if len(es) == 0 {
		return "(none)"
	}
	var s []string
	for _, e := range es {
		s = append(s, e.String())
	}
	return strings.Join(s, "\n\t")
}

// expectContains checks that the object has what the YAML want says:
// maps are compared key by key (other keys may exist), a null value means
// the key must be absent, lists must have the same length with each item
// matched in the same way, and scalars must be equal.
func expectContains(t *testing.T, obj any, want string) {
	t.Helper()
	if want == "" {
		return
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var have, w any
	if err := json.Unmarshal(data, &have); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	for _, diff := range containsDiff("", have, w) {
		t.Error(diff)
	}
}

func containsDiff(path string, have, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s is %s, want a map", path, compact(have))}
		}
		var diffs []string
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range w {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			hv, present := h[k]
			switch {
			case w[k] == nil && present:
				diffs = append(diffs, fmt.Sprintf("%s.%s is %s, want it absent", path, k, compact(hv)))
			case w[k] != nil && !present:
				diffs = append(diffs, fmt.Sprintf("%s.%s is absent, want %s", path, k, compact(w[k])))
			case w[k] != nil:
				diffs = append(diffs, containsDiff(path+"."+k, hv, w[k])...)
			}
		}
		return diffs
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return []string{fmt.Sprintf("%s is %s, want %s", path, compact(have), compact(want))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, containsDiff(fmt.Sprintf("%s[%d]", path, i), h[i], w[i])...)
		}
		return diffs
	default:
		if fmt.Sprint(have) != fmt.Sprint(want) {
			return []string{fmt.Sprintf("%s is %s, want %s", path, compact(have), compact(want))}
		}
		return nil
	}
}

func compact(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// ageManagedFields rewrites the stored pod's managedFields times to 2020,
// straight in etcd: a later write that changes nothing must keep them
// (kube ignores managedFields timestamps when nothing else changed), which
// a test could otherwise only see by waiting for the clock's next second.
func (e *fieldsEnv) ageManagedFields(ctx context.Context, namespace, name string) error {
	_, err := e.etcd.GuaranteedUpdate(ctx, "/registry/pods/"+namespace+"/"+name, func(cur storage.KV) ([]byte, error) {
		var pod v1.Pod
		if err := json.Unmarshal(cur.Value, &pod); err != nil {
			return nil, err
		}
		old := metav1.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range pod.ManagedFields {
			pod.ManagedFields[i].Time = &old
		}
		return json.Marshal(&pod)
	})
	return err
}
