package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// object is what every served type is.
type object interface {
	metav1.Object
	runtime.Object
}

// typedClient is the part of client-go's typed clients (PodInterface,
// NodeInterface, ...) that every resource has.
type typedClient[T object, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// resourceCase describes one resource for the generic verb tests.
type resourceCase[T object, L runtime.Object] struct {
	resource   string // plural, as in URLs and Status details
	group      string
	namespaced bool
	client     func(ns string) typedClient[T, L]
	newObj     func(ns, name string, labels map[string]string) T
	// deleteMarks: a delete only marks the object (namespaces: Terminating
	// until the namespace controller finishes).
	deleteMarks bool
	// noDeleteCollection: the resource does not serve deletecollection.
	noDeleteCollection bool
}

func (r resourceCase[T, L]) groupResource() string {
	if r.group == "" {
		return r.resource
	}
	return r.resource + "." + r.group
}

func TestCRUDPods(t *testing.T) {
	runCRUD(t, resourceCase[*v1.Pod, *v1.PodList]{
		resource: "pods", namespaced: true,
		client: func(ns string) typedClient[*v1.Pod, *v1.PodList] { return cs.CoreV1().Pods(ns) },
		newObj: func(_, name string, l map[string]string) *v1.Pod { return newPod(name, l) },
	})
}

func TestCRUDNodes(t *testing.T) {
	runCRUD(t, resourceCase[*v1.Node, *v1.NodeList]{
		resource: "nodes",
		client:   func(string) typedClient[*v1.Node, *v1.NodeList] { return cs.CoreV1().Nodes() },
		newObj:   func(_, name string, l map[string]string) *v1.Node { return newNode(name, l) },
	})
}

func TestCRUDNamespaces(t *testing.T) {
	runCRUD(t, resourceCase[*v1.Namespace, *v1.NamespaceList]{
		resource: "namespaces",
		client: func(string) typedClient[*v1.Namespace, *v1.NamespaceList] {
			return namespaceClient{cs.CoreV1().Namespaces()}
		},
		newObj: func(_, name string, l map[string]string) *v1.Namespace {
			return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
		},
		deleteMarks:        true,
		noDeleteCollection: true,
	})
}

func TestCRUDEvents(t *testing.T) {
	runCRUD(t, resourceCase[*v1.Event, *v1.EventList]{
		resource: "events", namespaced: true,
		client: func(ns string) typedClient[*v1.Event, *v1.EventList] { return cs.CoreV1().Events(ns) },
		newObj: newEvent,
	})
}

func TestCRUDLeases(t *testing.T) {
	runCRUD(t, resourceCase[*coordinationv1.Lease, *coordinationv1.LeaseList]{
		resource: "leases", group: "coordination.k8s.io", namespaced: true,
		client: func(ns string) typedClient[*coordinationv1.Lease, *coordinationv1.LeaseList] {
			return cs.CoordinationV1().Leases(ns)
		},
		newObj: func(_, name string, l map[string]string) *coordinationv1.Lease { return newLease(name, l) },
	})
}

func TestCRUDPodDisruptionBudgets(t *testing.T) {
	runCRUD(t, resourceCase[*policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudgetList]{
		resource: "poddisruptionbudgets", group: "policy", namespaced: true,
		client: func(ns string) typedClient[*policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudgetList] {
			return cs.PolicyV1().PodDisruptionBudgets(ns)
		},
		newObj: func(_, name string, l map[string]string) *policyv1.PodDisruptionBudget { return newPDB(name, l) },
	})
}

// namespaceClient adds the DELETE on the namespace collection that
// client-go does not offer (kube does not serve it).
type namespaceClient struct {
	corev1client.NamespaceInterface
}

func (namespaceClient) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return cs.CoreV1().RESTClient().Delete().Resource("namespaces").
		VersionedParams(&listOpts, scheme.ParameterCodec).Body(&opts).Do(ctx).Error()
}

// runCRUD exercises every verb of one resource through client-go.
func runCRUD[T object, L runtime.Object](t *testing.T, r resourceCase[T, L]) {
	ns := ""
	if r.namespaced {
		ns = newNamespace(t)
	}
	c := r.client(ns)
	// Cluster-scoped objects share one name space with every other test:
	// their names and a suite label make them unique.
	suite := uniqueName(t, "s")
	name := func(base string) string {
		if r.namespaced {
			return base
		}
		return uniqueName(t, base)
	}
	labels := func(kv ...string) map[string]string {
		l := map[string]string{"suite": suite}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	create := func(t *testing.T, n string, l map[string]string) T {
		t.Helper()
		obj, err := c.Create(t.Context(), r.newObj(ns, n, l), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s %s: %v", r.resource, n, err)
		}
		return obj
	}
	get := func(t *testing.T, n string) T {
		t.Helper()
		obj, err := c.Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s %s: %v", r.resource, n, err)
		}
		return obj
	}

	t.Run("create and get", func(t *testing.T) {
		n := name("a")
		created := create(t, n, labels("k", "v"))
		if ts := created.GetCreationTimestamp(); created.GetName() != n || created.GetUID() == "" || created.GetResourceVersion() == "" || ts.IsZero() {
			t.Fatalf("created object lacks system metadata: name %q uid %q rv %q created %v",
				created.GetName(), created.GetUID(), created.GetResourceVersion(), created.GetCreationTimestamp())
		}
		if created.GetNamespace() != ns {
			t.Errorf("namespace %q, want %q", created.GetNamespace(), ns)
		}
		if created.GetLabels()["k"] != "v" {
			t.Errorf("labels %v, want k=v", created.GetLabels())
		}
		got := get(t, n)
		if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
			t.Errorf("get: uid %s rv %s, want uid %s rv %s", got.GetUID(), got.GetResourceVersion(), created.GetUID(), created.GetResourceVersion())
		}

		_, err := c.Create(t.Context(), r.newObj(ns, n, nil), metav1.CreateOptions{})
		st := checkStatusErr(t, err, 409, metav1.StatusReasonAlreadyExists, fmt.Sprintf("%s %q already exists", r.groupResource(), n))
		if st.Details == nil || st.Details.Name != n || st.Details.Kind != r.resource || st.Details.Group != r.group {
			t.Errorf("AlreadyExists details %+v, want name %s kind %s group %q", st.Details, n, r.resource, r.group)
		}

		_, err = c.Get(t.Context(), name("missing"), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("get missing: %v, want NotFound", err)
		}
	})

	t.Run("generateName", func(t *testing.T) {
		obj := r.newObj(ns, "", labels())
		prefix := "gen-"
		if !r.namespaced {
			prefix = name("gen") + "-"
		}
		obj.SetGenerateName(prefix)
		created, err := c.Create(t.Context(), obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(created.GetName(), prefix) || len(created.GetName()) != len(prefix)+5 {
			t.Errorf("generated name %q, want %q + 5 characters", created.GetName(), prefix)
		}
		if created.GetGenerateName() != prefix {
			t.Errorf("generateName %q not kept", created.GetGenerateName())
		}
		get(t, created.GetName())
	})

	t.Run("list", func(t *testing.T) {
		l := labels("list", "yes")
		n1, n2 := name("l1"), name("l2")
		create(t, n1, l)
		create(t, n2, l)
		list, err := c.List(t.Context(), metav1.ListOptions{LabelSelector: "suite=" + suite + ",list=yes"})
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "list", names(t, list), n1, n2)
		lm, _ := metaList(list)
		if lm.GetResourceVersion() == "" {
			t.Error("list has no metadata.resourceVersion")
		}
		if r.namespaced {
			all, err := r.client("").List(t.Context(), metav1.ListOptions{LabelSelector: "suite=" + suite + ",list=yes"})
			if err != nil {
				t.Fatalf("list across namespaces: %v", err)
			}
			checkNames(t, "list across namespaces", names(t, all), n1, n2)
		}
	})

	t.Run("update", func(t *testing.T) {
		n := name("u")
		created := create(t, n, labels())
		obj := created.DeepCopyObject().(T)
		obj.SetLabels(labels("updated", "1"))
		updated, err := c.Update(t.Context(), obj, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if updated.GetLabels()["updated"] != "1" || updated.GetResourceVersion() == created.GetResourceVersion() {
			t.Errorf("update: labels %v rv %s (was %s)", updated.GetLabels(), updated.GetResourceVersion(), created.GetResourceVersion())
		}
		if ut, ct := updated.GetCreationTimestamp(), created.GetCreationTimestamp(); updated.GetUID() != created.GetUID() || !ut.Equal(&ct) {
			t.Error("update changed uid or creationTimestamp")
		}
		if got := get(t, n); got.GetLabels()["updated"] != "1" {
			t.Errorf("stored labels %v", got.GetLabels())
		}

		// The old resourceVersion is stale now.
		stale := created.DeepCopyObject().(T)
		stale.SetLabels(labels("stale", "1"))
		_, err = c.Update(t.Context(), stale, metav1.UpdateOptions{})
		checkStatusErr(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(
			"Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again",
			r.groupResource(), n))
		if got := get(t, n); got.GetLabels()["stale"] != "" {
			t.Error("a conflicting update was stored")
		}

		// Without a resourceVersion an update is unconditional.
		uncond := get(t, n)
		uncond.SetResourceVersion("")
		uncond.SetLabels(labels("unconditional", "1"))
		if _, err := c.Update(t.Context(), uncond, metav1.UpdateOptions{}); err != nil {
			t.Errorf("unconditional update: %v", err)
		}

		// PUT of an object that does not exist.
		_, err = c.Update(t.Context(), r.newObj(ns, name("nope"), nil), metav1.UpdateOptions{})
		if r.resource == "leases" || r.resource == "events" {
			// Leases and events allow create on update, as in kube.
			if err != nil {
				t.Errorf("PUT of a missing %s: %v, want created", r.resource, err)
			}
		} else if !apierrors.IsNotFound(err) {
			t.Errorf("PUT of a missing object: %v, want NotFound", err)
		}
	})

	t.Run("patch", func(t *testing.T) {
		n := name("p")
		created := create(t, n, labels())
		patches := []struct {
			pt    types.PatchType
			body  string
			label string
		}{
			{types.MergePatchType, `{"metadata":{"labels":{"merge":"1"}}}`, "merge"},
			{types.JSONPatchType, `[{"op":"add","path":"/metadata/labels/json","value":"1"}]`, "json"},
			{types.StrategicMergePatchType, `{"metadata":{"labels":{"strategic":"1"}}}`, "strategic"},
		}
		rv := created.GetResourceVersion()
		for _, p := range patches {
			out, err := c.Patch(t.Context(), n, p.pt, []byte(p.body), metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("%s patch: %v", p.pt, err)
			}
			if out.GetLabels()[p.label] != "1" || out.GetResourceVersion() == rv {
				t.Errorf("%s patch: labels %v rv %s (was %s)", p.pt, out.GetLabels(), out.GetResourceVersion(), rv)
			}
			rv = out.GetResourceVersion()
		}
		got := get(t, n)
		for _, p := range patches {
			if got.GetLabels()[p.label] != "1" {
				t.Errorf("stored labels %v lack %s", got.GetLabels(), p.label)
			}
		}
		if got.GetLabels()["suite"] != suite {
			t.Errorf("patches lost the labels they did not touch: %v", got.GetLabels())
		}

		_, err := c.Patch(t.Context(), name("nope-patch"), types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("patch of a missing object: %v, want NotFound", err)
		}
		// A resourceVersion in a patch is a precondition.
		_, err = c.Patch(t.Context(), n, types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"`+created.GetResourceVersion()+`","labels":{"late":"1"}}}`), metav1.PatchOptions{})
		if !apierrors.IsConflict(err) {
			t.Errorf("patch with a stale resourceVersion: %v, want Conflict", err)
		}
	})

	t.Run("dryRun", func(t *testing.T) {
		dry := []string{metav1.DryRunAll}
		n := name("dry")
		out, err := c.Create(t.Context(), r.newObj(ns, n, labels()), metav1.CreateOptions{DryRun: dry})
		if err != nil {
			t.Fatalf("dry-run create: %v", err)
		}
		if out.GetName() != n {
			t.Errorf("dry-run create answered name %q", out.GetName())
		}
		if _, err := c.Get(t.Context(), n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("dry-run create stored the object: %v", err)
		}

		created := create(t, n, labels())
		obj := created.DeepCopyObject().(T)
		obj.SetLabels(labels("dry", "update"))
		out, err = c.Update(t.Context(), obj, metav1.UpdateOptions{DryRun: dry})
		if err != nil {
			t.Fatalf("dry-run update: %v", err)
		}
		if out.GetLabels()["dry"] != "update" {
			t.Errorf("dry-run update answered labels %v", out.GetLabels())
		}
		_, err = c.Patch(t.Context(), n, types.MergePatchType, []byte(`{"metadata":{"labels":{"dry":"patch"}}}`), metav1.PatchOptions{DryRun: dry})
		if err != nil {
			t.Fatalf("dry-run patch: %v", err)
		}
		if err := c.Delete(t.Context(), n, metav1.DeleteOptions{DryRun: dry}); err != nil {
			t.Fatalf("dry-run delete: %v", err)
		}
		got := get(t, n)
		if got.GetResourceVersion() != created.GetResourceVersion() || got.GetLabels()["dry"] != "" || got.GetDeletionTimestamp() != nil {
			t.Errorf("dry-run writes changed the object: rv %s (was %s) labels %v deletionTimestamp %v",
				got.GetResourceVersion(), created.GetResourceVersion(), got.GetLabels(), got.GetDeletionTimestamp())
		}
		if r.namespaced {
			err = c.DeleteCollection(t.Context(), metav1.DeleteOptions{DryRun: dry}, metav1.ListOptions{LabelSelector: "suite=" + suite})
			if err != nil {
				t.Fatalf("dry-run deletecollection: %v", err)
			}
			get(t, n)
		}
	})

	t.Run("delete", func(t *testing.T) {
		n := name("d")
		created := create(t, n, labels())
		if err := c.Delete(t.Context(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(t.Context(), n, metav1.GetOptions{})
		if r.deleteMarks {
			if err != nil {
				t.Fatalf("get after delete: %v, want the object, marked", err)
			}
			if got.GetDeletionTimestamp() == nil {
				t.Error("deleted object has no deletionTimestamp")
			}
			return
		}
		if !apierrors.IsNotFound(err) {
			t.Fatalf("get after delete: %v, want NotFound", err)
		}
		err = c.Delete(t.Context(), n, metav1.DeleteOptions{})
		checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, fmt.Sprintf("%s %q not found", r.groupResource(), n))
		// The name can be used again, by a new object.
		again := create(t, n, labels())
		if again.GetUID() == created.GetUID() {
			t.Error("recreated object has the old uid")
		}
	})

	t.Run("deletecollection", func(t *testing.T) {
		if r.noDeleteCollection {
			err := c.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "suite=" + suite})
			checkStatusErr(t, err, 405, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
			return
		}
		x1, x2, x3, y := name("x1"), name("x2"), name("x3"), name("y")
		for _, n := range []string{x1, x2, x3} {
			create(t, n, labels("dc", "x"))
		}
		create(t, y, labels("dc", "y"))
		err := c.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "suite=" + suite + ",dc=x"})
		if err != nil {
			t.Fatal(err)
		}
		list, err := c.List(t.Context(), metav1.ListOptions{LabelSelector: "suite=" + suite + ",dc"})
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "left after deleting dc=x", names(t, list), y)

		// Field selectors select too.
		err = c.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "metadata.name=" + y})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(t.Context(), y, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("deletecollection by metadata.name left %s: %v", y, err)
		}
	})

	t.Run("watch", func(t *testing.T) {
		n := name("w")
		sel := "suite=" + suite + ",watched=yes"
		list, err := c.List(t.Context(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		lm, _ := metaList(list)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: lm.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		create(t, n, labels("watched", "yes"))
		if _, err := c.Patch(t.Context(), n, types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"1"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(t.Context(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		evs := collectEvents(t, w, func(ev watch.Event) bool {
			m := ev.Object.(metav1.Object)
			return ev.Type == watch.Deleted || (r.deleteMarks && m.GetDeletionTimestamp() != nil)
		})
		checkEventOrder(t, evs, r.deleteMarks)
	})
}

// metaList returns the list metadata of a list.
func metaList(list runtime.Object) (metav1.ListInterface, error) {
	type lister interface{ GetListMeta() metav1.ListInterface }
	if l, ok := list.(lister); ok {
		return l.GetListMeta(), nil
	}
	return nil, fmt.Errorf("%T is not a list", list)
}

// collectEvents reads events from w until last returns true for one (that
// one included), failing after 15 seconds.
func collectEvents(t testing.TB, w watch.Interface, last func(watch.Event) bool) []watch.Event {
	t.Helper()
	var evs []watch.Event
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %s", eventTypes(evs))
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error event: %+v", ev.Object)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			evs = append(evs, ev)
			if last(ev) {
				return evs
			}
		case <-timeout.C:
			t.Fatalf("timed out waiting for watch events; got %s", eventTypes(evs))
		}
	}
}

func eventTypes(evs []watch.Event) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = string(ev.Type)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// checkEventOrder checks ADDED, then only MODIFIED, then DELETED (or, when
// delete only marks, a final MODIFIED), with increasing resourceVersions.
func checkEventOrder(t testing.TB, evs []watch.Event, deleteMarks bool) {
	t.Helper()
	if len(evs) < 3 {
		t.Fatalf("events %s, want ADDED MODIFIED... DELETED", eventTypes(evs))
	}
	lastType := watch.Deleted
	if deleteMarks {
		lastType = watch.Modified
	}
	for i, ev := range evs {
		want := watch.Modified
		switch i {
		case 0:
			want = watch.Added
		case len(evs) - 1:
			want = lastType
		}
		if ev.Type != want {
			t.Errorf("events %s: #%d is %s, want %s", eventTypes(evs), i, ev.Type, want)
		}
	}
	prev := int64(0)
	for _, ev := range evs {
		var rv int64
		fmt.Sscan(ev.Object.(metav1.Object).GetResourceVersion(), &rv)
		if rv <= prev {
			t.Errorf("event resourceVersions do not increase: %d after %d", rv, prev)
		}
		prev = rv
	}
}
