// Package e2e drives a real corekube process (built from this tree) with
// the real kubectl and HTTPS requests with the admin kubeconfig's
// credentials, the way a user would.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	"github.com/corekube/corekube/test/testserver"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// binary is the corekube binary built once for the package.
var binary string

func TestMain(m *testing.M) {
	if testserver.ShortMain("test/e2e") {
		os.Exit(0) // nothing built, nothing started
	}
	dir, err := os.MkdirTemp("", "corekube-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "corekube")
	// The flags of `make build` and deploy/Dockerfile, so that all three
	// builds share one compile in Go's cache.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", binary, "github.com/corekube/corekube/cmd/corekube")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build corekube:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kubectlPath finds kubectl. A missing kubectl skips the test loudly on a
// developer's machine and fails it in CI (COREKUBE_REQUIRE_KUBECTL=1).
func kubectlPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		msg := "kubectl is not on PATH: the end-to-end kubectl tests did NOT run"
		if os.Getenv("COREKUBE_REQUIRE_KUBECTL") != "" {
			t.Fatal(msg)
		}
		t.Skip("WARNING: " + msg)
	}
	return path
}

// process is a running `corekube up` (or another serving subcommand,
// startProcess).
type process struct {
	t        *testing.T
	cmd      *exec.Cmd
	args     []string // the command line, for a restart
	dataDir  string
	cacheDir string // kubectl's discovery and OpenAPI cache, kept out of $HOME
	url      string
	// http is a client with the kubeconfig's credentials (the admin's
	// client certificate, trusting the cluster CA).
	http   *http.Client
	logs   *bytes.Buffer
	exited chan error
}

// startUp runs `corekube up` on dataDir and waits until /readyz says ok.
func startUp(t *testing.T, dataDir string) *process {
	t.Helper()
	return startUpAt(t, dataDir, freeAddr(t))
}

// startUpAt is startUp listening on addr. Without args, `up` runs no node
// agents (tests create the nodes they print); args are more flags.
func startUpAt(t *testing.T, dataDir, addr string, args ...string) *process {
	t.Helper()
	return startProcess(t, dataDir, addr, append([]string{"up", "--data-dir", dataDir, "--listen", addr, "--nodes", "0"}, args...)...)
}

// startProcess runs corekube with args, which make it serve on addr and
// write its admin kubeconfig to dataDir/kubeconfig, and waits until
// /readyz says ok.
func startProcess(t *testing.T, dataDir, addr string, args ...string) *process {
	t.Helper()
	p := &process{t: t, args: args, dataDir: dataDir, cacheDir: t.TempDir(), url: "https://" + addr, logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("corekube output:\n%s", p.logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.http == nil {
			p.http, _ = kubeconfigHTTPClient(filepath.Join(dataDir, "kubeconfig"))
		}
		var resp *http.Response
		err := errNoKubeconfig
		if p.http != nil {
			resp, err = p.http.Get(p.url + "/readyz")
		}
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(body) == "ok" {
				break
			}
		}
		select {
		case err := <-p.exited:
			t.Fatalf("corekube exited before it was ready: %v\n%s", err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("corekube not ready after 20s:\n%s", p.logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling an external process's readiness
	}
	t.Logf("corekube ready in %v", time.Since(start))
	return p
}

// stop sends SIGTERM and expects a clean exit.
func (p *process) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			p.t.Fatalf("corekube did not exit cleanly on SIGTERM: %v\n%s", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		p.t.Fatalf("corekube did not exit within 20s of SIGTERM\n%s", p.logs.String())
	}
}

// kill sends SIGKILL, waits for the process to die, and starts a new one
// on the same data directory and the same address.
func (p *process) kill() *process {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.t.Fatalf("corekube still running 20s after SIGKILL")
	}
	return startProcess(p.t, p.dataDir, strings.TrimPrefix(p.url, "https://"), p.args...)
}

var errNoKubeconfig = errors.New("no kubeconfig yet")

// kubeconfigHTTPClient is an HTTP client with the credentials of the
// kubeconfig at path (as kubectl would use them).
func kubeconfigHTTPClient(path string) (*http.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	return rest.HTTPClientFor(cfg)
}

// kubeletHTTPClient is a client for the agents' kubelet APIs with the
// kubeconfig's client certificate (the admin's) that, as kube-apiserver
// without --kubelet-certificate-authority, does not verify their
// self-signed serving certificates.
func kubeletHTTPClient(path string) (*http.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.Insecure, cfg.CAData, cfg.CAFile = true, nil, ""
	return rest.HTTPClientFor(cfg)
}

// kubectl runs kubectl against the process's kubeconfig.
func (p *process) kubectl(args ...string) (string, error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath(p.t), append(p.kubectlFlags(), args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// kubectlFlags are the flags every kubectl run against the process gets.
func (p *process) kubectlFlags() []string {
	return []string{"--kubeconfig", filepath.Join(p.dataDir, "kubeconfig"), "--cache-dir", p.cacheDir}
}

// kubectlVersion finds kubectl.<version> (kubectl.1.27, ...), which the
// Cloud SDK keeps beside the binary PATH's kubectl resolves to, or on PATH.
// Like kubectlPath, a missing one skips loudly, or fails in CI.
func kubectlVersion(t *testing.T, version string) string {
	t.Helper()
	name := "kubectl." + version
	if target, err := filepath.EvalSymlinks(kubectlPath(t)); err == nil {
		path := filepath.Join(filepath.Dir(target), name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		msg := name + " is neither beside kubectl nor on PATH: the version-skew tests for it did NOT run"
		if os.Getenv("COREKUBE_REQUIRE_KUBECTL") != "" {
			t.Fatal(msg)
		}
		t.Skip("WARNING: " + msg)
	}
	return path
}

// mustKubectl runs kubectl and fails the test on error.
func (p *process) mustKubectl(args ...string) string {
	p.t.Helper()
	out, err := p.kubectl(args...)
	if err != nil {
		p.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// freeAddr is a loopback address with a port free at the moment.
func freeAddr(t *testing.T) string { return etcdcluster.FreeAddr(t) }
