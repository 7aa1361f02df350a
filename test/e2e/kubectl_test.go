package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestKubectl drives the real kubectl (PATH's, v1.32) through everything a
// user does with the resources corekube serves: discovery, explain, create,
// apply, replace, patch, label, annotate, get in every output form, delete,
// cordon, field validation and the errors. One `corekube up` serves every
// subtest; each works in its own namespace and names its nodes after it.
// Expected outputs are kubectl's against kube-apiserver v1.32.
func TestKubectl(t *testing.T) {
	bin := kubectlPath(t)
	p := startUp(t, t.TempDir())
	sub := func(name string, f func(t *testing.T, k *kc)) {
		t.Run(name, func(t *testing.T) { f(t, p.kc(t, bin)) })
	}
	sub("Discovery", testDiscovery)
	sub("Explain", testExplain)
	sub("CreateFromFile", testCreateFromFile)
	sub("Apply", testApply)
	sub("Replace", testReplace)
	sub("Patch", testPatch)
	sub("LabelAnnotate", testLabelAnnotate)
	sub("Get", testGet)
	sub("Delete", testDelete)
	sub("CreateGenerators", testCreateGenerators)
	sub("CordonUncordon", testCordon)
	sub("ServerSideApply", testServerSideApply)
	sub("FieldValidation", testFieldValidation)
	sub("Errors", testErrors)
	sub("RBAC", testRBAC)
	sub("AuthCanI", testAuthCanI)
	sub("PriorityClasses", testPriorityClasses)
	sub("Events", testEvents)
}

// testPriorityClasses: the built-in classes exist from the start, kubectl
// creates classes, and pods get their class's priority (or are refused).
func testPriorityClasses(t *testing.T, k *kc) {
	out := k.ok("get", "pc", "system-cluster-critical", "system-node-critical")
	want := regexp.MustCompile(`^NAME +VALUE +GLOBAL-DEFAULT +AGE +PREEMPTIONPOLICY\n` +
		`system-cluster-critical +2000000000 +false +\d+[smh]\S* +PreemptLowerPriority\n` +
		`system-node-critical +2000001000 +false +\d+[smh]\S* +PreemptLowerPriority\n?$`)
	if !want.MatchString(out) {
		t.Errorf("kubectl get pc:\n%s", out)
	}
	if out := k.ok("explain", "pc.preemptionPolicy"); !strings.Contains(out, "GROUP:      scheduling.k8s.io") ||
		!strings.Contains(out, "KIND:       PriorityClass") || !strings.Contains(out, "FIELD: preemptionPolicy <string>") {
		t.Errorf("kubectl explain pc.preemptionPolicy:\n%s", out)
	}
	k.expect("priorityclass.scheduling.k8s.io/high created", "create", "priorityclass", "high", "--value=1000")
	k.expect("priorityclass.scheduling.k8s.io/never created", "create", "priorityclass", "never", "--value=10",
		"--preemption-policy=Never", "--description=no preemption")
	k.expect("1000 PreemptLowerPriority", "get", "priorityclass", "high", "-o", "jsonpath={.value} {.preemptionPolicy}")
	k.expect(lines(
		"NAME    VALUE   GLOBAL-DEFAULT   AGE   PREEMPTIONPOLICY",
		"high    1000    false            0s    PreemptLowerPriority",
		"never   10      false            0s    Never",
	), "get", "pc", "high", "never")
	k.expect("namespace/e2e-prio created", "create", "namespace", "e2e-prio")
	k.expect("pod/p created", "run", "p", "-n", "e2e-prio", "--image=busybox", "--restart=Never",
		`--overrides={"spec":{"priorityClassName":"high"}}`)
	k.expect("high 1000 PreemptLowerPriority", "get", "pod", "p", "-n", "e2e-prio",
		"-o", "jsonpath={.spec.priorityClassName} {.spec.priority} {.spec.preemptionPolicy}")
	k.expectFail(`Error from server (Forbidden): pods "q" is forbidden: no PriorityClass with name nope was found`,
		"run", "q", "-n", "e2e-prio", "--image=busybox", "--restart=Never", `--overrides={"spec":{"priorityClassName":"nope"}}`)
	k.expectFail(`Error from server (Forbidden): priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system priority class and cannot be deleted`,
		"delete", "pc", "system-node-critical")
	k.expect(lines(`priorityclass.scheduling.k8s.io "high" deleted`, `priorityclass.scheduling.k8s.io "never" deleted`), "delete", "pc", "high", "never")
}

func testDiscovery(t *testing.T, k *kc) {
	k.expect(lines(
		"NAME                              SHORTNAMES   APIVERSION                        NAMESPACED   KIND",
		"events                            ev           v1                                true         Event",
		"namespaces                        ns           v1                                false        Namespace",
		"nodes                             no           v1                                false        Node",
		"pods                              po           v1                                true         Pod",
		"serviceaccounts                   sa           v1                                true         ServiceAccount",
		"mutatingwebhookconfigurations                  admissionregistration.k8s.io/v1   false        MutatingWebhookConfiguration",
		"validatingwebhookconfigurations                admissionregistration.k8s.io/v1   false        ValidatingWebhookConfiguration",
		"selfsubjectreviews                             authentication.k8s.io/v1          false        SelfSubjectReview",
		"tokenreviews                                   authentication.k8s.io/v1          false        TokenReview",
		"localsubjectaccessreviews                      authorization.k8s.io/v1           true         LocalSubjectAccessReview",
		"selfsubjectaccessreviews                       authorization.k8s.io/v1           false        SelfSubjectAccessReview",
		"selfsubjectrulesreviews                        authorization.k8s.io/v1           false        SelfSubjectRulesReview",
		"subjectaccessreviews                           authorization.k8s.io/v1           false        SubjectAccessReview",
		"certificatesigningrequests        csr          certificates.k8s.io/v1            false        CertificateSigningRequest",
		"leases                                         coordination.k8s.io/v1            true         Lease",
		"events                            ev           events.k8s.io/v1                  true         Event",
		"flowschemas                                    flowcontrol.apiserver.k8s.io/v1   false        FlowSchema",
		"prioritylevelconfigurations                    flowcontrol.apiserver.k8s.io/v1   false        PriorityLevelConfiguration",
		"poddisruptionbudgets              pdb          policy/v1                         true         PodDisruptionBudget",
		"clusterrolebindings                            rbac.authorization.k8s.io/v1      false        ClusterRoleBinding",
		"clusterroles                                   rbac.authorization.k8s.io/v1      false        ClusterRole",
		"rolebindings                                   rbac.authorization.k8s.io/v1      true         RoleBinding",
		"roles                                          rbac.authorization.k8s.io/v1      true         Role",
		"priorityclasses                   pc           scheduling.k8s.io/v1              false        PriorityClass",
	), "api-resources")
	const all = "create,delete,deletecollection,get,list,patch,update,watch"
	k.expect(lines(
		"NAME                              SHORTNAMES   APIVERSION                        NAMESPACED   KIND                             VERBS                                                        CATEGORIES",
		"events                            ev           v1                                true         Event                            "+all+"   ",
		"namespaces                        ns           v1                                false        Namespace                        create,delete,get,list,patch,update,watch                    ",
		"nodes                             no           v1                                false        Node                             "+all+"   ",
		"pods                              po           v1                                true         Pod                              "+all+"   all",
		"serviceaccounts                   sa           v1                                true         ServiceAccount                   "+all+"   ",
		"mutatingwebhookconfigurations                  admissionregistration.k8s.io/v1   false        MutatingWebhookConfiguration     "+all+"   api-extensions",
		"validatingwebhookconfigurations                admissionregistration.k8s.io/v1   false        ValidatingWebhookConfiguration   "+all+"   api-extensions",
		"selfsubjectreviews                             authentication.k8s.io/v1          false        SelfSubjectReview                create                                                       ",
		"tokenreviews                                   authentication.k8s.io/v1          false        TokenReview                      create                                                       ",
		"localsubjectaccessreviews                      authorization.k8s.io/v1           true         LocalSubjectAccessReview         create                                                       ",
		"selfsubjectaccessreviews                       authorization.k8s.io/v1           false        SelfSubjectAccessReview          create                                                       ",
		"selfsubjectrulesreviews                        authorization.k8s.io/v1           false        SelfSubjectRulesReview           create                                                       ",
		"subjectaccessreviews                           authorization.k8s.io/v1           false        SubjectAccessReview              create                                                       ",
		"certificatesigningrequests        csr          certificates.k8s.io/v1            false        CertificateSigningRequest        "+all+"   ",
		"leases                                         coordination.k8s.io/v1            true         Lease                            "+all+"   ",
		"events                            ev           events.k8s.io/v1                  true         Event                            "+all+"   ",
		"flowschemas                                    flowcontrol.apiserver.k8s.io/v1   false        FlowSchema                       "+all+"   ",
		"prioritylevelconfigurations                    flowcontrol.apiserver.k8s.io/v1   false        PriorityLevelConfiguration       "+all+"   ",
		"poddisruptionbudgets              pdb          policy/v1                         true         PodDisruptionBudget              "+all+"   ",
		"clusterrolebindings                            rbac.authorization.k8s.io/v1      false        ClusterRoleBinding               "+all+"   ",
		"clusterroles                                   rbac.authorization.k8s.io/v1      false        ClusterRole                      "+all+"   ",
		"rolebindings                                   rbac.authorization.k8s.io/v1      true         RoleBinding                      "+all+"   ",
		"roles                                          rbac.authorization.k8s.io/v1      true         Role                             "+all+"   ",
		"priorityclasses                   pc           scheduling.k8s.io/v1              false        PriorityClass                    "+all+"   ",
	), "api-resources", "-o", "wide")
	k.expect(lines("namespaces", "nodes", "mutatingwebhookconfigurations.admissionregistration.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io", "selfsubjectreviews.authentication.k8s.io", "tokenreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io", "selfsubjectrulesreviews.authorization.k8s.io", "subjectaccessreviews.authorization.k8s.io", "certificatesigningrequests.certificates.k8s.io", "flowschemas.flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io", "priorityclasses.scheduling.k8s.io"), "api-resources", "--namespaced=false", "-o", "name")
	k.expect("poddisruptionbudgets.policy", "api-resources", "--api-group=policy", "-o", "name")
	k.expect(lines("admissionregistration.k8s.io/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "certificates.k8s.io/v1", "coordination.k8s.io/v1", "events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1", "policy/v1", "rbac.authorization.k8s.io/v1", "scheduling.k8s.io/v1", "v1"), "api-versions")

	// Every short name resolves.
	k.expect("namespace/kube-system", "get", "ns", "kube-system", "-o", "name")
	// kube serves "ev" for events in both groups: kubectl picks core's and
	// warns.
	k.expectOut("", lines(`Warning: short name "ev" could also match lower priority resource events.events.k8s.io`,
		"No resources found in kube-public namespace."), "get", "po,ev,pdb,leases", "-n", "kube-public")
	k.expectOut("", "No resources found", "get", "no", "-l", "e2e=none")
	// The "all" category holds pods.
	k.expect("namespace/e2e-discovery created", "create", "namespace", "e2e-discovery")
	k.expect("pod/p created", "run", "p", "-n", "e2e-discovery", "--image=busybox", "--restart=Never")
	k.expect("pod/p", "get", "all", "-n", "e2e-discovery", "-o", "name")
}

func testExplain(t *testing.T, k *kc) {
	checkExplain(k, []string{"explain", "pods.spec.containers"}, lines(
		"KIND:       Pod",
		"VERSION:    v1",
		"",
		"FIELD: containers <[]Container>",
		"",
		"",
		"DESCRIPTION:",
		"    List of containers belonging to the pod. Containers cannot currently be",
		"    added or removed. There must be at least one container in a Pod. Cannot be",
		"    updated.",
		"    A single application container that you want to run within a pod.",
		"    ",
		"FIELDS:",
		"  args\t<[]string>",
		"    Arguments to the entrypoint. The container image's CMD is used if this is",
	), "  image\t<string>", "  name\t<string> -required-", "  ports\t<[]ContainerPort>", "  resources\t<ResourceRequirements>")
	checkExplain(k, []string{"explain", "pdb.spec"}, lines(
		"GROUP:      policy",
		"KIND:       PodDisruptionBudget",
		"VERSION:    v1",
		"",
		"FIELD: spec <PodDisruptionBudgetSpec>",
		"",
		"",
		"DESCRIPTION:",
		"    Specification of the desired behavior of the PodDisruptionBudget.",
		"    PodDisruptionBudgetSpec is a description of a PodDisruptionBudget.",
		"    ",
		"FIELDS:",
		"  maxUnavailable\t<IntOrString>",
		"    An eviction is allowed if at most \"maxUnavailable\" pods selected by",
	), "  minAvailable\t<IntOrString>", "  selector\t<LabelSelector>", "  unhealthyPodEvictionPolicy\t<string>")
	checkExplain(k, []string{"explain", "leases.spec.holderIdentity"}, lines(
		"GROUP:      coordination.k8s.io",
		"KIND:       Lease",
		"VERSION:    v1",
		"",
		"FIELD: holderIdentity <string>",
		"",
		"",
		"DESCRIPTION:",
		"    holderIdentity contains the identity of the holder of a current lease. If",
		"    Coordinated Leader Election is used, the holder identity must be equal to",
		"    the elected LeaseCandidate.metadata.name field.",
	))
}

// checkExplain runs kubectl explain: its output starts with head and has
// the field lines fields.
func checkExplain(k *kc, args []string, head string, fields ...string) {
	k.t.Helper()
	out := k.ok(args...)
	if !strings.HasPrefix(out, head) {
		k.t.Errorf("kubectl %s:\n%s\nwant it to start with:\n%s", strings.Join(args, " "), out, head)
	}
	have := strings.Split(out, "\n")
	for _, f := range fields {
		found := false
		for _, l := range have {
			found = found || l == f
		}
		if !found {
			k.t.Errorf("kubectl %s: no line %q in\n%s", strings.Join(args, " "), f, out)
		}
	}
}

func testCreateFromFile(t *testing.T, k *kc) {
	k.expect("namespace/e2e-create created", "create", "namespace", "e2e-create")
	objects := k.file("objects.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: e2e-create
  labels: {app: web}
spec:
  containers:
  - name: app
    image: nginx:1.27
---
apiVersion: v1
kind: Node
metadata:
  name: e2e-create-node
  labels: {e2e: create}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: e2e-create
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: leader
  namespace: e2e-create
spec:
  holderIdentity: replica-1
  leaseDurationSeconds: 15
`)
	k.expect(lines(
		"pod/web created",
		"node/e2e-create-node created",
		"poddisruptionbudget.policy/web created",
		"lease.coordination.k8s.io/leader created",
	), "create", "-f", objects)
	k.expect(lines(
		"pod/web",
		"node/e2e-create-node",
		"poddisruptionbudget.policy/web",
		"lease.coordination.k8s.io/leader",
	), "get", "-f", objects, "-o", "name")
	k.expect(lines(
		"NAME   READY   STATUS    RESTARTS   AGE",
		"web    0/1     Pending   0          0s",
	), "get", "pods", "-n", "e2e-create")
	k.expect(lines(
		"NAME   MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE",
		"web    1               N/A               0                     0s",
	), "get", "pdb", "-n", "e2e-create")
	k.expect(lines(
		"NAME     HOLDER      AGE",
		"leader   replica-1   0s",
	), "get", "leases", "-n", "e2e-create")
	k.expect(lines(
		"NAME              STATUS    ROLES    AGE   VERSION",
		"e2e-create-node   Unknown   <none>   0s    ",
	), "get", "nodes", "-l", "e2e=create")
	// The disruption controller (run by `up`) observes the budget: one
	// matching pod, not Ready (no node runs it), one required.
	k.ok("wait", "--for=jsonpath={.status.observedGeneration}=1", "pdb/web", "-n", "e2e-create", "--timeout=30s")
	k.expect("1 0 1 0 1", "get", "pdb", "web", "-n", "e2e-create", "-o",
		"jsonpath={.metadata.generation} {.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed} {.status.expectedPods}")

	// The same file again: every object already exists.
	k.expectFail(lines(
		`Error from server (AlreadyExists): error when creating "`+objects+`": pods "web" already exists`,
		`Error from server (AlreadyExists): error when creating "`+objects+`": nodes "e2e-create-node" already exists`,
		`Error from server (AlreadyExists): error when creating "`+objects+`": poddisruptionbudgets.policy "web" already exists`,
		`Error from server (AlreadyExists): error when creating "`+objects+`": leases.coordination.k8s.io "leader" already exists`,
	), "create", "-f", objects)

	// A server-side dry run answers as a create would and stores nothing.
	dry := k.file("dry.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dry\n  namespace: e2e-create\nspec:\n  containers:\n  - name: c\n    image: busybox\n")
	k.expect("pod/dry created (server dry run)", "create", "-f", dry, "--dry-run=server")
	k.expectFail(`Error from server (NotFound): pods "dry" not found`, "get", "pod", "dry", "-n", "e2e-create")

	// type/name pairs.
	k.expect(lines("pod/web", "node/e2e-create-node"), "get", "pod/web", "node/e2e-create-node", "-n", "e2e-create", "-o", "name")
}

func testApply(t *testing.T, k *kc) {
	k.expect("namespace/e2e-apply created", "create", "namespace", "e2e-apply")
	manifest := func(appImage string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: e2e-apply
  labels: {app: web}
spec:
  containers:
  - name: app
    image: ` + appImage + `
  - name: sidecar
    image: busybox:1.36
---
apiVersion: v1
kind: Node
metadata:
  name: e2e-apply-node
  labels: {e2e: apply}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: leader
  namespace: e2e-apply
spec:
  holderIdentity: replica-1
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: e2e-apply
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
`
	}
	v1 := k.file("v1.yaml", manifest("nginx:1.27"))
	k.expect(lines(
		"pod/app created",
		"node/e2e-apply-node created",
		"lease.coordination.k8s.io/leader created",
		"poddisruptionbudget.policy/web created",
	), "apply", "-f", v1)
	// The PodDisruptionBudget says configured, not unchanged, with kube too:
	// spec.selector's patch strategy is replace, so kubectl's three-way
	// patch always carries it (a no-op on the server).
	k.expect(lines(
		"pod/app unchanged",
		"node/e2e-apply-node unchanged",
		"lease.coordination.k8s.io/leader unchanged",
		"poddisruptionbudget.policy/web configured",
	), "apply", "-f", v1)
	// ... which changes nothing.
	rv := k.ok("get", "pdb", "web", "-n", "e2e-apply", "-o", "jsonpath={.metadata.resourceVersion}/{.metadata.generation}")
	k.expect(lines(
		"pod/app unchanged",
		"node/e2e-apply-node unchanged",
		"lease.coordination.k8s.io/leader unchanged",
		"poddisruptionbudget.policy/web configured",
	), "apply", "-f", v1)
	k.expect(rv, "get", "pdb", "web", "-n", "e2e-apply", "-o", "jsonpath={.metadata.resourceVersion}/{.metadata.generation}")

	// A new image: a strategic merge patch that merges containers by name,
	// keeping the sidecar and the fields the server defaulted.
	v2 := k.file("v2.yaml", manifest("nginx:1.28"))
	k.expect(lines(
		"pod/app configured",
		"node/e2e-apply-node unchanged",
		"lease.coordination.k8s.io/leader unchanged",
		"poddisruptionbudget.policy/web configured",
	), "apply", "-f", v2)
	k.expect(`{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"labels":{"app":"web"},"name":"app","namespace":"e2e-apply"},"spec":{"containers":[{"image":"nginx:1.28","name":"app"},{"image":"busybox:1.36","name":"sidecar"}]}}`,
		"get", "pod", "app", "-n", "e2e-apply", "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)
	k.expect(lines(
		"app nginx:1.28 IfNotPresent /dev/termination-log File",
		"sidecar busybox:1.36 IfNotPresent /dev/termination-log File",
	), "get", "pod", "app", "-n", "e2e-apply", "-o",
		`jsonpath={range .spec.containers[*]}{.name} {.image} {.imagePullPolicy} {.terminationMessagePath} {.terminationMessagePolicy}{"\n"}{end}`)

	// A label added by someone else survives apply; one removed from the
	// manifest is removed from the object.
	k.expect("pod/app labeled", "label", "pod", "app", "-n", "e2e-apply", "owner=ops")
	v3 := k.file("v3.yaml", strings.Replace(manifest("nginx:1.28"), "labels: {app: web}", "labels: {tier: fe}", 1))
	k.expect(lines(
		"pod/app configured",
		"node/e2e-apply-node unchanged",
		"lease.coordination.k8s.io/leader unchanged",
		"poddisruptionbudget.policy/web configured",
	), "apply", "-f", v3)
	k.expect(`{"owner":"ops","tier":"fe"}`, "get", "pod", "app", "-n", "e2e-apply", "-o", "jsonpath={.metadata.labels}")

	// kubectl diff: nothing against the live objects, then the change.
	k.expect("", "diff", "-f", v3)
	v4 := k.file("v4.yaml", strings.Replace(manifest("nginx:1.28"), "holderIdentity: replica-1", "holderIdentity: replica-2", 1))
	out, _, err := k.run("diff", "-f", v4)
	if err == nil || !strings.Contains(out, "\n-  holderIdentity: replica-1\n+  holderIdentity: replica-2\n") {
		t.Errorf("kubectl diff: %v\n%s", err, out)
	}
	k.expect("replica-1", "get", "lease", "leader", "-n", "e2e-apply", "-o", "jsonpath={.spec.holderIdentity}")

	// apply on an object created without it: kubectl's warning, then the
	// annotation is added.
	created := k.file("created.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: created\n  namespace: e2e-apply\nspec:\n  containers:\n  - name: c\n    image: busybox\n")
	k.expect("pod/created created", "create", "-f", created)
	k.expectOut("pod/created configured",
		"Warning: resource pods/created is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by kubectl apply. kubectl apply should only be used on resources created declaratively by either kubectl create --save-config or kubectl apply. The missing annotation will be patched automatically.",
		"apply", "-f", created)
	k.expect("pod/created unchanged", "apply", "-f", created)
	// A server-side dry run changes nothing.
	k.expect("pod/created configured (server dry run)", "apply", "-f",
		k.file("created2.yaml", strings.Replace(readFile(t, created), "image: busybox", "image: busybox:1.37", 1)), "--dry-run=server")
	k.expect("busybox", "get", "pod", "created", "-n", "e2e-apply", "-o", "jsonpath={.spec.containers[0].image}")
}

func testReplace(t *testing.T, k *kc) {
	k.expect("namespace/e2e-replace created", "create", "namespace", "e2e-replace")
	k.expect("pod/r created", "run", "r", "-n", "e2e-replace", "--image=busybox:1.36", "--restart=Never", "--labels=app=r")
	live := k.ok("get", "pod", "r", "-n", "e2e-replace", "-o", "yaml")
	edited := k.file("r.yaml", strings.Replace(live, "app: r", "app: replaced", 1))
	k.expect("pod/r replaced", "replace", "-f", edited)
	k.expect(`{"app":"replaced"}`, "get", "pod", "r", "-n", "e2e-replace", "-o", "jsonpath={.metadata.labels}")
	// The same file again carries a resourceVersion that is no longer current.
	k.expectFail(`Error from server (Conflict): error when replacing "`+edited+`": Operation cannot be fulfilled on pods "r": the object has been modified; please apply your changes to the latest version and try again`,
		"replace", "-f", edited)
	// A changed image is one of the few pod updates kube allows.
	live = k.ok("get", "pod", "r", "-n", "e2e-replace", "-o", "yaml")
	k.expect("pod/r replaced", "replace", "-f", k.file("r2.yaml", strings.Replace(live, "image: busybox:1.36", "image: busybox:1.37", 1)))
	k.expect("busybox:1.37", "get", "pod", "r", "-n", "e2e-replace", "-o", "jsonpath={.spec.containers[0].image}")
	// Anything else is refused with kube's validation error.
	live = k.ok("get", "pod", "r", "-n", "e2e-replace", "-o", "yaml")
	k.expectFail(`The Pod "r" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers`,
		"replace", "-f", k.file("r3.yaml", strings.Replace(live, "  containers:\n", "  containers:\n  - name: extra\n    image: busybox\n", 1)))
	// --force deletes and creates again: a new uid.
	uid := k.ok("get", "pod", "r", "-n", "e2e-replace", "-o", "jsonpath={.metadata.uid}")
	live = k.ok("get", "pod", "r", "-n", "e2e-replace", "-o", "yaml")
	k.expect(lines(`pod "r" deleted`, "pod/r replaced"), "replace", "--force", "-f", k.file("r4.yaml", live))
	if newUID := k.ok("get", "pod", "r", "-n", "e2e-replace", "-o", "jsonpath={.metadata.uid}"); newUID == uid || newUID == "" {
		t.Errorf("replace --force: uid %q, was %q", newUID, uid)
	}
}

func testPatch(t *testing.T, k *kc) {
	k.expect("namespace/e2e-patch created", "create", "namespace", "e2e-patch")
	k.expect("pod/p created", "create", "-f", k.file("p.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: e2e-patch
  labels: {app: p}
spec:
  containers:
  - name: app
    image: nginx:1.27
  - name: sidecar
    image: busybox:1.36
`))
	images := func(want string) {
		t.Helper()
		k.expect(want, "get", "pod", "p", "-n", "e2e-patch", "-o", `jsonpath={range .spec.containers[*]}{.name}={.image} {end}`)
	}
	k.expect("pod/p patched", "patch", "pod", "p", "-n", "e2e-patch", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.28"},{"op":"add","path":"/metadata/labels/json","value":"yes"}]`)
	images("app=nginx:1.28 sidecar=busybox:1.36 ")
	k.expect("pod/p patched", "patch", "pod", "p", "-n", "e2e-patch", "--type=merge", "-p", `{"metadata":{"labels":{"merge":"yes","json":null}}}`)
	k.expect(`{"app":"p","merge":"yes"}`, "get", "pod", "p", "-n", "e2e-patch", "-o", "jsonpath={.metadata.labels}")
	// Strategic merge patch finds the container by its name.
	k.expect("pod/p patched", "patch", "pod", "p", "-n", "e2e-patch", "--type=strategic", "-p", `{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}`)
	images("app=nginx:1.28 sidecar=busybox:1.37 ")
	k.expect("pod/p patched (no change)", "patch", "pod", "p", "-n", "e2e-patch", "-p", `{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}`)
	// A merge patch replaces the whole list, which a pod refuses.
	k.expectFail(`The Pod "p" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers`,
		"patch", "pod", "p", "-n", "e2e-patch", "--type=merge", "-p", `{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.38"}]}}`)
	// A JSON patch that cannot apply: kube's generic 422.
	k.expectFail("The request is invalid: the server rejected our request due to an error in our request",
		"patch", "pod", "p", "-n", "e2e-patch", "--type=json", "-p", `[{"op":"remove","path":"/metadata/labels/nope"}]`)
	// A JSON patch test that fails leaves the object alone.
	k.expectFail("The request is invalid: the server rejected our request due to an error in our request",
		"patch", "pod", "p", "-n", "e2e-patch", "--type=json", "-p", `[{"op":"test","path":"/metadata/labels/app","value":"q"},{"op":"add","path":"/metadata/labels/x","value":"y"}]`)
	images("app=nginx:1.28 sidecar=busybox:1.37 ")
	// Patching status through its subresource, and a dry run.
	k.expect("pod/p patched", "patch", "pod", "p", "-n", "e2e-patch", "--subresource=status", "--type=merge", "-p", `{"status":{"message":"hello"}}`)
	k.expect("hello", "get", "pod", "p", "-n", "e2e-patch", "-o", "jsonpath={.status.message}")
	// (kubectl patch names no dry run in what it prints.)
	k.expect("pod/p patched", "patch", "pod", "p", "-n", "e2e-patch", "--type=merge", "-p", `{"metadata":{"labels":{"dry":"run"}}}`, "--dry-run=server")
	k.expect(`{"app":"p","merge":"yes"}`, "get", "pod", "p", "-n", "e2e-patch", "-o", "jsonpath={.metadata.labels}")
	k.expectFail(`Error from server (NotFound): pods "nope" not found`, "patch", "pod", "nope", "-n", "e2e-patch", "-p", `{"metadata":{"labels":{"a":"b"}}}`)
}

func testLabelAnnotate(t *testing.T, k *kc) {
	k.expect("namespace/e2e-label created", "create", "namespace", "e2e-label")
	k.expect("pod/a created", "run", "a", "-n", "e2e-label", "--image=busybox", "--restart=Never", "--labels=app=a")
	k.expect("pod/b created", "run", "b", "-n", "e2e-label", "--image=busybox", "--restart=Never", "--labels=app=b")
	labels := func(want string) {
		t.Helper()
		k.expect(want, "get", "pod", "a", "-n", "e2e-label", "-o", "jsonpath={.metadata.labels}")
	}
	k.expect("pod/a labeled", "label", "pod", "a", "-n", "e2e-label", "tier=fe")
	labels(`{"app":"a","tier":"fe"}`)
	k.expectFail("error: 'tier' already has a value (fe), and --overwrite is false", "label", "pod", "a", "-n", "e2e-label", "tier=be")
	k.expect("pod/a labeled", "label", "pod", "a", "-n", "e2e-label", "tier=be", "--overwrite")
	labels(`{"app":"a","tier":"be"}`)
	k.expect("pod/a not labeled", "label", "pod", "a", "-n", "e2e-label", "tier=be", "--overwrite")
	k.expect("pod/a unlabeled", "label", "pod", "a", "-n", "e2e-label", "tier-")
	labels(`{"app":"a"}`)
	k.expect(lines(`label "tier" not found.`, "pod/a not labeled"), "label", "pod", "a", "-n", "e2e-label", "tier-")
	// Several objects at once, by selector and with --all.
	k.expect(lines("pod/a labeled", "pod/b labeled"), "label", "pods", "-n", "e2e-label", "--all", "team=core")
	k.expect("pod/b labeled", "label", "pods", "-n", "e2e-label", "-l", "app=b", "team=edge", "--overwrite")
	k.expect(lines(
		"NAME   READY   STATUS    RESTARTS   AGE   LABELS",
		"a      0/1     Pending   0          0s    app=a,team=core",
		"b      0/1     Pending   0          0s    app=b,team=edge",
	), "get", "pods", "-n", "e2e-label", "--show-labels")

	annotations := func(want string) {
		t.Helper()
		k.expect(want, "get", "pod", "a", "-n", "e2e-label", "-o", "jsonpath={.metadata.annotations}")
	}
	k.expect("pod/a annotated", "annotate", "pod", "a", "-n", "e2e-label", "note=hello", "owner=ops")
	annotations(`{"note":"hello","owner":"ops"}`)
	k.expectFail("error: --overwrite is false but found the following declared annotation(s): 'note' already has a value (hello)",
		"annotate", "pod", "a", "-n", "e2e-label", "note=bye")
	k.expect("pod/a annotated", "annotate", "pod", "a", "-n", "e2e-label", "note=bye", "--overwrite")
	annotations(`{"note":"bye","owner":"ops"}`)
	k.expect("pod/a annotated", "annotate", "pod", "a", "-n", "e2e-label", "note-")
	annotations(`{"owner":"ops"}`)
	// Cluster-scoped objects and namespaces label the same way.
	k.expect("namespace/e2e-label labeled", "label", "namespace", "e2e-label", "team=core")
	k.expect("namespace/e2e-label", "get", "namespaces", "-l", "team=core", "-o", "name")
	k.expect(`{"kubernetes.io/metadata.name":"e2e-label","team":"core"}`, "get", "namespace", "e2e-label", "-o", "jsonpath={.metadata.labels}")
}

func testGet(t *testing.T, k *kc) {
	k.expect("namespace/e2e-get created", "create", "namespace", "e2e-get")
	k.expect(lines("node/e2e-get-node created", "pod/a created", "pod/b created", "pod/c created"), "create", "-f", k.file("get.yaml", `apiVersion: v1
kind: Node
metadata:
  name: e2e-get-node
---
apiVersion: v1
kind: Pod
metadata:
  name: a
  namespace: e2e-get
  labels: {app: web, tier: fe, suite: get}
spec:
  nodeName: e2e-get-node
  containers:
  - name: c
    image: nginx:1.27
---
apiVersion: v1
kind: Pod
metadata:
  name: b
  namespace: e2e-get
  labels: {app: web, tier: be, suite: get}
spec:
  containers:
  - name: c
    image: busybox:1.36
  - name: d
    image: busybox:1.36
---
apiVersion: v1
kind: Pod
metadata:
  name: c
  namespace: e2e-get
  labels: {app: db, suite: get}
spec:
  containers:
  - name: c
    image: postgres:17
`))
	ns := []string{"-n", "e2e-get"}
	get := func(args ...string) []string { return append(append([]string{"get"}, args...), ns...) }
	k.expect(lines(
		"NAME   READY   STATUS    RESTARTS   AGE",
		"a      0/1     Pending   0          0s",
		"b      0/2     Pending   0          0s",
		"c      0/1     Pending   0          0s",
	), get("pods")...)
	k.expect(lines(
		"NAME   READY   STATUS    RESTARTS   AGE   IP       NODE           NOMINATED NODE   READINESS GATES",
		"a      0/1     Pending   0          0s    <none>   e2e-get-node   <none>           <none>",
		"b      0/2     Pending   0          0s    <none>   <none>         <none>           <none>",
		"c      0/1     Pending   0          0s    <none>   <none>         <none>           <none>",
	), get("pods", "-o", "wide")...)
	k.expect(lines("pod/a", "pod/b", "pod/c"), get("pods", "-o", "name")...)
	k.expect(lines("pod/a", "pod/c"), get("pod", "a", "c", "-o", "name")...)
	k.expect("a=nginx:1.27 b=busybox:1.36 c=postgres:17 ", get("pods", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}`)...)
	k.expect("a b c", get("pods", "-o", "jsonpath={.items[*].metadata.name}")...)
	k.expect(lines(
		"NAME   APP   NODE           IMAGES",
		"a      web   e2e-get-node   nginx:1.27",
		"b      web   <none>         busybox:1.36,busybox:1.36",
		"c      db    <none>         postgres:17",
	), get("pods", "-o", "custom-columns=NAME:.metadata.name,APP:.metadata.labels.app,NODE:.spec.nodeName,IMAGES:.spec.containers[*].image")...)
	k.expect(lines(
		"NAME   READY   STATUS    RESTARTS   AGE   LABELS",
		"a      0/1     Pending   0          0s    app=web,suite=get,tier=fe",
		"b      0/2     Pending   0          0s    app=web,suite=get,tier=be",
		"c      0/1     Pending   0          0s    app=db,suite=get",
	), get("pods", "--show-labels")...)
	k.expect(lines("b", "a", "c"), get("pods", "--sort-by=.spec.containers[0].image", "--no-headers", "-o", "custom-columns=:.metadata.name")...)
	k.expect(lines(
		"NAME   READY   STATUS    RESTARTS   AGE",
		"b      0/2     Pending   0          0s",
		"a      0/1     Pending   0          0s",
	), get("pods", "-l", "app=web", "--sort-by=.metadata.labels.tier")...)

	// Label selectors, equality- and set-based.
	k.expect(lines("pod/a", "pod/b"), get("pods", "-l", "app=web", "-o", "name")...)
	k.expect("pod/c", get("pods", "-l", "app!=web", "-o", "name")...)
	k.expect("pod/c", get("pods", "-l", "!tier", "-o", "name")...)
	k.expect(lines("pod/a", "pod/b"), get("pods", "-l", "tier", "-o", "name")...)
	k.expect("pod/b", get("pods", "-l", "tier in (be,xx),app=web", "-o", "name")...)
	k.expect(lines("pod/a", "pod/c"), get("pods", "-l", "tier notin (be)", "-o", "name")...)
	k.expectOut("", "No resources found in e2e-get namespace.", get("pods", "-l", "app=none")...)
	// Field selectors.
	k.expect("pod/a", get("pods", "--field-selector", "spec.nodeName=e2e-get-node", "-o", "name")...)
	k.expect(lines("pod/b", "pod/c"), get("pods", "--field-selector", "spec.nodeName=", "-o", "name")...)
	k.expect(lines("pod/a", "pod/b", "pod/c"), get("pods", "--field-selector", "status.phase=Pending", "-o", "name")...)
	k.expect("pod/b", get("pods", "--field-selector", "metadata.name=b,status.phase!=Running", "-o", "name")...)
	k.expectOut("", "No resources found in e2e-get namespace.", get("pods", "--field-selector", "status.phase=Running")...)
	k.expect("node/e2e-get-node", "get", "nodes", "--field-selector", "metadata.name=e2e-get-node", "-o", "name")
	k.expectFail(`Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label selector "", field selector "spec.foo=bar": field label not supported: spec.foo`,
		get("pods", "--field-selector", "spec.foo=bar")...)
	// All namespaces.
	k.expect(lines(
		"NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE",
		"e2e-get     a      0/1     Pending   0          0s",
		"e2e-get     b      0/2     Pending   0          0s",
		"e2e-get     c      0/1     Pending   0          0s",
	), "get", "pods", "-A", "-l", "suite=get")
	k.expect(lines("pod/a", "pod/b", "pod/c"), "get", "pods", "--all-namespaces", "-l", "suite=get", "-o", "name")
	k.expect(lines(
		"NAMESPACE   NAME   NODE",
		"e2e-get     a      e2e-get-node",
	), "get", "pods", "-A", "--field-selector", "spec.nodeName=e2e-get-node", "-o", "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,NODE:.spec.nodeName")
	// Paging: kubectl follows continue tokens.
	k.expect(lines("pod/a", "pod/b", "pod/c"), get("pods", "--chunk-size=1", "-o", "name")...)

	// -o json and -o yaml carry the whole objects.
	var list struct {
		APIVersion, Kind string
		Items            []struct {
			Kind     string
			Metadata struct{ Name, Namespace, UID, ResourceVersion string }
			Spec     struct{ NodeName string }
			Status   struct{ Phase, QOSClass string }
		}
	}
	if err := json.Unmarshal([]byte(k.ok(get("pods", "-o", "json")...)), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 3 {
		t.Fatalf("kubectl get pods -o json: %+v", list)
	}
	for i, name := range []string{"a", "b", "c"} {
		it := list.Items[i]
		if it.Kind != "Pod" || it.Metadata.Name != name || it.Metadata.Namespace != "e2e-get" || it.Metadata.UID == "" ||
			it.Metadata.ResourceVersion == "" || it.Status.Phase != "Pending" || it.Status.QOSClass != "BestEffort" {
			t.Errorf("kubectl get pods -o json: item %d: %+v", i, it)
		}
	}
	var pod struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Metadata   struct{ Name, Namespace string }
		Spec       struct {
			NodeName   string `json:"nodeName"`
			Containers []struct{ Name, Image, ImagePullPolicy string }
		}
	}
	if err := yaml.Unmarshal([]byte(k.ok(get("pod", "a", "-o", "yaml")...)), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.APIVersion != "v1" || pod.Kind != "Pod" || pod.Metadata.Name != "a" || pod.Spec.NodeName != "e2e-get-node" ||
		len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != "nginx:1.27" || pod.Spec.Containers[0].ImagePullPolicy != "IfNotPresent" {
		t.Errorf("kubectl get pod a -o yaml: %+v", pod)
	}
	if out := k.ok(get("pods", "-o", "yaml")...); !strings.HasPrefix(out, "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n") ||
		!strings.HasSuffix(out, "\nkind: List\nmetadata:\n  resourceVersion: \"\"") {
		t.Errorf("kubectl get pods -o yaml:\n%s", out)
	}
	// Nodes, -o wide.
	k.expect(lines(
		"NAME           STATUS    ROLES    AGE   VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE    KERNEL-VERSION   CONTAINER-RUNTIME",
		"e2e-get-node   Unknown   <none>   0s              <none>        <none>        <unknown>   <unknown>        <unknown>",
	), "get", "node", "e2e-get-node", "-o", "wide")
}

func testDelete(t *testing.T, k *kc) {
	k.expect("namespace/e2e-delete created", "create", "namespace", "e2e-delete")
	pod := func(name, extra string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: e2e-delete\n  labels: {group: '" + name[:1] + "'}\n" + extra +
			"spec:\n  containers:\n  - name: c\n    image: busybox\n"
	}
	scheduled := func(name string) string {
		return strings.Replace(pod(name, ""), "spec:\n", "spec:\n  nodeName: e2e-delete-node\n", 1)
	}
	objects := k.file("objects.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: e2e-delete-node\n---\n"+
		scheduled("force")+"---\n"+scheduled("graceful")+"---\n"+pod("x1", "")+"---\n"+pod("x2", "")+"---\n"+pod("y1", "")+"---\n"+
		pod("fin", "  finalizers: [e2e.corekube.dev/hold]\n"))
	k.expect(lines("node/e2e-delete-node created", "pod/force created", "pod/graceful created", "pod/x1 created", "pod/x2 created", "pod/y1 created", "pod/fin created"),
		"create", "-f", objects)

	// A pod on a node waits for its kubelet; --grace-period=0 --force does not.
	k.expectOut(`pod "force" force deleted`,
		"Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.",
		"delete", "pod", "force", "-n", "e2e-delete", "--grace-period=0", "--force")
	k.expectFail(`Error from server (NotFound): pods "force" not found`, "get", "pod", "force", "-n", "e2e-delete")

	// A graceful delete of a pod on a node leaves it terminating.
	k.expect(`pod "graceful" deleted`, "delete", "pod", "graceful", "-n", "e2e-delete", "--grace-period=45", "--wait=false")
	k.expect(lines(
		"NAME       READY   STATUS        RESTARTS   AGE",
		"graceful   0/1     Terminating   0          0s",
	), "get", "pod", "graceful", "-n", "e2e-delete")
	k.expect("45", "get", "pod", "graceful", "-n", "e2e-delete", "-o", "jsonpath={.metadata.deletionGracePeriodSeconds}")
	k.expectOut(`pod "graceful" force deleted`,
		"Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.",
		"delete", "pod", "graceful", "-n", "e2e-delete", "--grace-period=0", "--force")

	// --wait waits for the finalizer that another client removes.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, stdout, stderr := k.start(ctx, "delete", "pod", "fin", "-n", "e2e-delete", "--wait", "--timeout=50s")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	k.eventually("0", "get", "pod", "fin", "-n", "e2e-delete", "-o", "jsonpath={.metadata.deletionGracePeriodSeconds}")
	select {
	case err := <-done:
		t.Fatalf("kubectl delete --wait returned before the finalizer was removed: %v\n%s%s", err, stdout, stderr)
	default:
	}
	k.expect("pod/fin patched", "patch", "pod", "fin", "-n", "e2e-delete", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	if err := <-done; err != nil || stdout.String() != "pod \"fin\" deleted\n" || stderr.String() != "" {
		t.Errorf("kubectl delete --wait: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	k.expectFail(`Error from server (NotFound): pods "fin" not found`, "get", "pod", "fin", "-n", "e2e-delete")

	// By selector, then everything left.
	k.expect(lines(`pod "x1" deleted`, `pod "x2" deleted`), "delete", "pods", "-n", "e2e-delete", "-l", "group=x")
	k.expect(`pod "y1" deleted`, "delete", "pods", "-n", "e2e-delete", "--all")
	k.expect("No resources found", "delete", "pods", "-n", "e2e-delete", "--all")
	k.expectFail(`Error from server (NotFound): pods "nope" not found`, "delete", "pod", "nope", "-n", "e2e-delete")
	k.expect("", "delete", "pod", "nope", "-n", "e2e-delete", "--ignore-not-found")
	k.expect(`node "e2e-delete-node" deleted`, "delete", "node", "e2e-delete-node")

	// A deleted namespace is Terminating until the namespace controller has
	// emptied it.
	k.expect("pod/late created", "run", "late", "-n", "e2e-delete", "--image=busybox", "--restart=Never")
	k.expect(`namespace "e2e-delete" deleted`, "delete", "namespace", "e2e-delete", "--wait=false")
	k.expect("Terminating", "get", "namespace", "e2e-delete", "-o", "jsonpath={.status.phase}")
	k.expectFail(`Error from server (Forbidden): pods "later" is forbidden: unable to create new content in namespace e2e-delete because it is being terminated`,
		"run", "later", "-n", "e2e-delete", "--image=busybox", "--restart=Never")

	// delete -f on a file with a namespace and what is in it: kubectl
	// deletes the namespace, then each object, which is still there since
	// the namespace controller, like kube's, waits 5s before emptying a
	// namespace; then it waits until all are gone.
	app := k.file("app.yaml", `apiVersion: v1
kind: Namespace
metadata:
  name: e2e-delete-app
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: e2e-delete-app
spec:
  containers:
  - name: c
    image: busybox
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: e2e-delete-app
spec:
  minAvailable: 1
  selector: {}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: web
  namespace: e2e-delete-app
`)
	k.expect(lines(
		"namespace/e2e-delete-app created",
		"pod/web created",
		"poddisruptionbudget.policy/web created",
		"lease.coordination.k8s.io/web created",
	), "apply", "-f", app)
	k.expect(lines(
		`namespace "e2e-delete-app" deleted`,
		`pod "web" deleted`,
		`poddisruptionbudget.policy "web" deleted`,
		`lease.coordination.k8s.io "web" deleted`,
	), "delete", "-f", app, "--timeout=30s")
	k.expectFail(`Error from server (NotFound): namespaces "e2e-delete-app" not found`, "get", "namespace", "e2e-delete-app")
	k.eventually("", "get", "namespace", "e2e-delete", "--ignore-not-found", "-o", "name")
}

func testCreateGenerators(t *testing.T, k *kc) {
	k.expect("namespace/e2e-gen created", "create", "namespace", "e2e-gen")
	k.expect("Active", "get", "namespace", "e2e-gen", "-o", "jsonpath={.status.phase}")
	k.expect("poddisruptionbudget.policy/web created", "create", "poddisruptionbudget", "web", "-n", "e2e-gen", "--selector=app=web", "--min-available=1")
	k.expect(`{"minAvailable":1,"selector":{"matchLabels":{"app":"web"}}}`, "get", "pdb", "web", "-n", "e2e-gen", "-o", "jsonpath={.spec}")
	k.expect("poddisruptionbudget.policy/half created", "create", "pdb", "half", "-n", "e2e-gen", "--selector=app=web", "--max-unavailable=50%")
	k.expect(lines(
		"NAME   MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE",
		"half   N/A             50%               0                     0s",
		"web    1               N/A               0                     0s",
	), "get", "pdb", "-n", "e2e-gen")
	k.expectFail(`error: failed to create poddisruptionbudgets: poddisruptionbudgets.policy "web" already exists`,
		"create", "poddisruptionbudget", "web", "-n", "e2e-gen", "--selector=app=web", "--min-available=1")
	k.expectFail(`Error from server (AlreadyExists): namespaces "e2e-gen" already exists`, "create", "namespace", "e2e-gen")
	k.expect(lines(
		"NAME      STATUS   AGE",
		"e2e-gen   Active   0s",
	), "get", "namespace", "e2e-gen")
}

func testCordon(t *testing.T, k *kc) {
	k.expect("node/e2e-cordon created", "create", "-f", k.file("node.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: e2e-cordon\n"))
	k.expect("node/e2e-cordon cordoned", "cordon", "e2e-cordon")
	k.expect("true", "get", "node", "e2e-cordon", "-o", "jsonpath={.spec.unschedulable}")
	k.expect(lines(
		"NAME         STATUS                       ROLES    AGE   VERSION",
		"e2e-cordon   Unknown,SchedulingDisabled   <none>   0s    ",
	), "get", "nodes", "e2e-cordon")
	k.expect("node/e2e-cordon already cordoned", "cordon", "e2e-cordon")
	k.expect("node/e2e-cordon condition met", "wait", "--for=jsonpath={.spec.unschedulable}=true", "node/e2e-cordon", "--timeout=10s")
	k.expect("node/e2e-cordon uncordoned", "uncordon", "e2e-cordon")
	k.expect("", "get", "node", "e2e-cordon", "-o", "jsonpath={.spec.unschedulable}")
	k.expect(lines(
		"NAME         STATUS    ROLES    AGE   VERSION",
		"e2e-cordon   Unknown   <none>   0s    ",
	), "get", "nodes", "e2e-cordon")
	k.expect("node/e2e-cordon already uncordoned", "uncordon", "e2e-cordon")
	k.expect("node/e2e-cordon tainted", "taint", "node", "e2e-cordon", "dedicated=e2e:NoSchedule")
	k.expect(`[{"effect":"NoSchedule","key":"dedicated","value":"e2e"}]`, "get", "node", "e2e-cordon", "-o", "jsonpath={.spec.taints}")
	k.expect("node/e2e-cordon untainted", "taint", "node", "e2e-cordon", "dedicated-")
	k.expect("", "get", "node", "e2e-cordon", "-o", "jsonpath={.spec.taints}")
}

func testFieldValidation(t *testing.T, k *kc) {
	k.expect("namespace/e2e-fv created", "create", "namespace", "e2e-fv")
	manifest := k.file("unknown.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: unknown
  namespace: e2e-fv
spec:
  bogus: 1
  containers:
  - name: c
    image: busybox
    colour: blue
`)
	strictCreate := `Error from server (BadRequest): error when creating "` + manifest + `": Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.bogus", unknown field "spec.containers[0].colour"`
	k.expectFail(strictCreate, "create", "-f", manifest, "--validate=strict")
	k.expectFail(strictCreate, "apply", "-f", manifest) // strict is kubectl's default
	k.expectFail(`Error from server (NotFound): pods "unknown" not found`, "get", "pod", "unknown", "-n", "e2e-fv")
	k.expectOut("pod/unknown created", lines(`Warning: unknown field "spec.bogus"`, `Warning: unknown field "spec.containers[0].colour"`),
		"create", "-f", manifest, "--validate=warn")
	k.expect(`pod "unknown" deleted`, "delete", "-f", manifest)
	k.expect("pod/unknown created", "create", "-f", manifest, "--validate=false")
	k.expect(`pod "unknown" deleted`, "delete", "-f", manifest)

	// On an existing object apply patches: kube's 422 on the patch, which
	// kubectl prints with the patch as a Go map.
	k.expectOut("pod/unknown created", lines(`Warning: unknown field "spec.bogus"`, `Warning: unknown field "spec.containers[0].colour"`),
		"apply", "-f", manifest, "--validate=warn")
	k.expectFail(`The request is invalid: patch: Invalid value: "map[metadata:map[annotations:map[kubectl.kubernetes.io/last-applied-configuration:{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"name\":\"unknown\",\"namespace\":\"e2e-fv\"},\"spec\":{\"bogus\":2,\"containers\":[{\"colour\":\"blue\",\"image\":\"busybox\",\"name\":\"c\"}]}}\n]] spec:map[$setElementOrder/containers:[map[name:c]] bogus:2 containers:[map[colour:blue name:c]]]]": strict decoding error: unknown field "spec.bogus", unknown field "spec.containers[0].colour"`,
		"apply", "-f", k.file("unknown2.yaml", strings.Replace(readFile(t, manifest), "bogus: 1", "bogus: 2", 1)))
	k.expectOut("pod/unknown configured", lines(`Warning: unknown field "spec.bogus"`, `Warning: unknown field "spec.containers[0].colour"`),
		"apply", "-f", k.file("unknown3.yaml", strings.Replace(readFile(t, manifest), "bogus: 1", "bogus: 3", 1)), "--validate=warn")

	// Duplicate fields reach the server only in raw bodies.
	dup := k.file("dup.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dup","namespace":"e2e-fv"},"spec":{"containers":[{"name":"c","image":"a","image":"b"}]}}`)
	k.expectFail(`Error from server (BadRequest): Pod in version "v1" cannot be handled as a Pod: strict decoding error: duplicate field "spec.containers[0].image"`,
		"create", "--raw", "/api/v1/namespaces/e2e-fv/pods?fieldValidation=Strict", "-f", dup)
	stdout, stderr, err := k.run("create", "--raw", "/api/v1/namespaces/e2e-fv/pods", "-f", dup)
	if err != nil || stderr != `Warning: duplicate field "spec.containers[0].image"` || !strings.Contains(stdout, `"image":"b"`) {
		t.Errorf("kubectl create --raw with a duplicate field: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
}

func testErrors(t *testing.T, k *kc) {
	k.expect("namespace/e2e-errors created", "create", "namespace", "e2e-errors")
	k.expectFail(`Error from server (NotFound): pods "nope" not found`, "get", "pod", "nope", "-n", "e2e-errors")
	k.expectFail(lines(`Error from server (NotFound): pods "nope1" not found`, `Error from server (NotFound): pods "nope2" not found`),
		"get", "pods", "nope1", "nope2", "-n", "e2e-errors")
	k.expectFail(`Error from server (NotFound): nodes "e2e-nope" not found`, "get", "node", "e2e-nope")
	k.expectFail(`Error from server (NotFound): poddisruptionbudgets.policy "nope" not found`, "get", "pdb", "nope", "-n", "e2e-errors")
	k.expectFail(`Error from server (NotFound): leases.coordination.k8s.io "nope" not found`, "get", "lease", "nope", "-n", "e2e-errors")
	// kubectl v1.32 names the missing namespace when a get there fails.
	k.expectFail(`Error from server (NotFound): namespaces "e2e-nowhere" not found`, "get", "pod", "nope", "-n", "e2e-nowhere")
	k.expectOut("", "No resources found in e2e-nowhere namespace.", "get", "pods", "-n", "e2e-nowhere")
	k.expectFail(`error: the server doesn't have a resource type "foos"`, "get", "foos")
	k.expectFail(`Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label selector "a in (b", field selector "": unable to parse requirement: found '', expected: ',' or ')'`,
		"get", "pods", "-n", "e2e-errors", "-l", "a in (b")

	pod := func(name, spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: e2e-errors\nspec:\n" + spec
	}
	dup := k.file("dup.yaml", pod("dup", "  containers:\n  - name: c\n    image: busybox\n"))
	k.expect("pod/dup created", "create", "-f", dup)
	k.expectFail(`Error from server (AlreadyExists): error when creating "`+dup+`": pods "dup" already exists`, "create", "-f", dup)
	k.expectFail(`Error from server (AlreadyExists): pods "dup" already exists`, "run", "dup", "-n", "e2e-errors", "--image=busybox", "--restart=Never")

	k.expectFail(`The Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		"create", "-f", k.file("bad-name.yaml", pod("Bad_Name", "  containers:\n  - name: c\n    image: busybox\n")))
	k.expectFail(`The Pod "empty" is invalid: spec.containers: Required value`,
		"create", "-f", k.file("empty.yaml", pod("empty", "  containers: []\n")))
	k.expectFail(lines(
		`The Pod "multi" is invalid: `,
		`* spec.containers[0].image: Required value`,
		`* spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
	), "apply", "-f", k.file("multi.yaml", pod("multi", "  restartPolicy: Sometimes\n  containers:\n  - name: c\n")))
	pdb := func(name, spec string) string {
		return "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: " + name + "\n  namespace: e2e-errors\nspec:\n  selector: {matchLabels: {app: x}}\n" + spec
	}
	k.expectFail(`The PodDisruptionBudget "negative" is invalid: spec.minAvailable: Invalid value: -1: must be greater than or equal to 0`,
		"create", "-f", k.file("negative.yaml", pdb("negative", "  minAvailable: -1\n")))
	k.expectFail(`The PodDisruptionBudget "toomuch" is invalid: spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: must not be greater than 100%`,
		"create", "-f", k.file("toomuch.yaml", pdb("toomuch", "  maxUnavailable: 150%\n")))
	missing := k.file("missing-ns.yaml", strings.Replace(pod("m", "  containers:\n  - name: c\n    image: busybox\n"), "e2e-errors", "e2e-nowhere", 1))
	k.expectFail(`Error from server (NotFound): error when creating "`+missing+`": namespaces "e2e-nowhere" not found`, "create", "-f", missing)
	k.expectFail(`Error from server (NotFound): pods "nope" not found`, "delete", "pod", "nope", "-n", "e2e-errors")
	k.expectFail(`Error from server (NotFound): pods "nope" not found`, "label", "pod", "nope", "-n", "e2e-errors", "a=b")
}
