package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// asToken runs kubectl against p with a kubeconfig that carries token
// alone (the cluster, and its CA, from p's kubeconfig): the process's
// admin credentials must not be what authenticates.
func (p *process) asToken(token string, args ...string) (string, error) {
	p.t.Helper()
	cfg, err := clientcmd.LoadFromFile(filepath.Join(p.dataDir, "kubeconfig"))
	if err != nil {
		p.t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"sa": {Token: token}}
	ctx.AuthInfo = "sa"
	path := filepath.Join(p.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		p.t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := exec.CommandContext(c, kubectlPath(p.t), append([]string{"--kubeconfig", path, "--cache-dir", p.cacheDir}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// whoamiRows parses `kubectl auth whoami` into attribute -> value.
func whoamiRows(out string) map[string]string {
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if fields[0] == "Extra:" && len(fields) >= 3 {
			rows["Extra: "+fields[1]] = strings.Join(fields[2:], " ")
			continue
		}
		rows[fields[0]] = strings.Join(fields[1:], " ")
	}
	return rows
}

// TestServiceAccountTokensWithKubectl: `kubectl create sa`, `kubectl
// create token` (plain, with --duration, bound to a pod), `kubectl auth
// whoami` and a request with the token, as a user would; a pod-bound token
// dies with its pod, and tokens survive a restart of `up` (the signing key
// is kept in <data-dir>/pki/sa.key).
func TestServiceAccountTokensWithKubectl(t *testing.T) {
	kubectlPath(t)
	dataDir := t.TempDir()
	p := startUp(t, dataDir)
	fi, err := os.Stat(filepath.Join(dataDir, "pki", "sa.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key: %v %v", fi, err)
	}

	p.mustKubectl("create", "serviceaccount", "robot")
	token := p.mustKubectl("create", "token", "robot", "--duration", "20m")
	out, err := p.asToken(token, "auth", "whoami")
	if err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "ATTRIBUTE") {
		t.Errorf("kubectl auth whoami printed\n%s", out)
	}
	rows := whoamiRows(out)
	if rows["Username"] != "system:serviceaccount:default:robot" ||
		rows["Groups"] != "[system:serviceaccounts system:serviceaccounts:default system:authenticated]" ||
		!strings.HasPrefix(rows["Extra: authentication.kubernetes.io/credential-id"], "[JTI=") {
		t.Errorf("kubectl auth whoami printed\n%s", out)
	}
	uid := p.mustKubectl("get", "serviceaccount", "robot", "-o", "jsonpath={.metadata.uid}")
	if rows["UID"] != uid {
		t.Errorf("whoami UID %q, the ServiceAccount's is %q", rows["UID"], uid)
	}
	// RBAC: the ServiceAccount may do nothing until bound to a role.
	if out, err := p.asToken(token, "get", "serviceaccount", "robot", "-o", "name"); err == nil ||
		!strings.Contains(out, `serviceaccounts "robot" is forbidden: User "system:serviceaccount:default:robot" cannot get resource "serviceaccounts" in API group "" in the namespace "default"`) {
		t.Errorf("kubectl get with the token before a binding: %v %s", err, out)
	}
	p.mustKubectl("create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=default:robot")
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := p.asToken(token, "get", "serviceaccount", "robot", "-o", "name")
		if err == nil && out == "serviceaccount/robot" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl get with the token once bound to view: %v %s", err, out)
		}
		time.Sleep(100 * time.Millisecond) // polling an external process
	}
	if out, err := p.asToken(token+"x", "get", "serviceaccount", "robot"); err == nil || !strings.Contains(out, "Unauthorized") {
		t.Errorf("kubectl with a tampered token: %v %s", err, out)
	}

	podFile := filepath.Join(t.TempDir(), "pod.yaml")
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  serviceAccountName: robot\n  containers:\n  - name: c\n    image: busybox\n"
	if err := os.WriteFile(podFile, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	p.mustKubectl("create", "-f", podFile)
	bound := p.mustKubectl("create", "token", "robot", "--bound-object-kind", "Pod", "--bound-object-name", "web")
	out, err = p.asToken(bound, "auth", "whoami")
	podUID := p.mustKubectl("get", "pod", "web", "-o", "jsonpath={.metadata.uid}")
	if rows := whoamiRows(out); err != nil || rows["Extra: authentication.kubernetes.io/pod-name"] != "[web]" || rows["Extra: authentication.kubernetes.io/pod-uid"] != "["+podUID+"]" {
		t.Errorf("kubectl auth whoami with the pod's token: %v\n%s", err, out)
	}
	p.mustKubectl("delete", "pod", "web", "--grace-period=0", "--force")
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := p.asToken(bound, "auth", "whoami")
		if err != nil && strings.Contains(out, "Unauthorized") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted pod's token still works: %s", out)
		}
		time.Sleep(100 * time.Millisecond) // polling an external process
	}

	p.stop()
	p2 := startUp(t, dataDir)
	if out, err := p2.asToken(token, "auth", "whoami"); err != nil || whoamiRows(out)["Username"] != "system:serviceaccount:default:robot" {
		t.Errorf("the token after a restart: %v\n%s", err, out)
	}
	p2.stop()
}
