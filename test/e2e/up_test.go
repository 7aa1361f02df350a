package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/clientcmd"
)

// TestUpKubectlAndRestart: `corekube up` becomes ready, writes a kubeconfig
// kubectl uses, serves the system namespaces, keeps data across a SIGTERM
// and a restart on the same data dir. The first run stores JSON (as a
// corekube before protobuf storage did) and compresses pods, the second
// the default, kube's protobuf, uncompressed: what the first wrote is
// served, and rewritten at its next write.
func TestUpKubectlAndRestart(t *testing.T) {
	kubectlPath(t)
	dataDir := t.TempDir()
	p := startUpAt(t, dataDir, freeAddr(t), "--storage-media-type", "application/json", "--storage-compression", "deflate")
	if _, err := os.Stat(filepath.Join(dataDir, "kubeconfig")); err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}
	// TLS on by default: the kubeconfig carries the CA and a client
	// certificate; the keys are the owner's alone.
	kc, err := clientcmd.LoadFromFile(filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		if !strings.HasPrefix(c.Server, "https://") || len(c.CertificateAuthorityData) == 0 || c.InsecureSkipTLSVerify {
			t.Errorf("kubeconfig cluster: server %s, CA %d bytes, insecure %v", c.Server, len(c.CertificateAuthorityData), c.InsecureSkipTLSVerify)
		}
	}
	for _, a := range kc.AuthInfos {
		if len(a.ClientCertificateData) == 0 || len(a.ClientKeyData) == 0 {
			t.Error("kubeconfig user has no client certificate")
		}
	}
	pki := func() map[string]string {
		files := map[string]string{}
		for _, name := range []string{"ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "sa.key"} {
			path := filepath.Join(dataDir, "pki", name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(path); strings.HasSuffix(name, ".key") && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
			}
			files[name] = string(data)
		}
		return files
	}
	firstPKI := pki()

	out := p.mustKubectl("get", "namespaces", "-o", "name")
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !strings.Contains(out, "namespace/"+ns) {
			t.Errorf("kubectl get namespaces: missing %s in\n%s", ns, out)
		}
	}
	p.mustKubectl("create", "namespace", "e2e")
	p.mustKubectl("label", "namespace", "e2e", "team=core")
	if got := p.mustKubectl("get", "namespace", "-l", "team=core", "-o", "jsonpath={.items[*].metadata.name}"); got != "e2e" {
		t.Errorf("label selector: got %q, want e2e", got)
	}
	if out, err := p.kubectl("get", "pod", "nope", "-n", "e2e"); err == nil || !strings.Contains(out, `pods "nope" not found`) {
		t.Errorf("kubectl get missing pod: err=%v out=%s", err, out)
	}

	resp, err := p.http.Get(p.url + "/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"gitVersion": "v1.32`) && !strings.Contains(string(body), `"gitVersion":"v1.32`) {
		t.Errorf("/version: %s", body)
	}

	if v := storedValue(t, dataDir, "/registry/namespaces/e2e"); !strings.HasPrefix(string(v), `{"kind":"Namespace"`) {
		t.Errorf("--storage-media-type application/json stored %q", v[:min(len(v), 20)])
	}
	p.mustKubectl("run", "zipped", "-n", "e2e", "--image", "nginx:1.27", "--labels", "app=zipped")
	if v := storedValue(t, dataDir, "/registry/pods/e2e/zipped"); !strings.HasPrefix(string(v), "corekube:z:pods1:") {
		t.Errorf("--storage-compression deflate stored a pod as %q", v[:min(len(v), 20)])
	}
	const podFields = "jsonpath={.metadata.uid} {.metadata.labels.app} {.spec.containers[0].image}"
	zipped := p.mustKubectl("get", "pod", "zipped", "-n", "e2e", "-o", podFields)
	if !strings.HasSuffix(zipped, " zipped nginx:1.27") {
		t.Errorf("compressed pod reads back as %q", zipped)
	}

	// The built-in PriorityClasses are written once: a restart finds them.
	builtinUID := p.mustKubectl("get", "pc", "system-node-critical", "-o", "jsonpath={.metadata.uid}")
	p.mustKubectl("create", "priorityclass", "e2e-high", "--value=10")

	p.stop()
	p2 := startUp(t, dataDir)
	if got := p2.mustKubectl("get", "pc", "system-node-critical", "-o", "jsonpath={.metadata.uid}"); builtinUID == "" || got != builtinUID {
		t.Errorf("system-node-critical uid %q after restart, was %q", got, builtinUID)
	}
	if got := p2.mustKubectl("get", "pc", "e2e-high", "-o", "jsonpath={.value}"); got != "10" {
		t.Errorf("after restart: e2e-high value %q, want 10", got)
	}
	for name, data := range pki() {
		if data != firstPKI[name] {
			t.Errorf("pki/%s changed across a restart", name)
		}
	}
	if got := p2.mustKubectl("get", "namespace", "e2e", "-o", "jsonpath={.metadata.labels.team}"); got != "core" {
		t.Errorf("after restart: label team = %q, want core", got)
	}
	if got := p2.mustKubectl("get", "pods", "-n", "e2e", "-l", "app=zipped", "-o", "jsonpath={.items[*].metadata.name}"); got != "zipped" {
		t.Errorf("after restart without compression: pods labelled app=zipped %q, want zipped", got)
	}
	if got := p2.mustKubectl("get", "pod", "zipped", "-n", "e2e", "-o", podFields); got != zipped {
		t.Errorf("after restart without compression the pod reads %q, was %q", got, zipped)
	}
	p2.mustKubectl("label", "pod", "zipped", "-n", "e2e", "rewritten=yes")
	if v := storedValue(t, dataDir, "/registry/pods/e2e/zipped"); !strings.HasPrefix(string(v), "k8s\x00") {
		t.Errorf("a pod written again without compression, stored %q", v[:min(len(v), 20)])
	}
	p2.mustKubectl("label", "namespace", "e2e", "team=platform", "--overwrite")
	if v := storedValue(t, dataDir, "/registry/namespaces/e2e"); !strings.HasPrefix(string(v), "k8s\x00") {
		t.Errorf("written again by the default media type, stored %q", v[:min(len(v), 20)])
	}
	if got := p2.mustKubectl("get", "namespace", "-l", "team=platform", "-o", "jsonpath={.items[*].metadata.name}"); got != "e2e" {
		t.Errorf("label selector after the rewrite: got %q, want e2e", got)
	}
	p2.mustKubectl("delete", "namespace", "e2e", "--wait=true", "--timeout=30s")
	if out, err := p2.kubectl("get", "namespace", "e2e"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("namespace e2e still there after delete --wait: %s", out)
	}
	p2.stop()
}

// storedValue reads key from the embedded etcd of a running `up` on
// dataDir, through its unix socket (the owner's alone).
func storedValue(t *testing.T, dataDir, key string) []byte {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(dataDir, "etcd", "etcd.sock")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd key %s: %v, %v", key, resp, err)
	}
	return resp.Kvs[0].Value
}
