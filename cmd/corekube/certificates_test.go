package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corekube/corekube/auth/pki"
)

// TestSigningOptions: no flags, no signer; both flags load the CA; one
// alone, or a missing file, is an error.
func TestSigningOptions(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir); err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if got, err := (&signingOptions{}).ca(); got != nil || err != nil {
		t.Fatalf("no flags: %v %v", got, err)
	}
	got, err := (&signingOptions{certFile: cert, keyFile: key}).ca()
	if err != nil || got.Cert.Subject.CommonName != "test-ca" {
		t.Fatalf("both flags: %v %v", got, err)
	}
	if _, err := (&signingOptions{certFile: cert}).ca(); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("one flag: %v", err)
	}
	if _, err := (&signingOptions{certFile: cert, keyFile: filepath.Join(dir, "missing")}).ca(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing key: %v", err)
	}
	// up: the server's CA when its pki directory has one, else none.
	if got, err := upSigningCA(dir); err != nil || got == nil {
		t.Fatalf("up with a CA: %v %v", got, err)
	}
	if got, err := upSigningCA(t.TempDir()); err != nil || got != nil {
		t.Fatalf("up without a CA: %v %v", got, err)
	}
}
