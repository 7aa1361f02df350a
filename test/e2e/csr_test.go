package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TestAgentTLSBootstrap: `up` with a bootstrap token in its token file
// (group system:bootstrappers, which the bootstrap policy binds to
// system:node-bootstrapper and to the node client auto-approval); a
// separate `corekube agent --bootstrap-kubeconfig` gets each of its nodes
// a certificate through a CSR the controllers approve and sign, and the
// nodes register and become Ready as themselves. kubectl lists the CSRs
// and approves and denies others.
func TestAgentTLSBootstrap(t *testing.T) {
	kubectlPath(t)
	dataDir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("07401b.f395accd246ae52d,system:bootstrap:07401b,07401b,system:bootstrappers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUpAt(t, dataDir, freeAddr(t), "--token-auth-file", tokenFile)
	k := p.kc(t, kubectlPath(t))

	// No RBAC for the nodes: the Node authorizer alone lets each agent
	// read its own Node and, with a spec.nodeName field selector, its own
	// pods (AuthorizeNodeWithSelectors), and write them.

	// The bootstrap kubeconfig: the admin's cluster, the token's user.
	kc, err := clientcmd.LoadFromFile(filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range kc.AuthInfos {
		kc.AuthInfos[name].ClientCertificateData, kc.AuthInfos[name].ClientKeyData = nil, nil
		kc.AuthInfos[name].Token = "07401b.f395accd246ae52d"
	}
	bootKubeconfig := filepath.Join(t.TempDir(), "bootstrap-kubeconfig")
	if err := clientcmd.WriteToFile(*kc, bootKubeconfig); err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	var agentLogs bytes.Buffer
	agent := exec.Command(binary, "agent", "--bootstrap-kubeconfig", bootKubeconfig, "--cert-dir", certDir, "--nodes", "2", "--node-name-prefix", "boot")
	agent.Stdout, agent.Stderr = &agentLogs, &agentLogs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("agent output:\n%s", agentLogs.String())
		}
	})

	k.eventually("boot-1   True\nboot-2   True", "get", "nodes", "-o", "custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status", "--no-headers", "--sort-by=.metadata.name")
	// A pod bound to boot-2 runs: its agent lists and watches its pods as
	// itself (a refused list would never sync its informer).
	k.ok("run", "on-boot-2", "--image=nginx:1.27", `--overrides={"spec":{"nodeName":"boot-2"}}`)
	k.eventually("Running", "get", "pod", "on-boot-2", "-o", "jsonpath={.status.phase}")
	for _, n := range []string{"boot-1", "boot-2"} {
		fi, err := os.Stat(filepath.Join(certDir, n, "kubelet-client-current.pem"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s certificate mode %v", n, fi.Mode().Perm())
		}
	}
	// The leases are held by the nodes themselves; kubectl get csr shows
	// both requests approved and issued, made by the bootstrap token.
	out := k.ok("get", "csr", "--no-headers")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 {
		t.Fatalf("kubectl get csr:\n%s", out)
	}
	for _, r := range rows {
		f := strings.Fields(r)
		if len(f) != 6 || !strings.HasPrefix(f[0], "node-csr-") || f[2] != "kubernetes.io/kube-apiserver-client-kubelet" ||
			f[3] != "system:bootstrap:07401b" || f[4] != "<none>" || f[5] != "Approved,Issued" {
			t.Fatalf("kubectl get csr row %q", r)
		}
	}
	header := strings.Fields(strings.SplitN(k.ok("get", "csr"), "\n", 2)[0])
	if strings.Join(header, " ") != "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION" {
		t.Fatalf("kubectl get csr header %v", header)
	}

	// A CSR of another signer is approved and denied by kubectl.
	csrYAML := func(name string) string {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
		if err != nil {
			t.Fatal(err)
		}
		req := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
		return k.file(name+".yaml", "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: "+name+
			"\nspec:\n  request: "+req+"\n  signerName: kubernetes.io/kube-apiserver-client\n  expirationSeconds: 86400\n  usages: [client auth]\n")
	}
	k.expect("certificatesigningrequest.certificates.k8s.io/jane created", "create", "-f", csrYAML("jane"))
	k.expect("certificatesigningrequest.certificates.k8s.io/joe created", "create", "-f", csrYAML("joe"))
	row := func(name string) []string { return strings.Fields(k.ok("get", "csr", name, "--no-headers")) }
	if f := row("jane"); len(f) != 6 || f[2] != "kubernetes.io/kube-apiserver-client" || f[3] != "kubernetes-admin" || f[4] != "24h" || f[5] != "Pending" {
		t.Fatalf("kubectl get csr jane: %q", f)
	}
	k.expect("certificatesigningrequest.certificates.k8s.io/jane approved", "certificate", "approve", "jane")
	k.expect("certificatesigningrequest.certificates.k8s.io/joe denied", "certificate", "deny", "joe")
	deadline := time.Now().Add(30 * time.Second)
	for row("jane")[5] != "Approved,Issued" {
		if time.Now().After(deadline) {
			t.Fatalf("jane not issued: %q", row("jane"))
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state, with a deadline
	}
	if f := row("joe"); f[5] != "Denied" {
		t.Fatalf("joe: %q", f)
	}
}
