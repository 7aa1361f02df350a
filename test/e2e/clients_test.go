package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/corekube/corekube/auth/pki"
)

// TestOfficialClients drives one `corekube up` with clients that are not
// ours: the official JavaScript client (@kubernetes/client-node), the
// official Python client (kubernetes), and a client generated from
// corekube's own OpenAPI document used through `kubectl proxy`. The first
// two load the kubeconfig `up` wrote as it is, so they verify the cluster
// CA and present the admin's client certificate; a copy naming another CA
// must be refused. The scripts live in clients/; `make test-deps` installs
// what they need (npm ci, Debian's python3-kubernetes). A missing one
// skips loudly, or fails with COREKUBE_REQUIRE_CLIENTS=1 (CI).
func TestOfficialClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts corekube and Node.js, Python and kubectl processes")
	}
	p := startUp(t, t.TempDir())
	kubeconfig := filepath.Join(p.dataDir, "kubeconfig")
	checkKubeconfigAsWritten(t, kubeconfig)
	wrongCA := kubeconfigWithOtherCA(t, kubeconfig)

	t.Run("client-node", func(t *testing.T) {
		t.Parallel()
		node := nodePath(t)
		dir := clientDir(t, "node", "@kubernetes/client-node")
		script := filepath.Join(dir, "client.mjs")
		testOfficialClient(t, p, kubeconfig, wrongCA, "node-pod", node, script)
	})
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		python := pythonWithKubernetes(t)
		script, err := filepath.Abs(filepath.Join("clients", "python", "client.py"))
		if err != nil {
			t.Fatal(err)
		}
		testOfficialClient(t, p, kubeconfig, wrongCA, "python-pod", python, script)
	})
	t.Run("generated-sdk-kubectl-proxy", func(t *testing.T) {
		t.Parallel()
		testGeneratedSDK(t, p)
	})
}

// clientResult is what clients/node/client.mjs and clients/python/client.py
// print.
type clientResult struct {
	Server     string   `json:"server"`
	Namespaces []string `json:"namespaces"`
	Created    struct{ Name, UID string }
	Read       struct{ Name, UID, Image string }
	Watched    struct{ Type, Name, UID string }
	Deleted    struct{ Kind, Name string }
}

// testOfficialClient runs `interpreter script KUBECONFIG default POD` and
// checks every step it reports against what the server holds; then the
// same script with a kubeconfig trusting another CA, which must fail.
func testOfficialClient(t *testing.T, p *process, kubeconfig, wrongCA, pod, interpreter, script string) {
	out := runClient(t, interpreter, script, kubeconfig, "default", pod)
	var r clientResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client output is not its JSON: %v\n%s", err, out)
	}
	if r.Server != p.url {
		t.Errorf("client talked to %q, want %q", r.Server, p.url)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !slices.Contains(r.Namespaces, ns) {
			t.Errorf("listed namespaces %v lack %q", r.Namespaces, ns)
		}
	}
	if r.Created.Name != pod || r.Created.UID == "" {
		t.Errorf("created %+v, want pod %q with a uid", r.Created, pod)
	}
	if r.Read.Name != pod || r.Read.UID != r.Created.UID || r.Read.Image != "busybox:1.36" {
		t.Errorf("read %+v, want the created pod %+v with image busybox:1.36", r.Read, r.Created)
	}
	if r.Watched.Type != "ADDED" || r.Watched.Name != pod || r.Watched.UID != r.Created.UID {
		t.Errorf("watch event %+v, want ADDED of the created pod %+v", r.Watched, r.Created)
	}
	if r.Deleted.Kind != "Pod" || r.Deleted.Name != pod {
		t.Errorf("delete answered %+v, want the Pod %q", r.Deleted, pod)
	}
	// A pod on no node goes at once, as in kube.
	if code := p.getStatus(t, "/api/v1/namespaces/default/pods/"+pod); code != http.StatusNotFound {
		t.Errorf("GET of the deleted pod: %d, want 404", code)
	}

	// The client really verifies the server against the kubeconfig's CA.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, script, wrongCA, "default", pod+"-wrong-ca")
	cmd.WaitDelay = 5 * time.Second
	combined, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the client trusted a server whose certificate another CA signed:\n%s", combined)
	}
	if !regexp.MustCompile(`(?i)certificate|ssl|self.signed`).Match(combined) {
		t.Errorf("with another CA the client failed, but not on the certificate:\n%s", combined)
	}
}

// sdkResult is what clients/openapi/sdk.mjs prints.
type sdkResult struct {
	ListKind string   `json:"listKind"`
	After    []string `json:"after"`
	Created  struct{ Name, UID string }
	Read     struct{ Name, UID, Image string }
	Deleted  struct{ Kind, Name string }
}

// testGeneratedSDK fetches /openapi/v2 through `kubectl proxy`, generates a
// JavaScript client from it with swagger-typescript-api, and lists,
// creates, reads and deletes a pod with that client through the proxy.
func testGeneratedSDK(t *testing.T, p *process) {
	node := nodePath(t)
	dir := clientDir(t, "openapi", "swagger-typescript-api")
	proxy := p.kubectlProxy(t)

	resp, err := http.Get(proxy + "/openapi/v2")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v2 through kubectl proxy: %d %v\n%.500s", resp.StatusCode, err, spec)
	}
	var head struct{ Swagger string }
	if err := json.Unmarshal(spec, &head); err != nil || head.Swagger != "2.0" {
		t.Fatalf("/openapi/v2 through kubectl proxy is not a Swagger 2.0 document (%v): %.200s", err, spec)
	}
	work := t.TempDir()
	specFile := filepath.Join(work, "openapi-v2.json")
	if err := os.WriteFile(specFile, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(work, "sdk")
	start := time.Now()
	// One module per API group version path segment (api.v1, api.policy,
	// ...): with every path kube documents (its deprecated /watch/ ones
	// too) a single module's inferred type grows past what TypeScript
	// will write to the .d.ts the generator needs for --js.
	runClient(t, filepath.Join(dir, "node_modules", ".bin", "swagger-typescript-api"),
		"generate", "--path", specFile, "--output", gen, "--name", "api.js", "--js", "--silent", "--module-name-index", "1")
	t.Logf("client generated in %v", time.Since(start))
	api := filepath.Join(gen, "api.js")
	src, err := os.ReadFile(api)
	if err != nil {
		t.Fatalf("the generator wrote no client: %v", err)
	}
	for _, method := range []string{"listCoreV1NamespacedPod", "createCoreV1NamespacedPod", "readCoreV1NamespacedPod", "deleteCoreV1NamespacedPod"} {
		if !bytes.Contains(src, []byte(method+":")) {
			t.Errorf("the generated client has no %s", method)
		}
	}
	// The generated module is ESM; tell Node so.
	if err := os.WriteFile(filepath.Join(gen, "package.json"), []byte(`{"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	const pod = "generated-pod"
	out := runClient(t, node, filepath.Join(dir, "sdk.mjs"), api, proxy, "default", pod)
	var r sdkResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("sdk.mjs output is not its JSON: %v\n%s", err, out)
	}
	if r.ListKind != "PodList" {
		t.Errorf("list answered kind %q, want PodList", r.ListKind)
	}
	if r.Created.Name != pod || r.Created.UID == "" {
		t.Errorf("created %+v, want pod %q with a uid", r.Created, pod)
	}
	if r.Read.Name != pod || r.Read.UID != r.Created.UID || r.Read.Image != "busybox:1.36" {
		t.Errorf("read %+v, want the created pod %+v with image busybox:1.36", r.Read, r.Created)
	}
	if !slices.Equal(r.After, []string{pod}) {
		t.Errorf("list by label after create: %v, want [%s]", r.After, pod)
	}
	if r.Deleted.Kind != "Pod" || r.Deleted.Name != pod {
		t.Errorf("delete answered %+v, want the Pod %q", r.Deleted, pod)
	}
	if code := p.getStatus(t, "/api/v1/namespaces/default/pods/"+pod); code != http.StatusNotFound {
		t.Errorf("GET of the deleted pod: %d, want 404", code)
	}
}

// runClient runs a client program, which must succeed; it returns stdout.
func runClient(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// getStatus GETs path with the admin's credentials and returns the status.
func (p *process) getStatus(t *testing.T, path string) int {
	t.Helper()
	resp, err := p.http.Get(p.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// kubectlProxy starts `kubectl proxy --port=0` and returns its URL, read
// from the line it prints when it serves.
func (p *process) kubectlProxy(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kubectlPath(t), append(p.kubectlFlags(), "proxy", "--port=0")...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`Starting to serve on (\S+:\d+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- "http://" + m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // keep the pipe drained
		close(found)
	}()
	select {
	case url, ok := <-found:
		if !ok {
			t.Fatalf("kubectl proxy exited without serving:\n%s", stderr.String())
		}
		return url
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl proxy not serving after 30s:\n%s", stderr.String())
		return ""
	}
}

// checkKubeconfigAsWritten fails unless the kubeconfig `up` wrote carries
// the cluster CA and a client certificate and does not skip verification:
// the premise of "the clients load it as it is".
func checkKubeconfigAsWritten(t *testing.T, path string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "https://") || cfg.Insecure || len(cfg.CAData) == 0 || len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 {
		t.Fatalf("kubeconfig: host %q, insecure %v, CA %d bytes, client certificate %d bytes, key %d bytes; want HTTPS verified by its CA with a client certificate",
			cfg.Host, cfg.Insecure, len(cfg.CAData), len(cfg.CertData), len(cfg.KeyData))
	}
}

// kubeconfigWithOtherCA writes a copy of the kubeconfig at path whose
// cluster trusts a CA that did not sign the server's certificate.
func kubeconfigWithOtherCA(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("not-the-cluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range cfg.Clusters {
		cluster.CertificateAuthority = ""
		cluster.CertificateAuthorityData = other.PEM
	}
	out := filepath.Join(t.TempDir(), "kubeconfig-other-ca")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireClients skips the test loudly on a developer's machine, or fails
// it in CI (COREKUBE_REQUIRE_CLIENTS=1), when a client is not installed.
func requireClients(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + ": this client compatibility test did NOT run (`make test-deps` installs it)"
	if os.Getenv("COREKUBE_REQUIRE_CLIENTS") != "" {
		t.Fatal(msg)
	}
	t.Skip("WARNING: " + msg)
}

// nodePath finds Node.js and logs its version.
func nodePath(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		requireClients(t, "node is not on PATH")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		requireClients(t, "node --version: %v", err)
	}
	t.Logf("Node.js %s", strings.TrimSpace(string(out)))
	return node
}

// clientDir is the absolute path of clients/<name>, whose node_modules
// must hold pkg (installed by npm ci from the committed package-lock.json);
// it logs the installed version.
func clientDir(t *testing.T, name, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("clients", name))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
	if err != nil {
		requireClients(t, "%s is not installed in %s (npm ci)", pkg, dir)
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s's package.json: %v", pkg, err)
	}
	t.Logf("%s %s", pkg, meta.Version)
	return dir
}

// systemPython is Debian's interpreter, where apt installs
// python3-kubernetes (a pyenv python on PATH would not see it).
const systemPython = "/usr/bin/python3"

// pythonWithKubernetes returns systemPython once it imports the official
// client, and logs the client's version.
func pythonWithKubernetes(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(systemPython, "-c", "import kubernetes; print(kubernetes.__version__)").CombinedOutput()
	if err != nil {
		requireClients(t, "%s cannot import kubernetes (Debian package python3-kubernetes): %v\n%s", systemPython, err, out)
	}
	t.Logf("Python client kubernetes %s", strings.TrimSpace(string(out)))
	return systemPython
}
