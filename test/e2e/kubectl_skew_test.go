package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestKubectlVersionSkew runs a representative subset of TestKubectl with
// the oldest and the newest kubectl that kube-apiserver v1.32 supports
// beside PATH's v1.32 (kubectl.1.27 and kubectl.1.33 next to it): create -f,
// apply twice, get -o wide, explain, field validation and delete. They
// discover, validate and patch differently (1.27 reads OpenAPI v2 for
// apply), so each must still see a kube-apiserver.
func TestKubectlVersionSkew(t *testing.T) {
	kubectlPath(t)
	p := startUp(t, t.TempDir())
	for _, version := range []string{"1.27", "1.33"} {
		t.Run("kubectl."+version, func(t *testing.T) { testSkew(t, p.kc(t, kubectlVersion(t, version)), version) })
	}
	t.Run("ServerSideApply", func(t *testing.T) {
		for _, version := range []string{"1.27", "1.33"} {
			t.Run("kubectl."+version, func(t *testing.T) {
				testSkewServerSideApply(t, p.kc(t, kubectlVersion(t, version)), version)
			})
		}
	})
}

func testSkew(t *testing.T, k *kc, version string) {
	var v struct {
		ClientVersion struct{ Major, Minor string } `json:"clientVersion"`
	}
	if err := json.Unmarshal([]byte(k.ok("version", "--client", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if got := v.ClientVersion.Major + "." + v.ClientVersion.Minor; got != version {
		t.Fatalf("kubectl.%s is version %s", version, got)
	}
	id := "skew-" + strings.ReplaceAll(version, ".", "")
	k.expect("namespace/"+id+" created", "create", "namespace", id)

	// create -f: every kind, from one multi-document file.
	created := k.file("created.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: created
  namespace: `+id+`
spec:
  containers:
  - name: c
    image: busybox:1.36
---
apiVersion: v1
kind: Node
metadata:
  name: `+id+`-node
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: created
  namespace: `+id+`
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {app: web}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: created
  namespace: `+id+`
spec:
  holderIdentity: h
`)
	k.expect(lines(
		"pod/created created",
		"node/"+id+"-node created",
		"poddisruptionbudget.policy/created created",
		"lease.coordination.k8s.io/created created",
	), "create", "-f", created)
	k.expectFail(lines(
		`Error from server (AlreadyExists): error when creating "`+created+`": pods "created" already exists`,
		`Error from server (AlreadyExists): error when creating "`+created+`": nodes "`+id+`-node" already exists`,
		`Error from server (AlreadyExists): error when creating "`+created+`": poddisruptionbudgets.policy "created" already exists`,
		`Error from server (AlreadyExists): error when creating "`+created+`": leases.coordination.k8s.io "created" already exists`,
	), "create", "-f", created)

	// apply twice, then a changed image.
	manifest := func(image string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: ` + id + `
  labels: {app: web}
spec:
  nodeName: ` + id + `-node
  containers:
  - name: app
    image: ` + image + `
  - name: sidecar
    image: busybox:1.36
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: web
  namespace: ` + id + `
spec:
  holderIdentity: web-1
`
	}
	v1 := k.file("v1.yaml", manifest("nginx:1.27"))
	k.expect(lines("pod/web created", "lease.coordination.k8s.io/web created"), "apply", "-f", v1)
	k.expect(lines("pod/web unchanged", "lease.coordination.k8s.io/web unchanged"), "apply", "-f", v1)
	k.expect(lines("pod/web configured", "lease.coordination.k8s.io/web unchanged"), "apply", "-f", k.file("v2.yaml", manifest("nginx:1.28")))
	k.expect("app=nginx:1.28 sidecar=busybox:1.36 ", "get", "pod", "web", "-n", id, "-o", `jsonpath={range .spec.containers[*]}{.name}={.image} {end}`)
	k.expect(`{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"labels":{"app":"web"},"name":"web","namespace":"`+id+`"},"spec":{"containers":[{"image":"nginx:1.28","name":"app"},{"image":"busybox:1.36","name":"sidecar"}],"nodeName":"`+id+`-node"}}`,
		"get", "pod", "web", "-n", id, "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)

	// get -o wide, Tables for three kinds.
	node := id + "-node"
	pad := strings.Repeat(" ", len(node)-len("NODE"))
	k.expect(lines(
		"NAME      READY   STATUS    RESTARTS   AGE   IP       NODE"+pad+"   NOMINATED NODE   READINESS GATES",
		"created   0/1     Pending   0          0s    <none>   <none>"+strings.Repeat(" ", len(node)-len("<none>"))+"   <none>           <none>",
		"web       0/2     Pending   0          0s    <none>   "+node+"   <none>           <none>",
	), "get", "pods", "-n", id, "-o", "wide")
	k.expect(lines(
		"NAME"+strings.Repeat(" ", len(node)-len("NAME"))+"   STATUS    ROLES    AGE   VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE    KERNEL-VERSION   CONTAINER-RUNTIME",
		node+"   Unknown   <none>   0s              <none>        <none>        <unknown>   <unknown>        <unknown>",
	), "get", "node", node, "-o", "wide")
	k.expect(lines(
		"NAME      MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE",
		"created   N/A             1                 0                     0s",
	), "get", "pdb", "-n", id, "-o", "wide")

	// explain: kubectl 1.27 prints one blank line fewer after FIELD.
	gap := "\n\n"
	if version == "1.27" {
		gap = "\n"
	}
	checkExplain(k, []string{"explain", "pods.spec.containers"},
		"KIND:       Pod\nVERSION:    v1\n\nFIELD: containers <[]Container>\n"+gap+lines(
			"DESCRIPTION:",
			"    List of containers belonging to the pod. Containers cannot currently be",
			"    added or removed. There must be at least one container in a Pod. Cannot be",
			"    updated.",
			"    A single application container that you want to run within a pod.",
			"    ",
			"FIELDS:",
			"  args\t<[]string>",
		), "  name\t<string> -required-")
	checkExplain(k, []string{"explain", "pdb.spec"},
		"GROUP:      policy\nKIND:       PodDisruptionBudget\nVERSION:    v1\n\nFIELD: spec <PodDisruptionBudgetSpec>\n"+gap+lines(
			"DESCRIPTION:",
			"    Specification of the desired behavior of the PodDisruptionBudget.",
			"    PodDisruptionBudgetSpec is a description of a PodDisruptionBudget.",
		), "  minAvailable\t<IntOrString>", "  selector\t<LabelSelector>")

	// Server-side field validation, which every one of them relies on.
	unknown := k.file("unknown.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: unknown\n  namespace: "+id+"\nspec:\n  bogus: 1\n  containers:\n  - name: c\n    image: busybox\n")
	k.expectFail(`Error from server (BadRequest): error when creating "`+unknown+`": Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.bogus"`,
		"create", "-f", unknown, "--validate=strict")
	k.expectOut("pod/unknown created", `Warning: unknown field "spec.bogus"`, "create", "-f", unknown, "--validate=warn")

	// delete: graceful where a kubelet would have to confirm, forced, by
	// file and by selector.
	k.expect(`pod "web" deleted`, "delete", "pod", "web", "-n", id, "--wait=false")
	k.expect(lines(
		"NAME   READY   STATUS        RESTARTS   AGE",
		"web    0/2     Terminating   0          0s",
	), "get", "pod", "web", "-n", id)
	k.expectOut(`pod "web" force deleted`,
		"Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.",
		"delete", "pod", "web", "-n", id, "--grace-period=0", "--force")
	k.expect(lines(
		`pod "created" deleted`,
		`node "`+node+`" deleted`,
		`poddisruptionbudget.policy "created" deleted`,
		`lease.coordination.k8s.io "created" deleted`,
	), "delete", "-f", created, "--wait")
	k.expect(lines(`lease.coordination.k8s.io "web" deleted`), "delete", "leases", "-n", id, "--all")
	k.expect(`pod "unknown" deleted`, "delete", "pods", "-n", id, "-l", "!app")
	k.expectOut("", "No resources found in "+id+" namespace.", "get", "pods,leases,pdb", "-n", id)
}
