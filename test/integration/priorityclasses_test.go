package integration

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestPriorityClasses: the built-in classes exist, classes are served with
// kube's validation, Table and messages, and the Priority admission plugin
// resolves a pod's class into its priority.
func TestPriorityClasses(t *testing.T) {
	ctx := context.Background()
	pcs := cs.SchedulingV1().PriorityClasses()

	t.Run("BuiltIns", func(t *testing.T) {
		for name, value := range map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
			pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get %s: %v", name, err)
			}
			if pc.Value != value || pc.GlobalDefault || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != v1.PreemptLowerPriority || pc.Description == "" {
				t.Errorf("%s: %+v", name, pc)
			}
			err = pcs.Delete(ctx, name, metav1.DeleteOptions{})
			checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
				`priorityclasses.scheduling.k8s.io "`+name+`" is forbidden: this is a system priority class and cannot be deleted`)
		}
	})

	t.Run("CRUD", func(t *testing.T) {
		name := uniqueName(t, "pc")
		w, err := pcs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		pc, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != v1.PreemptLowerPriority {
			t.Errorf("preemptionPolicy %v, want the default PreemptLowerPriority", pc.PreemptionPolicy)
		}
		select {
		case ev := <-w.ResultChan():
			if got, ok := ev.Object.(*schedulingv1.PriorityClass); ev.Type != watch.Added || !ok || got.Name != name {
				t.Errorf("watch event %s %T", ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event for the created class")
		}
		pc.Description = "updated"
		if pc, err = pcs.Update(ctx, pc, metav1.UpdateOptions{}); err != nil || pc.Description != "updated" {
			t.Fatalf("update: %v %+v", err, pc)
		}
		if pc.Generation != 1 {
			t.Errorf("generation %d after an update, want kube's 1", pc.Generation)
		}
		_, err = pcs.Patch(ctx, name, types.MergePatchType, []byte(`{"value":1001}`), metav1.PatchOptions{})
		st := checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`PriorityClass.scheduling.k8s.io "`+name+`" is invalid: value: Forbidden: may not be changed in an update.`)
		checkCauses(t, st, map[string]metav1.CauseType{"value": metav1.CauseTypeForbidden})
		_, err = pcs.Patch(ctx, name, types.MergePatchType, []byte(`{"preemptionPolicy":"Never"}`), metav1.PatchOptions{})
		checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`PriorityClass.scheduling.k8s.io "`+name+`" is invalid: preemptionPolicy: Invalid value: "Never": field is immutable`)
		// Server-side apply knows the type (forced: the update above owns
		// the description).
		applied, err := pcs.Patch(ctx, name, types.ApplyPatchType,
			[]byte(`{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"`+name+`"},"value":1000,"description":"applied"}`),
			metav1.PatchOptions{FieldManager: "tester", Force: ptr(true)})
		if err != nil || applied.Description != "applied" {
			t.Fatalf("apply: %v %+v", err, applied)
		}
		list, err := pcs.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("list: %v %v", err, list)
		}
		if err := pcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = pcs.Get(ctx, name, metav1.GetOptions{})
		checkStatusErr(t, err, http.StatusNotFound, metav1.StatusReasonNotFound,
			`priorityclasses.scheduling.k8s.io "`+name+`" not found`)
	})

	t.Run("Validation", func(t *testing.T) {
		name := uniqueName(t, "pc")
		_, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000000001}, metav1.CreateOptions{})
		checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`PriorityClass.scheduling.k8s.io "`+name+`" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000`)
		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-" + name}, Value: 5}, metav1.CreateOptions{})
		checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`PriorityClass.scheduling.k8s.io "system-`+name+`" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-`+name+` is not a known system priority class`)
		policy := v1.PreemptionPolicy("Sometimes")
		_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1, PreemptionPolicy: &policy}, metav1.CreateOptions{})
		checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`PriorityClass.scheduling.k8s.io "`+name+`" is invalid: preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`)
	})

	t.Run("OpenAPI", func(t *testing.T) {
		r := doRaw(t, "GET", "/openapi/v3/apis/scheduling.k8s.io/v1", nil)
		if r.Code != http.StatusOK || !strings.Contains(string(r.Body), `"io.k8s.api.scheduling.v1.PriorityClass"`) ||
			!strings.Contains(string(r.Body), `"/apis/scheduling.k8s.io/v1/priorityclasses/{name}"`) {
			t.Fatalf("OpenAPI v3 of scheduling.k8s.io/v1: %d %.300s", r.Code, r.Body)
		}
	})

	t.Run("Table", func(t *testing.T) {
		doc := decodeTable(t, doRaw(t, "GET", "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical", nil, "Accept", acceptTableV1))
		var cols []string
		for _, c := range doc.ColumnDefinitions {
			cols = append(cols, c["name"].(string)+"/"+c["type"].(string))
		}
		if want := []string{"Name/string", "Value/integer", "Global-Default/boolean", "Age/string", "PreemptionPolicy/string"}; !reflect.DeepEqual(cols, want) {
			t.Errorf("columns %v, want %v", cols, want)
		}
		if len(doc.Rows) != 1 {
			t.Fatalf("%d rows", len(doc.Rows))
		}
		cells := doc.Rows[0].Cells
		if len(cells) != 5 || cells[0] != "system-node-critical" || cells[1] != float64(2000001000) || cells[2] != false || cells[4] != "PreemptLowerPriority" {
			t.Errorf("cells %v", cells)
		}
	})

	t.Run("Admission", func(t *testing.T) {
		ns := newNamespace(t)
		pods := cs.CoreV1().Pods(ns)
		// The built-in classes may be used in any namespace (kube 1.17+).
		p := newPod("critical", nil)
		p.Spec.PriorityClassName = "system-node-critical"
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Priority == nil || *got.Spec.Priority != 2000001000 || *got.Spec.PreemptionPolicy != v1.PreemptLowerPriority {
			t.Errorf("priority %v policy %v", got.Spec.Priority, got.Spec.PreemptionPolicy)
		}
		// A class created just before is found at once.
		name := uniqueName(t, "pc")
		never := v1.PreemptNever
		if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 77, PreemptionPolicy: &never}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pcs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		p = newPod("mine", nil)
		p.Spec.PriorityClassName = name
		if got, err = pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Priority != 77 || *got.Spec.PreemptionPolicy != v1.PreemptNever {
			t.Errorf("priority %d policy %s, want 77 Never", *got.Spec.Priority, *got.Spec.PreemptionPolicy)
		}
		// Priority is immutable; an update that omits it keeps it.
		got.Spec.Priority, got.Spec.PreemptionPolicy = nil, nil
		if got, err = pods.Update(ctx, got, metav1.UpdateOptions{}); err != nil || *got.Spec.Priority != 77 {
			t.Fatalf("update: %v", err)
		}
		// No class, no default: 0.
		if got, err = pods.Create(ctx, newPod("plain", nil), metav1.CreateOptions{}); err != nil || *got.Spec.Priority != 0 || got.Spec.PriorityClassName != "" {
			t.Fatalf("plain pod: %v", err)
		}

		p = newPod("unknown", nil)
		p.Spec.PriorityClassName = "no-such-class"
		_, err = pods.Create(ctx, p, metav1.CreateOptions{})
		st := checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
			`pods "unknown" is forbidden: no PriorityClass with name no-such-class was found`)
		if st.Details == nil || st.Details.Name != "unknown" || st.Details.Kind != "pods" {
			t.Errorf("details %+v", st.Details)
		}
		p = newPod("given", nil)
		p.Spec.PriorityClassName, p.Spec.Priority = name, ptr[int32](5)
		_, err = pods.Create(ctx, p, metav1.CreateOptions{})
		checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
			`pods "given" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 77 from the given PriorityClass name`)
	})

	t.Run("GlobalDefault", func(t *testing.T) {
		ns := newNamespace(t)
		first, second := uniqueName(t, "pc"), uniqueName(t, "pc")
		if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: first}, Value: 3, GlobalDefault: true}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The other tests share the server: the default goes before they run.
		t.Cleanup(func() {
			_ = pcs.Delete(context.Background(), first, metav1.DeleteOptions{})
			eventually(t, 10*time.Second, "the default class gone from admission", func(ctx context.Context) (bool, error) {
				p, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err == nil && p.Spec.PriorityClassName == "", err
			})
		})
		// The admission cache follows a watch: a pod sees the default soon.
		eventually(t, 10*time.Second, "a pod given the default class", func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("d", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil && p.Spec.PriorityClassName == first && *p.Spec.Priority == 3, err
		})
		_, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: second}, Value: 4, GlobalDefault: true}, metav1.CreateOptions{})
		checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
			`priorityclasses.scheduling.k8s.io "`+second+`" is forbidden: PriorityClass `+first+` is already marked as default. Only one default can exist`)
		// Re-marking the default itself is allowed.
		if _, err := pcs.Patch(ctx, first, types.MergePatchType, []byte(`{"globalDefault":true,"description":"d"}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
