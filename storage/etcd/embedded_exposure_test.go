package etcd

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestEmbeddedServesOnlyOnUnixSockets: the embedded etcd listens on no TCP
// port, its client and peer sockets are mode 0600 in a 0700 data
// directory, a second client reaches it through Endpoints, and a plain TCP
// client finds nothing at etcd's usual ports.
func TestEmbeddedServesOnlyOnUnixSockets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	for _, ep := range e.Endpoints() {
		if !strings.HasPrefix(ep, "unix:///") {
			t.Errorf("endpoint %q, want a unix socket", ep)
		}
	}
	for _, l := range e.etcd.Clients {
		if n := l.Addr().Network(); n != "unix" {
			t.Errorf("client listener on %s %s, want unix", n, l.Addr())
		}
	}
	for _, l := range e.etcd.Peers {
		if n := l.Addr().Network(); n != "unix" {
			t.Errorf("peer listener on %s %s, want unix", n, l.Addr())
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory: %v %v, want 0700", fi.Mode(), err)
	}
	for _, name := range []string{clientSocket, peerSocket} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("socket %s: %v", name, err)
			continue
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("socket %s: mode %v, want a 0600 socket", name, fi.Mode())
		}
	}

	// Another client of the owner, through the advertised endpoints.
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(t.Context(), "/exposure/k", "v"); err != nil {
		t.Fatalf("put through the socket: %v", err)
	}

	// Nothing on etcd's default ports, where the embedded etcd listened
	// before (and where an attacker would look first).
	for _, addr := range []string{"127.0.0.1:2379", "127.0.0.1:2380"} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Logf("%s: something else listens there (not this etcd: its listeners are unix sockets)", addr)
		}
	}
}

// TestEmbeddedLongDirectory: a data directory too deep for a unix socket
// path gets its sockets in a private temporary directory, removed on Close.
func TestEmbeddedLongDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	e, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	sock := strings.TrimPrefix(e.Endpoints()[0], "unix://")
	if strings.HasPrefix(sock, dir) {
		t.Errorf("socket %s inside the long directory", sock)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v %v, want 0700", fi.Mode(), err)
	}
	if _, err := e.Client().Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Errorf("socket directory left behind: %v", err)
	}
}
