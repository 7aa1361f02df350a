package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestUpExposure: a running `corekube up` listens on TCP only at its API
// server's address and its agents' kubelet API: the embedded etcd is on
// unix sockets, mode 0600 in 0700 directories, that its user can use as an
// etcd client (and no one else, by the modes); the admin credentials and
// keys are 0600.
func TestUpExposure(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startUpAt(t, filepath.Join(dir, "data"), addr, "--nodes", "1")
	p.mustKubectl("wait", "--for=condition=Ready", "node/node-1", "--timeout=30s")
	kubeletPort := p.mustKubectl("get", "node", "node-1", "-o", `jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}`)

	_, apiPort, _ := net.SplitHostPort(addr)
	got := listeningTCPPorts(t, p.cmd.Process.Pid)
	want := []string{apiPort, kubeletPort}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("listening TCP ports %v, want only the API server's and the kubelet API's %v", got, want)
	}

	data := p.dataDir
	for path, mode := range map[string]os.FileMode{
		data:                                 os.ModeDir | 0o700,
		filepath.Join(data, "etcd"):          os.ModeDir | 0o700,
		filepath.Join(data, "pki"):           os.ModeDir | 0o700,
		filepath.Join(data, "kubeconfig"):    0o600,
		filepath.Join(data, "pki", "ca.key"): 0o600,
		filepath.Join(data, "pki", "sa.key"): 0o600,
		filepath.Join(data, "pki", "apiserver-kubelet-client.key"): 0o600,
		filepath.Join(data, "etcd", "etcd.sock"):                   os.ModeSocket | 0o600,
		filepath.Join(data, "etcd", "etcd-peer.sock"):              os.ModeSocket | 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if m := fi.Mode() & (os.ModeType | os.ModePerm); m != mode {
			t.Errorf("%s: mode %v, want %v", path, m, mode)
		}
	}

	// The socket is the store: the owner reads the default namespace
	// through it.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(data, "etcd", "etcd.sock")}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "/registry/namespaces/default")
	if err != nil || resp.Count != 1 {
		t.Errorf("the default namespace through the etcd socket: %v, %v", resp, err)
	}
	p.stop()
}

// listeningTCPPorts lists the ports pid listens on over TCP (v4 and v6),
// from its open sockets and the kernel's socket tables.
func listeningTCPPorts(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var ports []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		s.Scan() // the header
		for s.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(s.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				t.Fatalf("%s: %q: %v", table, fields[1], err)
			}
			ports = append(ports, strconv.FormatUint(port, 10))
		}
		f.Close()
	}
	return ports
}
