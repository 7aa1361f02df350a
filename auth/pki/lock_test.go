package pki

import (
	"bytes"
	"sync"
	"testing"
)

// TestConcurrentFirstStart: servers starting at once on one directory,
// each taking the lock around its load-or-create, end up with one CA and
// one serving certificate that covers every server's names.
func TestConcurrentFirstStart(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}
	cas := make([][]byte, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := LockDir(dir)
			if err != nil {
				errs[i] = err
				return
			}
			defer unlock()
			ca, err := LoadOrCreateCA(dir, "test-ca")
			if err != nil {
				errs[i] = err
				return
			}
			cas[i] = ca.PEM
			_, errs[i] = ca.LoadOrCreateServing(dir, "apiserver", ServingRequest{CommonName: "kube-apiserver", Hosts: []string{"localhost", host}})
		}()
	}
	wg.Wait()
	for i := range hosts {
		if errs[i] != nil {
			t.Fatalf("server %d: %v", i, errs[i])
		}
		if !bytes.Equal(cas[i], cas[0]) {
			t.Fatalf("servers 0 and %d made different CAs", i)
		}
	}
	ca, err := LoadOrCreateCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	// The certificate left covers every server's address: a reissue keeps
	// the names of the one it replaces.
	pair, err := ca.LoadOrCreateServing(dir, "apiserver", ServingRequest{CommonName: "kube-apiserver", Hosts: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := parseCert(pair.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := cert.VerifyHostname(h); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}
}
