package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubectlFlowControl: `corekube up` with kube's APF flags serves the
// bootstrap FlowSchemas and PriorityLevelConfigurations as kubectl shows
// kube's (columns, rows, explain), and answers name the schema and level
// a request went through.
func TestKubectlFlowControl(t *testing.T) {
	kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--max-requests-inflight", "20", "--max-mutating-requests-inflight", "10")
	age := regexp.MustCompile(`^[0-9]+s$`)
	// Columns joined by one space, ages (a few seconds) as AGE.
	norm := func(s string) string {
		f := strings.Fields(s)
		for i := range f {
			f[i] = age.ReplaceAllString(f[i], "AGE")
		}
		return strings.Join(f, " ")
	}
	lines := func(args ...string) []string {
		var out []string
		for _, l := range strings.Split(p.mustKubectl(args...), "\n") {
			out = append(out, norm(l))
		}
		return out
	}
	// kube v1.32's rows (ages aside), sorted by name as kubectl lists them.
	wantFS := []string{
		"NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL",
		"catch-all catch-all 10000 ByUser AGE False",
		"endpoint-controller workload-high 150 ByUser AGE False",
		"exempt exempt 1 <none> AGE False",
		"global-default global-default 9900 ByUser AGE False",
		"kube-controller-manager workload-high 800 ByNamespace AGE False",
		"kube-scheduler workload-high 800 ByNamespace AGE False",
		"kube-system-service-accounts workload-high 900 ByNamespace AGE False",
		"probes exempt 2 <none> AGE False",
		"service-accounts workload-low 9000 ByUser AGE False",
		"system-leader-election leader-election 100 ByUser AGE False",
		"system-node-high node-high 400 ByUser AGE False",
		"system-nodes system 500 ByUser AGE False",
		"workload-leader-election leader-election 200 ByUser AGE False",
	}
	wantPL := []string{
		"NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE",
		"catch-all Limited 5 <none> <none> <none> AGE",
		"exempt Exempt <none> <none> <none> <none> AGE",
		"global-default Limited 20 128 6 50 AGE",
		"leader-election Limited 10 16 4 50 AGE",
		"node-high Limited 40 64 6 50 AGE",
		"system Limited 30 64 6 50 AGE",
		"workload-high Limited 40 128 6 50 AGE",
		"workload-low Limited 100 128 6 50 AGE",
	}
	// The Dangling conditions (MISSINGPL) come just after the objects:
	// poll (each kubectl run takes a while) up to a deadline.
	var got []string
	ok := false
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); {
		got = lines("get", "flowschemas")
		ok = strings.Join(got, "\n") == strings.Join(wantFS, "\n")
	}
	if !ok {
		t.Errorf("kubectl get flowschemas:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantFS, "\n"))
	}
	if got := lines("get", "prioritylevelconfigurations"); strings.Join(got, "\n") != strings.Join(wantPL, "\n") {
		t.Errorf("kubectl get prioritylevelconfigurations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantPL, "\n"))
	}
	if out := p.mustKubectl("explain", "prioritylevelconfiguration.spec.limited"); !strings.Contains(out, "nominalConcurrencyShares") {
		t.Errorf("kubectl explain:\n%s", out)
	}
	uid := p.mustKubectl("get", "flowschema", "exempt", "-o", "jsonpath={.metadata.uid}")
	out, err := p.kubectl("get", "--raw", "/api/v1/namespaces/default", "-v8")
	if err != nil || !strings.Contains(out, "X-Kubernetes-Pf-Flowschema-Uid: "+uid) || !strings.Contains(out, "X-Kubernetes-Pf-Prioritylevel-Uid: ") {
		t.Errorf("the admin's answer does not name the exempt schema %s: %v\n%s", uid, err, out)
	}
}
