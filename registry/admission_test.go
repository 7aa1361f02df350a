package registry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	v1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// attrLog is an admission plugin (both halves) that records each call as
// "half op resource/subresource ns/name object old options dryRun".
type attrLog struct{ calls []string }

func (l *attrLog) record(half string, a *admission.Attributes) {
	typeName := func(o runtime.Object) string {
		if o == nil {
			return "-"
		}
		return fmt.Sprintf("%T", o)
	}
	l.calls = append(l.calls, fmt.Sprintf("%s %s %s/%s %s/%s %s %s %s %v", half, a.Operation, a.Resource.Resource, a.Subresource,
		a.Namespace, a.Name, typeName(a.Object), typeName(a.OldObject), typeName(a.Options), a.DryRun))
}

func (l *attrLog) Admit(_ context.Context, a *admission.Attributes) error {
	l.record("mutate", a)
	return nil
}

func (l *attrLog) Validate(_ context.Context, a *admission.Attributes) error {
	l.record("validate", a)
	return nil
}

// TestAdmissionSeesEveryWrite: create, update, a status update, delete
// and deletecollection each pass both halves of the chain, with the old
// object and the request's options; a subresource that acts is admitted
// once as its own object, and the writes it makes are not.
func TestAdmissionSeesEveryWrite(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	log := &attrLog{}
	chain := &admission.Chain{Mutators: []admission.Mutator{log}, Validators: []admission.Validator{log}}
	store := registry.NewStore(newTestStorage(t), pods.NewStrategy(), registry.Options{Logger: quiet, Admission: chain})
	go func() { _ = store.Run(t.Context()) }()
	ctx := t.Context()

	expect := func(what string, want ...string) {
		t.Helper()
		// An update that started from the watch cache's copy and found it
		// stale runs again from etcd's, admission included (as kube's
		// GuaranteedUpdate with a cached object): the same calls repeated.
		calls := log.calls
		for len(want) > 0 && len(calls) >= 2*len(want) && slices.Equal(calls[:len(want)], calls[len(want):2*len(want)]) {
			calls = calls[len(want):]
		}
		if !slices.Equal(calls, want) {
			t.Errorf("%s: admission calls\n%q\nwant\n%q", what, log.calls, want)
		}
		log.calls = nil
	}
	pod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	}
	const podT, optsC, optsU, optsD = "*v1.Pod", "*v1.CreateOptions", "*v1.UpdateOptions", "*v1.DeleteOptions"

	if _, err := store.Create(ctx, "ns", pod("a"), registry.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("create",
		"mutate CREATE pods/ ns/a "+podT+" - "+optsC+" false",
		"validate CREATE pods/ ns/a "+podT+" - "+optsC+" false")

	if _, err := store.Create(ctx, "ns", pod("dry"), registry.CreateOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	expect("dry-run create",
		"mutate CREATE pods/ ns/dry "+podT+" - "+optsC+" true",
		"validate CREATE pods/ ns/dry "+podT+" - "+optsC+" true")

	relabel := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		p := cur.(*v1.Pod)
		p.Labels = map[string]string{"x": "y"}
		return p, nil
	}
	if _, _, err := store.Update(ctx, "ns", "a", relabel, registry.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("update",
		"mutate UPDATE pods/ ns/a "+podT+" "+podT+" "+optsU+" false",
		"validate UPDATE pods/ ns/a "+podT+" "+podT+" "+optsU+" false")

	status := store.Subresource("status", pods.NewStatusStrategy())
	if _, _, err := status.Update(ctx, "ns", "a", relabel, registry.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("status update",
		"mutate UPDATE pods/status ns/a "+podT+" "+podT+" "+optsU+" false",
		"validate UPDATE pods/status ns/a "+podT+" "+podT+" "+optsU+" false")

	if _, _, err := store.WithoutAdmission().Update(ctx, "ns", "a", relabel, registry.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("update without admission")

	if err := store.AdmitCreate(ctx, "binding", v1.SchemeGroupVersion.WithKind("Binding"), "ns", "a", &v1.Binding{}, true); err != nil {
		t.Fatal(err)
	}
	expect("subresource create",
		"mutate CREATE pods/binding ns/a *v1.Binding - "+optsC+" true",
		"validate CREATE pods/binding ns/a *v1.Binding - "+optsC+" true")

	if _, _, err := store.Delete(ctx, "ns", "a", &metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	expect("delete",
		"mutate DELETE pods/ ns/a - - "+optsD+" false",
		"validate DELETE pods/ ns/a - "+podT+" "+optsD+" false")

	for _, name := range []string{"b", "c"} {
		if _, err := store.Create(ctx, "ns", pod(name), registry.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	log.calls = nil
	if _, err := store.DeleteCollection(ctx, "ns", &metainternalversion.ListOptions{}, &metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	expect("deletecollection",
		"mutate DELETE pods/ ns/b - - "+optsD+" false",
		"validate DELETE pods/ ns/b - "+podT+" "+optsD+" false",
		"mutate DELETE pods/ ns/c - - "+optsD+" false",
		"validate DELETE pods/ ns/c - "+podT+" "+optsD+" false")
}

// defaultsSeen records, for each pod admission sees, whether kube's scheme
// defaults were applied to it already.
type defaultsSeen struct{ seen []string }

func (d *defaultsSeen) Admit(_ context.Context, a *admission.Attributes) error {
	if p, ok := a.Object.(*v1.Pod); ok {
		d.seen = append(d.seen, fmt.Sprintf("%s %s %s", a.Operation, p.Spec.RestartPolicy, p.Spec.Containers[0].ImagePullPolicy))
	}
	return nil
}

// TestAdmissionSeesDefaults: mutating admission gets the pod after kube's
// scheme defaults, on create and update, as kube defaults on decoding.
func TestAdmissionSeesDefaults(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	seen := &defaultsSeen{}
	store := registry.NewStore(newTestStorage(t), pods.NewStrategy(), registry.Options{Logger: quiet,
		Admission: &admission.Chain{Mutators: []admission.Mutator{seen}}})
	ctx := t.Context()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := store.Create(ctx, "ns", pod, registry.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bare := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		p := cur.(*v1.Pod)
		p.Spec.Containers[0].ImagePullPolicy = ""
		return p, nil
	}
	if _, _, err := store.Update(ctx, "ns", "p", bare, registry.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"CREATE Always Always", "UPDATE Always Always"}; !slices.Equal(seen.seen, want) {
		t.Errorf("admission saw %q, want %q", seen.seen, want)
	}
}
