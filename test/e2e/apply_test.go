package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The server-side apply tests run kubectl apply --server-side, label,
// edit and client-side apply against the shared server of TestKubectl
// (subtest ServerSideApply) and the version-skew kubectls of
// TestKubectlVersionSkew (subtest ServerSideApply); run just them with
//
//	go test ./test/e2e -run '^TestKubectl(VersionSkew)?$/ServerSideApply'
//
// Expected outputs are kubectl's against kube-apiserver v1.32; the field
// ownership is what kube's field manager records, which corekube runs.
//
// Pods name a node (created here, by server-side apply) in spec.nodeName:
// the scheduler then leaves them alone, so the only managers in
// managedFields are the kubectl commands under test, and the node
// lifecycle controller, which marks them not ready once its startup grace
// period (60s) is over (checkManagedFields leaves its entries out).

// ssaNamespace holds the pods of the server-side apply tests; ssaNode is
// the node they are bound to.
const (
	ssaNamespace = "e2e-ssa"
	ssaNode      = "e2e-ssa-node"
)

// conflictAdvice is what kubectl adds to the server's message when a
// server-side apply fails with a conflict.
const conflictAdvice = `Please review the fields above--they currently have other managers. Here
are the ways you can resolve this warning:
* If you intend to manage all of these fields, please re-run the apply
  command with the ` + "`--force-conflicts`" + ` flag.
* If you do not intend to manage all of the fields, please edit your
  manifest to remove references to the fields that should keep their
  current managers.
* You may co-own fields by updating your manifest to match the existing
  value; in this case, you'll become the manager if the other manager(s)
  stop managing the field (remove it from their configuration).
See https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts`

// conflictError is kubectl's whole error for a server-side apply that
// conflicts: the server's 409 message, then kubectl's advice.
func conflictError(serverMessage string) string {
	return "error: " + serverMessage + "\n" + conflictAdvice
}

// testServerSideApply runs the server-side apply subtests, in their own
// namespace and on their own node.
func testServerSideApply(t *testing.T, k *kc) {
	k.expect("namespace/"+ssaNamespace+" created", "create", "namespace", ssaNamespace)
	k.expect("node/"+ssaNode+" serverside-applied", "apply", "--server-side", "-f",
		k.file("node.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: "+ssaNode+"\n"))
	sub := func(name string, f func(t *testing.T, k *kc)) {
		t.Run(name, func(t *testing.T) { f(t, k.p.kc(t, k.bin)) })
	}
	sub("CreateUpdatePrune", testSSACreateUpdatePrune)
	sub("Conflicts", testSSAConflicts)
	sub("ManagedFields", testSSAManagedFields)
	sub("StatusSubresource", testSSAStatus)
	sub("ClearManagedFields", testSSAClearManagedFields)
	sub("FromClientSideApply", testSSAFromClientSideApply)
	sub("ToClientSideApply", testSSAToClientSideApply)
	sub("Kinds", testSSAKinds)
	sub("CreateManagedFields", testCreateManagedFields)
}

// ssaPod is a pod manifest in ssaNamespace bound to ssaNode; meta is
// indented metadata lines beside the name.
func ssaPod(name, meta, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + ssaNamespace + "\n" + meta +
		"spec:\n  nodeName: " + ssaNode + "\n  containers:\n  - name: c\n    image: " + image + "\n"
}

func testSSACreateUpdatePrune(t *testing.T, k *kc) {
	manifest := func(podMeta, image, leaseSpec string) string {
		return ssaPod("web", podMeta, image) + `---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: web
  namespace: ` + ssaNamespace + `
spec:
` + leaseSpec
	}
	v1 := k.file("v1.yaml", manifest("  labels: {app: web, tier: fe}\n", "busybox:1.36", "  holderIdentity: web-1\n  leaseDurationSeconds: 15\n"))

	// A server dry run of a create prints what a create would and stores
	// nothing.
	k.expect(lines(
		"pod/web serverside-applied (server dry run)",
		"lease.coordination.k8s.io/web serverside-applied (server dry run)",
	), "apply", "--server-side", "-f", v1, "--dry-run=server")
	k.expectFail(`Error from server (NotFound): pods "web" not found`, "get", "pod", "web", "-n", ssaNamespace)
	k.expectFail(`Error from server (NotFound): leases.coordination.k8s.io "web" not found`, "get", "lease", "web", "-n", ssaNamespace)

	// Create, from a multi-document file.
	k.expect(lines("pod/web serverside-applied", "lease.coordination.k8s.io/web serverside-applied"), "apply", "--server-side", "-f", v1)
	podState := []string{"get", "pod", "web", "-n", ssaNamespace, "-o", "jsonpath={.metadata.labels} {.metadata.annotations} {.spec.containers[0].image}"}
	leaseState := []string{"get", "lease", "web", "-n", ssaNamespace, "-o", "jsonpath={.spec}"}
	k.expect(`{"app":"web","tier":"fe"}  busybox:1.36`, podState...)
	k.expect(`{"holderIdentity":"web-1","leaseDurationSeconds":15}`, leaseState...)

	// The same file again changes nothing, not even the resourceVersion.
	rvs := []string{"get", "pod/web", "lease/web", "-n", ssaNamespace, "-o", "jsonpath={range .items[*]}{.metadata.resourceVersion} {end}"}
	rv := k.ok(rvs...)
	k.expect(lines("pod/web serverside-applied", "lease.coordination.k8s.io/web serverside-applied"), "apply", "--server-side", "-f", v1)
	k.expect(rv, rvs...)

	// A changed file: a new image, a label and a lease field gone, an
	// annotation and another holder. A server dry run of it changes nothing.
	v2 := k.file("v2.yaml", manifest("  labels: {app: web}\n  annotations: {note: v2}\n", "busybox:1.37", "  holderIdentity: web-2\n"))
	k.expect(lines(
		"pod/web serverside-applied (server dry run)",
		"lease.coordination.k8s.io/web serverside-applied (server dry run)",
	), "apply", "--server-side", "-f", v2, "--dry-run=server")
	k.expect(rv, rvs...)
	k.expect(`{"app":"web","tier":"fe"}  busybox:1.36`, podState...)

	// A field the schema lacks: kube's field manager fails, which kube
	// answers with a 500 without a reason, whatever the field validation.
	unknown := func(name string) string {
		return k.file(name+".yaml", strings.Replace(ssaPod(name, "", "busybox:1.36"), "spec:\n", "spec:\n  bogus: 1\n", 1))
	}
	for _, validate := range []string{"--validate=strict", "--validate=warn", "--validate=false"} {
		k.expectFail(`Error from server: failed to create typed patch object (e2e-ssa/unknown; /v1, Kind=Pod): .spec.bogus: field not declared in schema`,
			"apply", "--server-side", "-f", unknown("unknown"), validate)
	}
	k.expectFail(`Error from server: failed to create typed patch object (e2e-ssa/web; /v1, Kind=Pod): .spec.bogus: field not declared in schema`,
		"apply", "--server-side", "-f", unknown("web"))

	// Applied, the fields removed from the file are removed from the
	// objects: the applier owned them alone.
	k.expect(lines("pod/web serverside-applied", "lease.coordination.k8s.io/web serverside-applied"), "apply", "--server-side", "-f", v2)
	k.expect(`{"app":"web"} {"note":"v2"} busybox:1.37`, podState...)
	k.expect(`{"holderIdentity":"web-2"}`, leaseState...)

	// A field another applier also owns, with the same value, stays when
	// this one drops it.
	k.expect("pod/web serverside-applied", "apply", "--server-side", "--field-manager=second", "-f",
		k.file("second.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: "+ssaNamespace+"\n  labels: {app: web}\n"))
	k.expect(lines("pod/web serverside-applied", "lease.coordination.k8s.io/web serverside-applied"), "apply", "--server-side", "-f",
		k.file("v3.yaml", manifest("  annotations: {note: v2}\n", "busybox:1.37", "  holderIdentity: web-2\n")))
	k.expect(`{"app":"web"} {"note":"v2"} busybox:1.37`, podState...)

	// The live object as kubectl prints it: applying it with its
	// managedFields is refused; a resourceVersion in it is a precondition.
	live := k.file("live.yaml", k.ok("get", "pod", "web", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields"))
	k.expectFail(`Error from server (BadRequest): metadata.managedFields must be nil`, "apply", "--server-side", "-f", live)
	live = k.ok("get", "pod", "web", "-n", ssaNamespace, "-o", "yaml")
	k.expect("pod/web labeled", "label", "pod", "web", "-n", ssaNamespace, "stale=yes")
	k.expectFail(conflictError(`Operation cannot be fulfilled on pods "web": the object has been modified; please apply your changes to the latest version and try again`),
		"apply", "--server-side", "-f", k.file("stale.yaml", live))
}

func testSSAConflicts(t *testing.T, k *kc) {
	pod := func(app string) string {
		return k.file("conflict-"+app+".yaml", ssaPod("conflict", "  labels: {app: "+app+"}\n", "busybox:1.36"))
	}
	labels := []string{"get", "pod", "conflict", "-n", ssaNamespace, "-o", "jsonpath={.metadata.labels}"}
	k.expect("pod/conflict serverside-applied", "apply", "--server-side", "-f", pod("web"))
	k.expect("pod/conflict labeled", "label", "pod", "conflict", "-n", ssaNamespace, "app=other", "--overwrite")
	k.expect(`{"app":"other"}`, labels...)

	// kubectl label took the field: applying another value conflicts, with
	// kube's message and kubectl's advice, and changes nothing.
	conflict := conflictError(`Apply failed with 1 conflict: conflict with "kubectl-label" using v1: .metadata.labels.app`)
	k.expectFail(conflict, "apply", "--server-side", "-f", pod("mine"))
	k.expect(`{"app":"other"}`, labels...)
	// A server dry run conflicts the same way.
	k.expectFail(conflict, "apply", "--server-side", "-f", pod("mine"), "--dry-run=server")

	// Applying the value the field has co-owns it; another value still
	// conflicts with kubectl-label.
	k.expect("pod/conflict serverside-applied", "apply", "--server-side", "-f", pod("other"))
	k.expectFail(conflict, "apply", "--server-side", "-f", pod("mine"))

	// --force-conflicts takes the field: kubectl-label owns nothing more
	// and its entry goes.
	managers := []string{"get", "pod", "conflict", "-n", ssaNamespace, "-o", "jsonpath={.metadata.managedFields[*].manager}"}
	k.expect("kubectl kubectl-label", managers...)
	k.expect("pod/conflict serverside-applied", "apply", "--server-side", "--force-conflicts", "-f", pod("mine"))
	k.expect(`{"app":"mine"}`, labels...)
	k.expect("kubectl", managers...)

	// kube's limit on manager names.
	k.expectFail(`The PatchOptions "" is invalid: fieldManager: Too long: may not be more than 128 bytes`,
		"apply", "--server-side", "--field-manager="+strings.Repeat("m", 129), "-f", pod("mine"))

	// Several conflicts, grouped by manager.
	k.expect("pod/conflict labeled", "label", "pod", "conflict", "-n", ssaNamespace, "app=a", "team=a", "--overwrite")
	k.expect("pod/conflict annotated", "annotate", "pod", "conflict", "-n", ssaNamespace, "note=a")
	k.expectFail(conflictError(lines(
		`Apply failed with 3 conflicts: conflicts with "kubectl-annotate" using v1:`,
		`- .metadata.annotations.note`,
		`conflicts with "kubectl-label" using v1:`,
		`- .metadata.labels.app`,
		`- .metadata.labels.team`,
	)), "apply", "--server-side", "-f", k.file("many.yaml",
		ssaPod("conflict", "  labels: {app: b, team: b}\n  annotations: {note: b}\n", "busybox:1.36")))
}

func testSSAManagedFields(t *testing.T, k *kc) {
	manifest := k.file("mf.yaml", ssaPod("mf", "  labels: {app: web}\n", "busybox:1.36"))
	k.expect("pod/mf serverside-applied", "apply", "--server-side", "-f", manifest)
	k.expect("pod/mf labeled", "label", "pod", "mf", "-n", ssaNamespace, "team=a")
	// kubectl edit runs $KUBE_EDITOR on a file with the live object.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/image: busybox:1.36/image: busybox:1.37/' \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBE_EDITOR", editor)
	k.expect("pod/mf edited", "edit", "pod", "mf", "-n", ssaNamespace)
	k.expect("busybox:1.37", "get", "pod", "mf", "-n", ssaNamespace, "-o", "jsonpath={.spec.containers[0].image}")

	// The split: kubectl applied the labels' app, the container and the
	// node; kubectl-label owns the label it added; kubectl-edit took the
	// image from the applier (an update never conflicts).
	checkManagedFields(k, []string{"get", "pod", "mf", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        f:app: {}
    f:spec:
      f:containers:
        k:{"name":"c"}:
          .: {}
          f:name: {}
      f:nodeName: {}
  manager: kubectl
  operation: Apply
  time: TIME
- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:containers:
        k:{"name":"c"}:
          f:image: {}
  manager: kubectl-edit
  operation: Update
  time: TIME
- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        f:team: {}
  manager: kubectl-label
  operation: Update
  time: TIME
`)
	// Without --show-managed-fields kubectl leaves them out.
	for _, format := range []string{"yaml", "json"} {
		if out := k.ok("get", "pod", "mf", "-n", ssaNamespace, "-o", format); strings.Contains(out, "managedFields") {
			t.Errorf("kubectl get -o %s prints managedFields:\n%s", format, out)
		}
	}

	// Applying the old image again conflicts with the edit.
	k.expectFail(conflictError(`Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .spec.containers[name="c"].image`),
		"apply", "--server-side", "-f", manifest)

	// At most ten Update managers: kube merges the oldest into
	// ancient-changes. Which ones are oldest depends on the second each
	// label landed in, so only the count and the labels' owners are
	// checked.
	for i := 1; i <= 10; i++ {
		n := strconv.Itoa(i)
		k.expect("pod/mf labeled", "label", "pod", "mf", "-n", ssaNamespace, "l"+n+"=v", "--field-manager=m"+n)
	}
	var obj struct {
		Metadata struct {
			ManagedFields []struct {
				Manager, Operation string
				FieldsV1           map[string]any `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(k.ok("get", "pod", "mf", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields")), &obj); err != nil {
		t.Fatal(err)
	}
	updates, ancient := 0, false
	owned := map[string]bool{}
	for _, e := range obj.Metadata.ManagedFields {
		if e.Manager == "kube-controller-manager" {
			continue
		}
		if e.Operation == "Update" {
			updates++
		}
		ancient = ancient || e.Manager == "ancient-changes"
		metadata, _ := e.FieldsV1["f:metadata"].(map[string]any)
		labels, _ := metadata["f:labels"].(map[string]any)
		for l := range labels {
			owned[l] = true
		}
	}
	if updates != 10 || !ancient {
		t.Errorf("after 12 update managers: %d Update entries, ancient-changes %v; want 10, true", updates, ancient)
	}
	for _, l := range []string{"f:team", "f:l1", "f:l5", "f:l10"} {
		if !owned[l] {
			t.Errorf("label %s is owned by no manager: %+v", l, obj.Metadata.ManagedFields)
		}
	}
}

// testSSAStatus: apply --subresource=status owns status fields apart from
// the object's, and an apply of the object itself leaves status alone.
func testSSAStatus(t *testing.T, k *kc) {
	k.expect("pod/st serverside-applied", "apply", "--server-side", "-f", k.file("st.yaml", ssaPod("st", "", "busybox:1.36")))
	k.expect("pod/st patched", "patch", "pod", "st", "-n", ssaNamespace, "--subresource=status", "--type=merge", "-p", `{"status":{"message":"patched"}}`)
	status := k.file("status.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: st\n  namespace: "+ssaNamespace+
		"\nstatus:\n  message: applied\n  conditions:\n  - type: example.com/Custom\n    status: \"True\"\n")
	state := []string{"get", "pod", "st", "-n", ssaNamespace, "-o", `jsonpath={.status.message} {.status.conditions[?(@.type=="example.com/Custom")].status}`}
	k.expectFail(conflictError(`Apply failed with 1 conflict: conflict with "kubectl-patch" with subresource "status" using v1: .status.message`),
		"apply", "--server-side", "--subresource=status", "-f", status)
	k.expect("patched ", state...)
	k.expect("pod/st serverside-applied", "apply", "--server-side", "--subresource=status", "--force-conflicts", "-f", status)
	k.expect("applied True", state...)

	// The object's own apply: status is reset, neither changed nor owned.
	k.expect("pod/st serverside-applied", "apply", "--server-side", "-f",
		k.file("st2.yaml", ssaPod("st", "", "busybox:1.36")+"status:\n  message: ignored\n"))
	k.expect("applied True", state...)
	checkManagedFields(k, []string{"get", "pod", "st", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:containers:
        k:{"name":"c"}:
          .: {}
          f:image: {}
          f:name: {}
      f:nodeName: {}
  manager: kubectl
  operation: Apply
  time: TIME
- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:status:
      f:conditions:
        k:{"type":"example.com/Custom"}:
          .: {}
          f:status: {}
          f:type: {}
      f:message: {}
  manager: kubectl
  operation: Apply
  subresource: status
  time: TIME
`)
}

// testSSAClearManagedFields: a write of an empty managedFields list (or of
// one empty entry) clears them; kube then records no more updates until
// the next apply, which first gives every field to "before-first-apply".
func testSSAClearManagedFields(t *testing.T, k *kc) {
	manifest := k.file("clr.yaml", ssaPod("clr", "  labels: {app: web}\n", "busybox:1.36"))
	k.expect("pod/clr serverside-applied", "apply", "--server-side", "-f", manifest)
	k.expect("pod/clr labeled", "label", "pod", "clr", "-n", ssaNamespace, "team=a")
	managers := []string{"get", "pod", "clr", "-n", ssaNamespace, "-o", `jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}`}
	k.expect("kubectl/Apply kubectl-label/Update ", managers...)

	k.expect("pod/clr patched", "patch", "pod", "clr", "-n", ssaNamespace, "--type=merge", "-p", `{"metadata":{"managedFields":[]}}`)
	k.expect("", managers...)
	k.expect("pod/clr labeled", "label", "pod", "clr", "-n", ssaNamespace, "team=b", "--overwrite")
	k.expect("", managers...)

	k.expectFail(conflictError(`Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .metadata.labels.app`),
		"apply", "--server-side", "-f", k.file("clr2.yaml", ssaPod("clr", "  labels: {app: other}\n", "busybox:1.36")))
	k.expect("pod/clr serverside-applied", "apply", "--server-side", "-f", manifest)
	k.expect("kubectl/Apply before-first-apply/Update ", managers...)

	// managedFields a client writes that do not decode are ignored: the
	// live ones stay.
	k.expect("pod/clr patched", "patch", "pod", "clr", "-n", ssaNamespace, "--type=merge", "-p",
		`{"metadata":{"labels":{"z":"1"},"managedFields":[{"manager":"x","operation":"Bogus","fieldsType":"FieldsV1","fieldsV1":{}}]}}`)
	k.expect("kubectl/Apply before-first-apply/Update kubectl-patch/Update ", managers...)
	// Valid ones replace them, and the writer's own update is recorded on
	// top: here it takes the one field x claimed, so x goes.
	k.expect("pod/clr patched", "patch", "pod", "clr", "-n", ssaNamespace, "--type=merge", "-p",
		`{"metadata":{"labels":{"z":"2"},"managedFields":[{"manager":"x","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:z":{}}}}}]}}`)
	k.expect("kubectl-patch/Update ", managers...)

	k.expect("pod/clr patched", "patch", "pod", "clr", "-n", ssaNamespace, "--type=json", "-p", `[{"op":"replace","path":"/metadata/managedFields","value":[{}]}]`)
	k.expect("", managers...)
}

// checkManagedFields runs kubectl get -o yaml and compares the object's
// managedFields with want: the entries sorted by manager, operation and
// subresource, each time written TIME. kubectl prints them in kube's
// order, Apply entries first, each operation's by time; entries written
// within the same second may come in either order, hence the sort. The
// node lifecycle controller's entries (manager kube-controller-manager,
// as kube's) are left out: it writes the nodes here, and their pods, once
// its startup grace period is over.
func checkManagedFields(k *kc, args []string, want string) {
	k.t.Helper()
	var obj struct {
		Metadata struct {
			ManagedFields []map[string]any `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(k.ok(args...)), &obj); err != nil {
		k.t.Fatal(err)
	}
	var entries []map[string]any
	for _, e := range obj.Metadata.ManagedFields {
		if e["manager"] != "kube-controller-manager" {
			entries = append(entries, e)
		}
	}
	var last string
	for i, e := range entries {
		op, _ := e["operation"].(string)
		ts, hasTime := e["time"].(string)
		if hasTime {
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				k.t.Errorf("managedFields[%d].time %q: %v", i, ts, err)
			}
			e["time"] = "TIME"
		}
		if key := op + " " + ts; key < last {
			k.t.Errorf("managedFields[%d] (%s %s) is after %s: not in kube's order", i, op, ts, last)
		} else {
			last = key
		}
	}
	str := func(e map[string]any, f string) string { s, _ := e[f].(string); return s }
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		for _, f := range []string{"manager", "operation", "subresource"} {
			if str(a, f) != str(b, f) {
				return str(a, f) < str(b, f)
			}
		}
		return false
	})
	got, err := yaml.Marshal(entries)
	if err != nil {
		k.t.Fatal(err)
	}
	if string(got) != want {
		k.t.Errorf("kubectl %s: managedFields:\n%s\nwant:\n%s", strings.Join(args, " "), got, want)
	}
}

// testSSAFromClientSideApply follows kubectl's upgrade path from
// client-side apply: kubectl apply --server-side of an object applied
// client-side succeeds where its last-applied configuration and the live
// object agree (the server lets the "kubectl" manager take what the
// annotation lists), kubectl then keeps the annotation under its own
// manager (kubectl-last-applied) and merges kubectl-client-side-apply's
// fields into "kubectl".
func testSSAFromClientSideApply(t *testing.T, k *kc) {
	v1 := k.file("csa.yaml", ssaPod("csa", "  labels: {app: web, tier: fe}\n", "busybox:1.36"))
	k.expect("pod/csa created", "apply", "-f", v1)
	k.expect(`{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"labels":{"app":"web","tier":"fe"},"name":"csa","namespace":"e2e-ssa"},"spec":{"containers":[{"image":"busybox:1.36","name":"c"}],"nodeName":"e2e-ssa-node"}}`,
		"get", "pod", "csa", "-n", ssaNamespace, "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)
	checkManagedFields(k, []string{"get", "pod", "csa", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:annotations:
        .: {}
        f:kubectl.kubernetes.io/last-applied-configuration: {}
      f:labels:
        .: {}
        f:app: {}
        f:tier: {}
    f:spec:
      f:containers:
        k:{"name":"c"}:
          .: {}
          f:image: {}
          f:imagePullPolicy: {}
          f:name: {}
          f:resources: {}
          f:terminationMessagePath: {}
          f:terminationMessagePolicy: {}
      f:dnsPolicy: {}
      f:enableServiceLinks: {}
      f:nodeName: {}
      f:restartPolicy: {}
      f:schedulerName: {}
      f:securityContext: {}
      f:terminationGracePeriodSeconds: {}
  manager: kubectl-client-side-apply
  operation: Update
  time: TIME
`)

	// Another manager applying another value conflicts with the
	// client-side applier.
	k.expectFail(conflictError(`Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .metadata.labels.app`),
		"apply", "--server-side", "--field-manager=other", "-f",
		k.file("other.yaml", ssaPod("csa", "  labels: {app: other, tier: fe}\n", "busybox:1.36")))

	// kubectl's own server-side apply of a changed file: no conflict, the
	// new image, and the label the file no longer has is gone.
	k.expect("pod/csa serverside-applied", "apply", "--server-side", "-f",
		k.file("ssa.yaml", ssaPod("csa", "  labels: {app: web}\n", "busybox:1.37")))
	k.expect(`{"app":"web"} busybox:1.37`, "get", "pod", "csa", "-n", ssaNamespace, "-o", "jsonpath={.metadata.labels} {.spec.containers[0].image}")
	// The server keeps the annotation up to date for the "kubectl" manager.
	k.expect(`{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"web"},"name":"csa","namespace":"e2e-ssa"},"spec":{"containers":[{"image":"busybox:1.37","name":"c"}],"nodeName":"e2e-ssa-node"}}`,
		"get", "pod", "csa", "-n", ssaNamespace, "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)
	// kubectl-last-applied's entry has no time: kubectl wrote it itself in
	// its migration patch.
	checkManagedFields(k, []string{"get", "pod", "csa", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        f:app: {}
    f:spec:
      f:containers:
        k:{"name":"c"}:
          .: {}
          f:image: {}
          f:name: {}
      f:nodeName: {}
  manager: kubectl
  operation: Apply
  time: TIME
- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:annotations:
        f:kubectl.kubernetes.io/last-applied-configuration: {}
  manager: kubectl-last-applied
  operation: Apply
`)

	// And back to client-side apply, which reads the annotation the server
	// kept: the image changes, the label stays gone.
	k.expect("pod/csa configured", "apply", "-f", k.file("csa2.yaml", ssaPod("csa", "  labels: {app: web}\n", "busybox:1.38")))
	k.expect(`{"app":"web"} busybox:1.38`, "get", "pod", "csa", "-n", ssaNamespace, "-o", "jsonpath={.metadata.labels} {.spec.containers[0].image}")
	k.expect("kubectl kubectl-client-side-apply", "get", "pod", "csa", "-n", ssaNamespace, "-o", "jsonpath={.metadata.managedFields[*].manager}")
}

// testSSAToClientSideApply: an object created with server-side apply has
// no last-applied annotation, so client-side apply warns, adds it, and
// (having no previous configuration) removes nothing; from then on it
// works as usual.
func testSSAToClientSideApply(t *testing.T, k *kc) {
	k.expect("pod/back serverside-applied", "apply", "--server-side", "-f",
		k.file("back.yaml", ssaPod("back", "  labels: {app: web, tier: fe}\n", "busybox:1.36")))
	v2 := k.file("back2.yaml", ssaPod("back", "  labels: {app: web}\n", "busybox:1.36"))
	k.expectOut("pod/back configured",
		"Warning: resource pods/back is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by kubectl apply. kubectl apply should only be used on resources created declaratively by either kubectl create --save-config or kubectl apply. The missing annotation will be patched automatically.",
		"apply", "-f", v2)
	state := []string{"get", "pod", "back", "-n", ssaNamespace, "-o", "jsonpath={.metadata.labels} {.spec.containers[0].image}"}
	k.expect(`{"app":"web","tier":"fe"} busybox:1.36`, state...)
	k.expect("pod/back unchanged", "apply", "-f", v2)
	// Now the annotation lists app: the next change removes it, and tier,
	// never in a file kubectl applied client-side, stays.
	k.expect("pod/back configured", "apply", "-f", k.file("back3.yaml", ssaPod("back", "  labels: {owner: me}\n", "busybox:1.37")))
	k.expect(`{"owner":"me","tier":"fe"} busybox:1.37`, state...)
	k.expect("kubectl kubectl-client-side-apply", "get", "pod", "back", "-n", ssaNamespace, "-o", "jsonpath={.metadata.managedFields[*].manager}")
}

// testSSAKinds applies one of every kind kubectl users apply, from one
// multi-document file, then a changed one.
func testSSAKinds(t *testing.T, k *kc) {
	const ns = "e2e-ssa-kinds"
	manifest := func(env, minAvailable, verbs, leaseExtra, bool string) string {
		return `apiVersion: v1
kind: Namespace
metadata:
  name: ` + ns + `
  labels: {env: ` + env + `}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: leader
  namespace: ` + ns + `
spec:
  holderIdentity: replica-` + env + `
` + leaseExtra + `---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: ` + ns + `
spec:
  minAvailable: ` + minAvailable + `
  selector:
    matchLabels: {app: web}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: reader
  namespace: ` + ns + `
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [` + verbs + `]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ` + ns + `-reader
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [` + verbs + `]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader
  namespace: ` + ns + `
  labels: {env: ` + env + `}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: reader
subjects:
- kind: ServiceAccount
  name: robot
  namespace: ` + ns + `
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
  namespace: ` + ns + `
  labels: {env: ` + env + `}
automountServiceAccountToken: ` + bool + `
---
apiVersion: v1
kind: Node
metadata:
  name: ` + ns + `-node
  labels: {env: ` + env + `}
spec:
  unschedulable: ` + bool + `
`
	}
	applied := lines(
		"namespace/"+ns+" serverside-applied",
		"lease.coordination.k8s.io/leader serverside-applied",
		"poddisruptionbudget.policy/web serverside-applied",
		"role.rbac.authorization.k8s.io/reader serverside-applied",
		"clusterrole.rbac.authorization.k8s.io/"+ns+"-reader serverside-applied",
		"rolebinding.rbac.authorization.k8s.io/reader serverside-applied",
		"serviceaccount/robot serverside-applied",
		"node/"+ns+"-node serverside-applied",
	)
	namespaced := []string{"get", "lease/leader", "pdb/web", "role/reader", "rolebinding/reader", "sa/robot", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.kind} {.metadata.labels} {.spec.holderIdentity} {.spec.leaseDurationSeconds} {.spec.minAvailable} {.rules[*].verbs} {.automountServiceAccountToken}{"\n"}{end}`}
	cluster := []string{"get", "ns/" + ns, "clusterrole/" + ns + "-reader", "node/" + ns + "-node", "-o",
		`jsonpath={range .items[*]}{.kind} {.metadata.labels.env} {.rules[*].verbs} {.spec.unschedulable}{"\n"}{end}`}

	v1 := k.file("v1.yaml", manifest("dev", "1", "get, list", "  leaseDurationSeconds: 15\n", "false"))
	k.expect(applied, "apply", "--server-side", "-f", v1)
	k.expect(lines(
		`Lease  replica-dev 15   `,
		`PodDisruptionBudget    1  `,
		`Role     ["get","list"] `,
		`RoleBinding {"env":"dev"}     `,
		`ServiceAccount {"env":"dev"}     false`,
	), namespaced...)
	k.expect(lines("Namespace dev  ", `ClusterRole  ["get","list"] `, "Node dev  "), cluster...)
	k.expect(applied, "apply", "--server-side", "-f", v1)

	// The update: rules are atomic lists, replaced whole; the lease
	// duration the file no longer has is removed.
	k.expect(applied, "apply", "--server-side", "-f", k.file("v2.yaml", manifest("prod", "2", "get, list, watch", "", "true")))
	k.expect(lines(
		`Lease  replica-prod    `,
		`PodDisruptionBudget    2  `,
		`Role     ["get","list","watch"] `,
		`RoleBinding {"env":"prod"}     `,
		`ServiceAccount {"env":"prod"}     true`,
	), namespaced...)
	k.expect(lines("Namespace prod  ", `ClusterRole  ["get","list","watch"] `, "Node prod  true"), cluster...)
}

// testCreateManagedFields: what kubectl's creates (and a CSR's approval)
// record. The writer of a create owns the fields kube's decoding defaults
// (201-create-node.json in the reference responses has the node's
// podCIDRs); kube's atomic structs and keyed lists are what the schema
// says (a RoleBinding's roleRef is atomic, a CSR's conditions are keyed
// by type).
func testCreateManagedFields(t *testing.T, k *kc) {
	// The namespaces the server creates itself.
	checkManagedFields(k, []string{"get", "namespace", "kube-system", "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        .: {}
        f:kubernetes.io/metadata.name: {}
  manager: kube-apiserver
  operation: Update
  time: TIME
`)
	k.expect("namespace/e2e-ssa-created created", "create", "namespace", "e2e-ssa-created")
	checkManagedFields(k, []string{"get", "namespace", "e2e-ssa-created", "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        .: {}
        f:kubernetes.io/metadata.name: {}
  manager: kubectl-create
  operation: Update
  time: TIME
`)

	k.expect("node/e2e-ssa-cidr created", "create", "-f", k.file("node.json",
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"e2e-ssa-cidr","labels":{"kubernetes.io/hostname":"e2e-ssa-cidr"}},"spec":{"podCIDR":"10.244.0.0/24"}}`))
	checkManagedFields(k, []string{"get", "node", "e2e-ssa-cidr", "-o", "yaml", "--show-managed-fields"}, `- apiVersion: v1
  fieldsType: FieldsV1
  fieldsV1:
    f:metadata:
      f:labels:
        .: {}
        f:kubernetes.io/hostname: {}
    f:spec:
      f:podCIDR: {}
      f:podCIDRs:
        .: {}
        v:"10.244.0.0/24": {}
  manager: kubectl-create
  operation: Update
  time: TIME
`)
	k.expect(`node "e2e-ssa-cidr" deleted`, "delete", "node", "e2e-ssa-cidr")

	// A webhook that is never called: CONNECT of port forwards in
	// namespaces with a label none has.
	k.expect("validatingwebhookconfiguration.admissionregistration.k8s.io/e2e-ssa-defaults created", "create", "-f", k.file("webhook.yaml", `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: e2e-ssa-defaults
webhooks:
- name: never.e2e-ssa.example.com
  clientConfig:
    url: https://127.0.0.1:1/validate
  namespaceSelector:
    matchLabels: {e2e-ssa: never}
  rules:
  - operations: [CONNECT]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [pods/portforward]
  sideEffects: None
  admissionReviewVersions: [v1]
`))
	checkManagedFields(k, []string{"get", "validatingwebhookconfiguration", "e2e-ssa-defaults", "-o", "yaml", "--show-managed-fields"}, `- apiVersion: admissionregistration.k8s.io/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:webhooks:
      .: {}
      k:{"name":"never.e2e-ssa.example.com"}:
        .: {}
        f:admissionReviewVersions: {}
        f:clientConfig:
          .: {}
          f:url: {}
        f:failurePolicy: {}
        f:matchPolicy: {}
        f:name: {}
        f:namespaceSelector: {}
        f:objectSelector: {}
        f:rules: {}
        f:sideEffects: {}
        f:timeoutSeconds: {}
  manager: kubectl-create
  operation: Update
  time: TIME
`)
	k.expect(`validatingwebhookconfiguration.admissionregistration.k8s.io "e2e-ssa-defaults" deleted`, "delete", "validatingwebhookconfiguration", "e2e-ssa-defaults")

	k.expect("rolebinding.rbac.authorization.k8s.io/view created", "create", "rolebinding", "view", "-n", ssaNamespace, "--clusterrole=view", "--user=alice")
	checkManagedFields(k, []string{"get", "rolebinding", "view", "-n", ssaNamespace, "-o", "yaml", "--show-managed-fields"}, `- apiVersion: rbac.authorization.k8s.io/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:roleRef: {}
    f:subjects: {}
  manager: kubectl-create
  operation: Update
  time: TIME
`)

	// A replace that changes nothing once kube's defaults (the apiGroups)
	// are applied records nothing.
	k.expect("rolebinding.rbac.authorization.k8s.io/view replaced", "replace", "-f", k.file("view.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: view
  namespace: `+ssaNamespace+`
roleRef:
  kind: ClusterRole
  name: view
subjects:
- kind: User
  name: alice
`))
	k.expect("kubectl-create", "get", "rolebinding", "view", "-n", ssaNamespace, "-o", "jsonpath={.metadata.managedFields[*].manager}")

	// A signer nobody runs: kubectl's approval is the only other write.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "e2e-ssa"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	request := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	k.expect("certificatesigningrequest.certificates.k8s.io/e2e-ssa created", "create", "-f", k.file("csr.yaml",
		"apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: e2e-ssa\nspec:\n  request: "+request+
			"\n  signerName: example.com/e2e-ssa\n  usages: [client auth]\n"))
	k.expect("certificatesigningrequest.certificates.k8s.io/e2e-ssa approved", "certificate", "approve", "e2e-ssa")
	checkManagedFields(k, []string{"get", "csr", "e2e-ssa", "-o", "yaml", "--show-managed-fields"}, `- apiVersion: certificates.k8s.io/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:status:
      f:conditions:
        .: {}
        k:{"type":"Approved"}:
          .: {}
          f:lastTransitionTime: {}
          f:lastUpdateTime: {}
          f:message: {}
          f:reason: {}
          f:status: {}
          f:type: {}
  manager: kubectl
  operation: Update
  subresource: approval
  time: TIME
- apiVersion: certificates.k8s.io/v1
  fieldsType: FieldsV1
  fieldsV1:
    f:spec:
      f:request: {}
      f:signerName: {}
      f:usages: {}
  manager: kubectl-create
  operation: Update
  time: TIME
`)
	k.expect(`certificatesigningrequest.certificates.k8s.io "e2e-ssa" deleted`, "delete", "csr", "e2e-ssa")
}

// testSkewServerSideApply is the create, update, conflict and force flow
// with one version-skew kubectl.
func testSkewServerSideApply(t *testing.T, k *kc, version string) {
	ns := "ssa-skew-" + strings.ReplaceAll(version, ".", "")
	k.expect("namespace/"+ns+" created", "create", "namespace", ns)
	pod := func(labels, image string) string {
		return k.file("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: "+ns+"\n  labels: {"+labels+"}\n"+
			"spec:\n  nodeName: "+ns+"-node\n  containers:\n  - name: c\n    image: "+image+"\n")
	}
	state := []string{"get", "pod", "p", "-n", ns, "-o", "jsonpath={.metadata.labels} {.spec.containers[0].image}"}
	k.expect("pod/p serverside-applied (server dry run)", "apply", "--server-side", "--dry-run=server", "-f", pod("app: web, tier: fe", "busybox:1.36"))
	k.expectFail(`Error from server (NotFound): pods "p" not found`, "get", "pod", "p", "-n", ns)
	k.expect("pod/p serverside-applied", "apply", "--server-side", "-f", pod("app: web, tier: fe", "busybox:1.36"))
	k.expect(`{"app":"web","tier":"fe"} busybox:1.36`, state...)
	k.expect("pod/p serverside-applied", "apply", "--server-side", "-f", pod("app: web", "busybox:1.37"))
	k.expect(`{"app":"web"} busybox:1.37`, state...)
	k.expect("pod/p labeled", "label", "pod", "p", "-n", ns, "app=other", "--overwrite")
	k.expectFail(conflictError(`Apply failed with 1 conflict: conflict with "kubectl-label" using v1: .metadata.labels.app`),
		"apply", "--server-side", "-f", pod("app: mine", "busybox:1.37"))
	k.expect(`{"app":"other"} busybox:1.37`, state...)
	k.expect("pod/p serverside-applied", "apply", "--server-side", "--force-conflicts", "-f", pod("app: mine", "busybox:1.37"))
	k.expect(`{"app":"mine"} busybox:1.37`, state...)
	k.expect("kubectl", "get", "pod", "p", "-n", ns, "-o", "jsonpath={.metadata.managedFields[*].manager}")

	// kubectl's migration from client-side apply.
	csa := func(labels, image string) string {
		return k.file("csa.yaml", strings.ReplaceAll(readFile(t, pod(labels, image)), "name: p\n", "name: csa\n"))
	}
	k.expect("pod/csa created", "apply", "-f", csa("app: web, tier: fe", "busybox:1.36"))
	k.expect("pod/csa serverside-applied", "apply", "--server-side", "-f", csa("app: web", "busybox:1.37"))
	k.expect(`{"app":"web"} busybox:1.37 kubectl-last-applied/Apply kubectl/Apply `, "get", "pod", "csa", "-n", ns, "-o",
		`jsonpath={.metadata.labels} {.spec.containers[0].image} {range .metadata.managedFields[*]}{.manager}/{.operation} {end}`)
}
