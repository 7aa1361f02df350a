package bootstrap

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
)

// TestRenewalDeadline: within 70-90% of the life, and not always the same.
func TestRenewalDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{NotBefore: start, NotAfter: start.Add(100 * time.Hour)}
	seen := map[time.Time]bool{}
	for range 50 {
		d := renewalDeadline(cert)
		if d.Before(start.Add(70*time.Hour)) || d.After(start.Add(90*time.Hour)) {
			t.Fatalf("deadline %v outside 70-90%%", d.Sub(start))
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatal("no jitter")
	}
}

// TestLoad: a stored pair of this node is used; another node's, or a
// file that is not a pair, is not.
func TestLoad(t *testing.T) {
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store := func(node, cn string) *Manager {
		pair, err := ca.Client(cn, "system:nodes")
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(dir, node), CertFileName, append(pair.CertPEM, pair.KeyPEM...)); err != nil {
			t.Fatal(err)
		}
		return New(nil, dir, node, nil)
	}
	if c, err := store("n1", "system:node:n1").load(); err != nil || c.Leaf.Subject.CommonName != "system:node:n1" {
		t.Fatalf("own certificate: %v", err)
	}
	if _, err := store("n2", "system:node:n1").load(); err == nil || !strings.Contains(err.Error(), `not "system:node:n2"`) {
		t.Fatalf("another node's certificate: %v", err)
	}
	m := New(nil, dir, "n3", nil)
	if err := writeFile(filepath.Join(dir, "n3"), CertFileName, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.load(); err == nil {
		t.Fatal("junk loaded")
	}
	fi, err := os.Stat(m.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v %v", err, fi.Mode())
	}
	if _, err := New(nil, dir, "n4", nil).load(); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}
