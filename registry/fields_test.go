package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/openapi"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/storage"
	etcdstore "github.com/corekube/corekube/storage/etcd"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/yaml"
)

// fieldsOp is one write of a fieldsCase (or a step that sets the scene).
type fieldsOp struct {
	desc string
	run  func(t *testing.T, e *fieldsEnv, namespace, name string) (runtime.Object, error)
	// unchanged: the write is a no-op, with the resourceVersion and
	// managedFields (times included) of the state before it.
	unchanged bool
	// sameManaged: the write keeps managedFields as they were, times
	// included.
	sameManaged bool
	// conflict, when set, is the message of the 409 Conflict the write
	// fails with; causes are its causes, as "field: message".
	conflict string
	causes   []string
	// fails, when set, is the Status the write fails with.
	fails *metav1.Status
}

// noop is the write changing nothing (unchanged).
func (o fieldsOp) noop() fieldsOp {
	o.unchanged = true
	return o
}

// keepsManaged is the write leaving managedFields as they were.
func (o fieldsOp) keepsManaged() fieldsOp {
	o.sameManaged = true
	return o
}

// failsWith is the write failing with this code, reason and message.
func (o fieldsOp) failsWith(code int32, reason metav1.StatusReason, message string) fieldsOp {
	o.fails = &metav1.Status{Code: code, Reason: reason, Message: message}
	return o
}

// conflicts is the write failing with kube's apply conflict.
func (o fieldsOp) conflicts(message string, causes ...string) fieldsOp {
	o.conflict, o.causes = message, causes
	return o
}

// apply is a server-side apply of the pod's YAML configuration by manager.
func apply(manager, config string) fieldsOp {
	return applyOp(manager, config, false, false)
}

// forceApply is apply with force: it takes the fields it conflicts on.
func forceApply(manager, config string) fieldsOp {
	return applyOp(manager, config, true, false)
}

// applyStatus is a server-side apply of pods/status.
func applyStatus(manager, config string) fieldsOp {
	return applyOp(manager, config, false, true)
}

func applyOp(manager, config string, force, status bool) fieldsOp {
	desc := fmt.Sprintf("apply by %s of %s", manager, config)
	if force {
		desc = "force " + desc
	}
	if status {
		desc += " to status"
	}
	return fieldsOp{desc: desc, run: func(t *testing.T, e *fieldsEnv, namespace, name string) (runtime.Object, error) {
		store := e.pods
		if status {
			store = e.status
		}
		out, _, err := store.Apply(t.Context(), namespace, name, applyConfig(t, name, config), registry.ApplyOptions{FieldManager: manager, Force: force})
		return out, err
	}}
}

// update is an Update (a PUT, or a non-apply patch) of the pod by manager:
// change edits the stored pod.
func update(manager, desc string, change func(*v1.Pod)) fieldsOp {
	return updateOp(manager, desc, change, false)
}

// updateStatus is an Update of pods/status by manager.
func updateStatus(manager, desc string, change func(*v1.Pod)) fieldsOp {
	return updateOp(manager, desc, change, true)
}

func updateOp(manager, desc string, change func(*v1.Pod), status bool) fieldsOp {
	desc = fmt.Sprintf("update by %q: %s", manager, desc)
	if status {
		desc = "status " + desc
	}
	return fieldsOp{desc: desc, run: func(t *testing.T, e *fieldsEnv, namespace, name string) (runtime.Object, error) {
		store := e.pods
		if status {
			store = e.status
		}
		out, _, err := store.Update(t.Context(), namespace, name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			change(cur.(*v1.Pod))
			return cur, nil
		}, registry.UpdateOptions{FieldManager: manager})
		return out, err
	}}
}

// aged sets the stored managedFields times to 2020 (ageManagedFields).
func aged() fieldsOp {
	return fieldsOp{desc: "age managedFields", run: func(t *testing.T, e *fieldsEnv, namespace, name string) (runtime.Object, error) {
		if err := e.ageManagedFields(t.Context(), namespace, name); err != nil {
			return nil, err
		}
		return e.pods.Get(t.Context(), namespace, name, nil)
	}}
}

func setLabel(k, v string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

// fieldsCase is a sequence of writes to one pod and what the pod and its
// managedFields are after them.
type fieldsCase struct {
	name string
	ops  []fieldsOp
	// want is YAML the pod must contain (expectContains: null means
	// absent).
	want    string
	managed []fieldsEntry
	// gone: the writes leave no pod.
	gone bool
}

// The configurations the cases apply.
const (
	podC    = `{spec: {containers: [{name: c, image: busybox}]}}`
	podCA   = `{metadata: {labels: {a: "1"}}, spec: {containers: [{name: c, image: busybox}]}}`
	podCAB  = `{metadata: {labels: {a: "1", b: "2"}}, spec: {containers: [{name: c, image: busybox}]}}`
	podCA2  = `{metadata: {labels: {a: "2"}}, spec: {containers: [{name: c, image: busybox}]}}`
	labelA1 = `{metadata: {labels: {a: "1"}}}`
	labelA2 = `{metadata: {labels: {a: "2"}}}`
)

var fieldsCases = []fieldsCase{{
	name: "apply-creates",
	ops:  []fieldsOp{apply("m1", podCA)},
	// Only what was applied is owned: defaults and the status the create
	// set are not.
	want:    `{metadata: {labels: {a: "1"}}, spec: {containers: [{name: c, image: busybox, imagePullPolicy: Always}], restartPolicy: Always}, status: {phase: Pending}}`,
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}, {
	name: "reapply-is-noop",
	ops: []fieldsOp{
		apply("m1", podCA),
		aged(),
		apply("m1", podCA).noop(),
		update("u", "no change", func(*v1.Pod) {}).noop(),
	},
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}, {
	name: "dropped-field-removed",
	ops: []fieldsOp{
		apply("m1", `{metadata: {labels: {a: "1", b: "2"}, annotations: {x: "1"}}, spec: {containers: [{name: c, image: busybox}]}}`),
		apply("m1", podCA),
	},
	want:    `{metadata: {labels: {a: "1", b: null}, annotations: null}}`,
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}, {
	name: "dropped-field-kept-for-other-applier",
	ops: []fieldsOp{
		apply("m1", podCAB),
		apply("m2", `{metadata: {labels: {b: "2"}}}`),
		apply("m1", podCA),
	},
	want: `{metadata: {labels: {a: "1", b: "2"}}}`,
	managed: []fieldsEntry{
		applied("m1", ".metadata.labels.a", ctr("c", "image")),
		// m2 applied a value m1 had set: kube records no time.
		applied("m2", ".metadata.labels.b").untimed(),
	},
}, {
	name: "dropped-field-kept-for-updater",
	ops: []fieldsOp{
		apply("m1", podCAB),
		update("u", "label b=3", setLabel("b", "3")),
		apply("m1", podCA),
	},
	want: `{metadata: {labels: {a: "1", b: "3"}}}`,
	managed: []fieldsEntry{
		applied("m1", ".metadata.labels.a", ctr("c", "image")),
		updated("u", ".metadata.labels.b"),
	},
}, {
	name: "shared-ownership",
	ops: []fieldsOp{
		apply("m1", podCA),
		apply("m2", labelA1),
		// m2 still owns a: m1 dropping it keeps it.
		apply("m1", podC),
		// Nobody owns a any more: it goes, and m2, owning nothing, has no
		// entry.
		apply("m2", `{}`),
	},
	want:    `{metadata: {labels: null}}`,
	managed: []fieldsEntry{applied("m1", ctr("c", "image"))},
}, {
	name: "conflict-with-applier",
	ops: []fieldsOp{
		apply("m1", podCA),
		apply("m2", labelA2).conflicts(`Apply failed with 1 conflict: conflict with "m1": .metadata.labels.a`,
			`.metadata.labels.a: conflict with "m1"`),
	},
	want:    `{metadata: {labels: {a: "1"}}}`,
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}, {
	name: "force-takes-ownership",
	ops: []fieldsOp{
		apply("m1", podCA),
		apply("m2", labelA1),
		forceApply("m3", labelA2),
	},
	want: `{metadata: {labels: {a: "2"}}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		applied("m3", ".metadata.labels.a"),
	},
}, {
	// kubectl label after an apply, then the applier again.
	name: "conflict-with-updater",
	ops: []fieldsOp{
		apply("m1", podCA),
		update("u", "label a=2", setLabel("a", "2")),
		apply("m1", podCA).conflicts(`Apply failed with 1 conflict: conflict with "u" using v1: .metadata.labels.a`,
			`.metadata.labels.a: conflict with "u" using v1`),
		forceApply("m1", podCA),
	},
	want:    `{metadata: {labels: {a: "1"}}}`,
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}, {
	name: "conflicts-listed-by-manager",
	ops: []fieldsOp{
		apply("m1", podCAB),
		update("u", "label c=3", setLabel("c", "3")),
		apply("m2", `{metadata: {labels: {a: "9", b: "9", c: "9"}}}`).conflicts(
			"Apply failed with 3 conflicts: conflicts with \"m1\":\n- .metadata.labels.a\n- .metadata.labels.b\nconflicts with \"u\" using v1:\n- .metadata.labels.c",
			`.metadata.labels.a: conflict with "m1"`, `.metadata.labels.b: conflict with "m1"`, `.metadata.labels.c: conflict with "u" using v1`),
		forceApply("m2", `{metadata: {labels: {a: "9", b: "9", c: "9"}}}`),
	},
	want: `{metadata: {labels: {a: "9", b: "9", c: "9"}}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		applied("m2", ".metadata.labels.a", ".metadata.labels.b", ".metadata.labels.c"),
	},
}, {
	name: "update-takes-only-what-it-changes",
	ops: []fieldsOp{
		apply("m1", podCA),
		update("u", "image nginx", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx" }),
		apply("m1", podCA).conflicts(`Apply failed with 1 conflict: conflict with "u" using v1: .spec.containers[name="c"].image`,
			`.spec.containers[name="c"].image: conflict with "u" using v1`),
	},
	want: `{metadata: {labels: {a: "1"}}, spec: {containers: [{name: c, image: nginx}]}}`,
	managed: []fieldsEntry{
		applied("m1", ".metadata.labels.a", ctr("c")),
		updated("u", `.spec.containers[name="c"].image`),
	},
}, {
	// Two appliers of one containers list: had it been atomic, m2's
	// apply of d alone would have conflicted on .spec.containers.
	name: "containers-merged-by-name",
	ops: []fieldsOp{
		apply("m1", `{spec: {containers: [{name: c, image: busybox}, {name: d, image: busybox}]}}`),
		apply("m2", `{spec: {containers: [{name: d, image: busybox}]}}`),
		apply("m1", podC),
		apply("m2", `{spec: {containers: [{name: d, image: nginx}]}}`),
	},
	want: `{spec: {containers: [{name: c, image: busybox}, {name: d, image: nginx}]}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		applied("m2", ctr("d", "image")),
	},
}, {
	// The key of a port is containerPort and protocol, TCP when omitted
	// (the schema's default).
	name: "ports-keyed-by-port-and-protocol",
	ops: []fieldsOp{
		apply("m1", `{spec: {containers: [{name: c, image: busybox, ports: [{containerPort: 80}, {containerPort: 80, protocol: UDP}]}]}}`),
		apply("m2", `{spec: {containers: [{name: c, ports: [{containerPort: 80, protocol: UDP}]}]}}`),
		apply("m1", `{spec: {containers: [{name: c, image: busybox, ports: [{containerPort: 80}]}]}}`),
	},
	want: `{spec: {containers: [{name: c, ports: [{containerPort: 80, protocol: TCP}, {containerPort: 80, protocol: UDP}]}]}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image"),
			`.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"]`,
			`.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].containerPort`),
		applied("m2", ctr("c"),
			`.spec.containers[name="c"].ports[containerPort=80,protocol="UDP"]`,
			`.spec.containers[name="c"].ports[containerPort=80,protocol="UDP"].containerPort`,
			`.spec.containers[name="c"].ports[containerPort=80,protocol="UDP"].protocol`).untimed(),
	},
}, {
	// Tolerations are one atomic field: another toleration conflicts
	// with the whole list, force and updates take it whole.
	name: "tolerations-atomic",
	ops: []fieldsOp{
		apply("m1", `{spec: {containers: [{name: c, image: busybox}], tolerations: [{key: a, operator: Exists}]}}`),
		apply("m2", `{spec: {tolerations: [{key: b, operator: Exists}]}}`).conflicts(
			`Apply failed with 1 conflict: conflict with "m1": .spec.tolerations`, `.spec.tolerations: conflict with "m1"`),
		forceApply("m2", `{spec: {tolerations: [{key: a, operator: Exists}, {key: b, operator: Exists}]}}`),
		update("u", "add toleration c", func(p *v1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "c", Operator: v1.TolerationOpExists})
		}),
	},
	want: `{spec: {tolerations: [{key: a}, {key: b}, {key: c}]}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		updated("u", ".spec.tolerations"),
	},
}, {
	name: "finalizers-set",
	ops: []fieldsOp{
		apply("m1", `{metadata: {finalizers: [example.com/a]}, spec: {containers: [{name: c, image: busybox}]}}`),
		apply("m2", `{metadata: {finalizers: [example.com/b]}}`),
		apply("m1", podC),
	},
	want: `{metadata: {finalizers: [example.com/b]}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		applied("m2", `.metadata.finalizers[="example.com/b"]`),
	},
}, {
	name: "labels-and-annotations-granular",
	ops: []fieldsOp{
		apply("m1", `{metadata: {labels: {a: "1"}, annotations: {n1: "1"}}, spec: {containers: [{name: c, image: busybox}]}}`),
		apply("m2", `{metadata: {labels: {b: "2"}, annotations: {n2: "2"}}}`),
		update("u", "annotation n3", func(p *v1.Pod) { p.Annotations["n3"] = "3" }),
	},
	want: `{metadata: {labels: {a: "1", b: "2"}, annotations: {n1: "1", n2: "2", n3: "3"}}}`,
	managed: []fieldsEntry{
		applied("m1", ".metadata.labels.a", ".metadata.annotations.n1", ctr("c", "image")),
		applied("m2", ".metadata.labels.b", ".metadata.annotations.n2"),
		updated("u", ".metadata.annotations.n3"),
	},
}, {
	// nodeSelector is an atomic map: a subset of it conflicts with the
	// whole; the same value is shared.
	name: "nodeselector-atomic",
	ops: []fieldsOp{
		apply("m1", `{spec: {containers: [{name: c, image: busybox}], nodeSelector: {a: "1", b: "2"}}}`),
		apply("m2", `{spec: {nodeSelector: {a: "1"}}}`).conflicts(
			`Apply failed with 1 conflict: conflict with "m1": .spec.nodeSelector`, `.spec.nodeSelector: conflict with "m1"`),
		apply("m2", `{spec: {nodeSelector: {a: "1", b: "2"}}}`),
	},
	want: `{spec: {nodeSelector: {a: "1", b: "2"}}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image"), ".spec.nodeSelector"),
		applied("m2", ".spec.nodeSelector").untimed(),
	},
}, {
	name: "ownerreferences-keyed-by-uid",
	ops: []fieldsOp{
		apply("m1", `{metadata: {ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: o1, uid: uid-1}]}, spec: {containers: [{name: c, image: busybox}]}}`),
		apply("m2", `{metadata: {ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: o2, uid: uid-2}]}}`),
		apply("m1", podC),
	},
	want: `{metadata: {ownerReferences: [{name: o2, uid: uid-2}]}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		// An owner reference is an atomic struct: its key alone.
		applied("m2", `.metadata.ownerReferences[uid="uid-2"]`),
	},
}, {
	// pods/status writes are their own entries and never own the spec;
	// writes of the pod never own its status.
	name: "status-tracked-apart",
	ops: []fieldsOp{
		apply("m1", podCA),
		updateStatus("kubelet", "running, ready", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		}),
		updateStatus("kubelet", "image nginx and a message", func(p *v1.Pod) {
			p.Spec.Containers[0].Image = "nginx"
			p.Status.Message = "hello"
		}),
		update("u", "phase Failed and label a=2", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Labels["a"] = "2"
		}),
		applyStatus("ctrl", `{status: {conditions: [{type: Ready, status: "False"}]}}`).conflicts(
			`Apply failed with 1 conflict: conflict with "kubelet" with subresource "status" using v1: .status.conditions[type="Ready"].status`,
			`.status.conditions[type="Ready"].status: conflict with "kubelet" with subresource "status" using v1`),
		// Nor does it own the metadata a subresource write keeps (labels,
		// annotations, finalizers, owners).
		applyStatus("ctrl", `{status: {conditions: [{type: example.com/c, status: "True"}]}, spec: {containers: [{name: c, image: nginx}]},
		                      metadata: {labels: {x: "1"}, annotations: {x: "1"}, finalizers: [example.com/x]}}`),
		// An applier of the pod does not own the status it sends.
		apply("m3", `{status: {phase: Succeeded}, metadata: {labels: {m3: "1"}}}`),
	},
	want: `{metadata: {labels: {a: "2", m3: "1", x: null}, annotations: null, finalizers: null}, spec: {containers: [{name: c, image: busybox}]},
	        status: {phase: Running, message: hello, conditions: [{type: Ready, status: "True"}, {type: example.com/c, status: "True"}]}}`,
	managed: []fieldsEntry{
		applied("m1", ctr("c", "image")),
		applied("m3", ".metadata.labels.m3"),
		updated("u", ".metadata.labels.a"),
		updatedStatus("kubelet", ".status.message", ".status.phase", ".status.conditions", `.status.conditions[type="Ready"]`,
			`.status.conditions[type="Ready"].lastProbeTime`, `.status.conditions[type="Ready"].lastTransitionTime`,
			`.status.conditions[type="Ready"].status`, `.status.conditions[type="Ready"].type`),
		appliedStatus("ctrl", `.status.conditions[type="example.com/c"]`, `.status.conditions[type="example.com/c"].status`,
			`.status.conditions[type="example.com/c"].type`),
	},
}, {
	// At most 10 Update managers: the oldest are merged into one
	// "ancient-changes" entry; appliers are never merged.
	name: "update-managers-capped",
	ops:  append([]fieldsOp{apply("m0", podC)}, labelUpdaters(11)...),
	want: `{metadata: {labels: {u01: "1", u11: "1"}}}`,
	managed: append([]fieldsEntry{
		applied("m0", ctr("c", "image")),
		updated("ancient-changes", ".metadata.labels", ".metadata.labels.u01", ".metadata.labels.u02"),
	}, labelUpdaterEntries(3, 11)...),
}, {
	name: "empty-managedfields-resets",
	ops: []fieldsOp{
		apply("m1", podCA),
		update("u", "label b=2", setLabel("b", "2")),
		update("r", "managedFields []", func(p *v1.Pod) { p.ManagedFields = []metav1.ManagedFieldsEntry{} }),
	},
	want:    `{metadata: {labels: {a: "1", b: "2"}, managedFields: null}}`,
	managed: nil,
}, {
	// kube's documented way: one empty entry. The reset is first, and
	// updates of an object without managedFields are not tracked (kube's
	// skip-non-applied manager): the label r is owned by nobody, and nor
	// is s. The next apply starts the tracking again: kube first gives
	// everything the object has (but its status, reset on the pod) to a
	// "before-first-apply" Update entry; m1's apply, which changes nothing,
	// is recorded without a time.
	name: "empty-entry-resets",
	ops: []fieldsOp{
		apply("m1", podCA),
		update("r", "managedFields [{}] and label r", func(p *v1.Pod) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{}}
			p.Labels["r"] = "1"
		}),
		update("s", "label s", setLabel("s", "1")),
		apply("m1", podCA),
	},
	want: `{metadata: {labels: {a: "1", r: "1", s: "1"}}}`,
	managed: []fieldsEntry{
		applied("m1", ".metadata.labels.a", ctr("c", "image")).untimed(),
		updated("before-first-apply", ".metadata.labels", ".metadata.labels.a", ".metadata.labels.r", ".metadata.labels.s",
			ctr("c", "image", "imagePullPolicy", "resources", "terminationMessagePath", "terminationMessagePolicy"),
			".spec.dnsPolicy", ".spec.enableServiceLinks", ".spec.preemptionPolicy", ".spec.priority", ".spec.restartPolicy",
			".spec.schedulerName", ".spec.securityContext", ".spec.terminationGracePeriodSeconds"),
	},
}, {
	name: "invalid-managedfields-ignored",
	ops: []fieldsOp{
		apply("m1", podCA),
		update("u", "invalid managedFields and label b", func(p *v1.Pod) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "evil", Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: "v1", FieldsType: "FieldsV2", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
			p.Labels["b"] = "2"
		}),
		// A status write never sets managedFields, not even to reset them.
		updateStatus("kubelet", "managedFields [] and phase Running", func(p *v1.Pod) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{}
			p.Status.Phase = v1.PodRunning
		}),
	},
	want: `{metadata: {labels: {a: "1", b: "2"}}, status: {phase: Running}}`,
	managed: []fieldsEntry{
		applied("m1", ".metadata.labels.a", ctr("c", "image")),
		updated("u", ".metadata.labels.b"),
		updatedStatus("kubelet", ".status.phase"),
	},
}, {
	// Errors of the field manager are kube's: its Statuses, or a 500
	// with no reason and the error's text for a patch that does not fit
	// the schema. Nothing is created.
	name: "apply-errors",
	ops: []fieldsOp{
		apply("m1", `{spec: {foo: 1}}`).failsWith(500, "",
			`failed to create typed patch object (/apply-errors; /v1, Kind=Pod): .spec.foo: field not declared in schema`),
		apply("m1", `{apiVersion: v2}`).failsWith(400, metav1.StatusReasonBadRequest, `invalid object type: /v2, Kind=Pod`),
		apply("m1", `{metadata: {managedFields: [{manager: x}]}}`).failsWith(400, metav1.StatusReasonBadRequest,
			`metadata.managedFields must be nil`),
	},
	gone: true,
}, {
	name: "apply-errors-on-update",
	ops: []fieldsOp{
		apply("m1", podCA),
		apply("m1", `{spec: {containers: x}}`).failsWith(500, "",
			`failed to create typed patch object (/apply-errors-on-update; /v1, Kind=Pod): .spec.containers: expected list, got &{x}`),
	},
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}, {
	// The server's own writes (binding, eviction) have no manager.
	name: "internal-write-records-nothing",
	ops: []fieldsOp{
		apply("m1", podCA),
		aged(),
		update("", "label b", setLabel("b", "2")).keepsManaged(),
		updateStatus("", "phase Running", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }).keepsManaged(),
	},
	want:    `{metadata: {labels: {a: "1", b: "2"}}, status: {phase: Running}}`,
	managed: []fieldsEntry{applied("m1", ".metadata.labels.a", ctr("c", "image"))},
}}

// labelUpdaters are n Updates, by u01..un, each adding its own label.
func labelUpdaters(n int) []fieldsOp {
	var ops []fieldsOp
	for i := 1; i <= n; i++ {
		m := fmt.Sprintf("u%02d", i)
		ops = append(ops, update(m, "label "+m, setLabel(m, "1")))
	}
	return ops
}

func labelUpdaterEntries(from, to int) []fieldsEntry {
	var es []fieldsEntry
	for i := from; i <= to; i++ {
		m := fmt.Sprintf("u%02d", i)
		es = append(es, updated(m, ".metadata.labels."+m))
	}
	return es
}

// TestFieldsOwnership runs fieldsCases, each on its own pod of one Store.
func TestFieldsOwnership(t *testing.T) {
	e := newFieldsEnv(t)
	for _, tc := range fieldsCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var prev *v1.Pod
			for i, op := range tc.ops {
				step := fmt.Sprintf("step %d (%s)", i+1, op.desc)
				out, err := op.run(t, e, "ns", tc.name)
				if op.conflict != "" {
					expectApplyConflict(t, step, err, op.conflict, op.causes)
					continue
				}
				if op.fails != nil {
					var se apierrors.APIStatus
					if !errors.As(err, &se) {
						t.Errorf("%s: err %v, want %d %s %q", step, err, op.fails.Code, op.fails.Reason, op.fails.Message)
					} else if st := se.Status(); st.Code != op.fails.Code || st.Reason != op.fails.Reason || st.Message != op.fails.Message {
						t.Errorf("%s: %d %q %q, want %d %q %q", step, st.Code, st.Reason, st.Message, op.fails.Code, op.fails.Reason, op.fails.Message)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				pod := out.(*v1.Pod)
				// managedFields as clients see them: times to the second.
				if op.unchanged && (pod.ResourceVersion != prev.ResourceVersion || compact(pod.ManagedFields) != compact(prev.ManagedFields)) {
					t.Errorf("%s is not a no-op: resourceVersion %s -> %s, managedFields\n%v\n->\n%v", step,
						prev.ResourceVersion, pod.ResourceVersion, compact(prev.ManagedFields), compact(pod.ManagedFields))
				}
				if op.sameManaged && compact(pod.ManagedFields) != compact(prev.ManagedFields) {
					t.Errorf("%s changed managedFields\n%v\n->\n%v", step, compact(prev.ManagedFields), compact(pod.ManagedFields))
				}
				prev = pod
			}
			got, err := e.pods.Get(ctx, "ns", tc.name, nil)
			if tc.gone {
				if !apierrors.IsNotFound(err) {
					t.Errorf("get: %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pod := got.(*v1.Pod)
			expectContains(t, pod, tc.want)
			expectEntries(t, pod.ManagedFields, tc.managed)
			if compact(pod.ManagedFields) != compact(prev.ManagedFields) {
				t.Errorf("the last write answered managedFields %s, stored %s", compact(prev.ManagedFields), compact(pod.ManagedFields))
			}
		})
	}
}

// expectApplyConflict checks err is kube's 409 for an apply conflict:
// reason Conflict, message, and one FieldManagerConflict cause per field
// (in any order).
func expectApplyConflict(t *testing.T, step string, err error, message string, causes []string) {
	t.Helper()
	var se apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &se) {
		t.Errorf("%s: err %v, want a Conflict", step, err)
		return
	}
	st := se.Status()
	if st.Code != 409 || st.Reason != metav1.StatusReasonConflict || st.Message != message {
		t.Errorf("%s: %d %s %q, want 409 Conflict %q", step, st.Code, st.Reason, st.Message, message)
	}
	var got []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type != metav1.CauseTypeFieldManagerConflict {
				t.Errorf("%s: cause type %q, want %q", step, c.Type, metav1.CauseTypeFieldManagerConflict)
			}
			got = append(got, c.Field+": "+c.Message)
		}
	}
	// kube lists the causes in no fixed order (it gathers them from maps).
	sort.Strings(got)
	causes = slices.Sorted(slices.Values(causes))
	if strings.Join(got, "\n") != strings.Join(causes, "\n") {
		t.Errorf("%s: causes\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(causes, "\n"))
	}
}

// referenceCreateFields is the fieldsV1 kube-apiserver v1.32 recorded for
// the create of {"metadata":{"labels":{"app":"gold"}},"spec":{"containers":
// [{"name":"c","image":"busybox"}]}} by "reference-client"
// (reference/kube-apiserver-1.32/201-create-pod.json): the fields the
// client sent and their scheme defaults, not what admission added
// (volumes, volumeMounts, serviceAccountName, tolerations, priority,
// preemptionPolicy) nor the status.
const referenceCreateFields = `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`

// admissionEdits is a mutating admission plugin that does what kube's
// ServiceAccount plugin does to a new pod (a service account and its
// token volume) and marks every pod write with an annotation; with
// corrupt it also breaks managedFields, as a faulty webhook could.
type admissionEdits struct{ corrupt bool }

func (a *admissionEdits) Admit(_ context.Context, attrs *admission.Attributes) error {
	pod, ok := attrs.Object.(*v1.Pod)
	if !ok || attrs.Subresource != "" {
		return nil
	}
	if attrs.Operation == admission.Create {
		pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount = "default", "default"
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "kube-api-access-x",
			VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].VolumeMounts = append(pod.Spec.Containers[i].VolumeMounts,
				v1.VolumeMount{Name: "kube-api-access-x", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
		}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations["example.com/admitted"] = string(attrs.Operation)
	if a.corrupt {
		pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "webhook", Operation: "Bogus", FieldsType: "FieldsV9"}}
	}
	return nil
}

// TestFieldsCreateOwnsDefaults: a create records for its manager what the
// client sent and the scheme defaults, exactly as kube did for the
// reference create; what mutating admission adds, then or on a later
// update, is owned by nobody; managedFields a plugin breaks are put back.
func TestFieldsCreateOwnsDefaults(t *testing.T) {
	if _, err := podTypes(); err != nil {
		t.Fatalf("type converter: %v", err)
	}
	st := newTestStorage(t)
	edits := &admissionEdits{}
	chain := &admission.Chain{Mutators: []admission.Mutator{&admission.DefaultTolerationSeconds{}, edits}}
	store, _ := newPodStores(st, true, registry.Options{Admission: chain})
	ctx := t.Context()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gp1", Labels: map[string]string{"app": "gold"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	out, err := store.Create(ctx, "gold", pod, registry.CreateOptions{FieldManager: "reference-client"})
	if err != nil {
		t.Fatal(err)
	}
	created := out.(*v1.Pod)
	expectContains(t, created, `{metadata: {annotations: {example.com/admitted: CREATE}},
		spec: {serviceAccountName: default, volumes: [{name: kube-api-access-x}], priority: 0,
		       tolerations: [{key: node.kubernetes.io/not-ready}, {key: node.kubernetes.io/unreachable}]}}`)
	if mf := created.ManagedFields; len(mf) != 1 || mf[0].Manager != "reference-client" || mf[0].Operation != metav1.ManagedFieldsOperationUpdate ||
		mf[0].APIVersion != "v1" || mf[0].Subresource != "" || mf[0].Time == nil || mf[0].FieldsType != "FieldsV1" || mf[0].FieldsV1 == nil {
		t.Fatalf("managedFields of the create: %s", compact(mf))
	}
	var got, want any
	if err := json.Unmarshal(created.ManagedFields[0].FieldsV1.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(referenceCreateFields), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fieldsV1 of the create:\n%s\nkube's:\n%s", created.ManagedFields[0].FieldsV1.Raw, referenceCreateFields)
	}

	// The update's manager owns its label, not the annotation admission
	// changed.
	out, _, err = store.Update(ctx, "gold", "gp1", func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		cur.(*v1.Pod).Labels["tier"] = "web"
		return cur, nil
	}, registry.UpdateOptions{FieldManager: "u"})
	if err != nil {
		t.Fatal(err)
	}
	updatedPod := out.(*v1.Pod)
	expectContains(t, updatedPod, `{metadata: {annotations: {example.com/admitted: UPDATE}, labels: {tier: web}}}`)
	if e := entriesOf(t, updatedPod.ManagedFields); len(e) != 2 || e[1].Manager != "u" || strings.Join(e[1].Fields, " ") != ".metadata.labels.tier" {
		t.Errorf("managedFields after the update:\n\t%s", joinEntries(e))
	}

	// A plugin that breaks managedFields: they stay as the field manager
	// left them, the write's own entry included.
	edits.corrupt = true
	out, _, err = store.Update(ctx, "gold", "gp1", func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		cur.(*v1.Pod).Labels["tier"] = "db"
		return cur, nil
	}, registry.UpdateOptions{FieldManager: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	if e := entriesOf(t, out.(*v1.Pod).ManagedFields); len(e) != 2 || e[0].Manager != "reference-client" || e[1].Manager != "u2" ||
		strings.Join(e[1].Fields, " ") != ".metadata.labels.tier" {
		t.Errorf("managedFields after a plugin broke them:\n\t%s", joinEntries(e))
	}
	edits.corrupt = false

	// The server's own creates (FieldManager "") record nothing.
	out, err = store.Create(ctx, "gold", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "internal"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}, registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mf := out.(*v1.Pod).ManagedFields; len(mf) != 0 {
		t.Errorf("managedFields of an internal create: %s", compact(mf))
	}
}

// Helpers of the fields tests and benchmarks.

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
// managedFields, on an in-memory store.
type fieldsEnv struct {
	etcd   storage.Interface
	pods   *registry.Store
	status *registry.Store
}

// newFieldsEtcd starts an embedded etcd for one benchmark.
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
	st := newTestStorage(t)
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
	_, err := e.etcd.GuaranteedUpdate(ctx, "/pods/"+namespace+"/"+name, func(cur storage.KV) ([]byte, error) {
		var pod v1.Pod
		data, err := registry.StoredJSON(cur.Value)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &pod); err != nil {
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
