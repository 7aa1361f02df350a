package etcdcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestQuorum: the cluster serves writes with one of three members down,
// refuses them without quorum, and serves them again once a member is back.
func TestQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd processes")
	}
	c := Start(t, 3, Options{})
	client, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	put := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := client.Put(ctx, "k", "v")
		return err
	}
	// eventuallyPut: a put in flight on a killed member's connection fails
	// (the client does not resend writes); the next one goes to another.
	eventuallyPut := func() error {
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := put(5 * time.Second)
			if err == nil || time.Now().After(deadline) {
				return err
			}
		}
	}
	if err := put(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	m := c.Members()
	m[0].Kill()
	if err := eventuallyPut(); err != nil {
		t.Fatalf("put with 2 of 3 members: %v", err)
	}
	m[1].Stop()
	if err := put(time.Second); err == nil {
		t.Fatal("put succeeded with 1 of 3 members")
	}
	if err := m[1].Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m[1].WaitHealthy(ctx); err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	if err := eventuallyPut(); err != nil {
		t.Fatalf("put after quorum is back: %v", err)
	}
}

// TestTLS: a TLS cluster serves clients with its client certificate and
// refuses those without one.
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd process")
	}
	c := Start(t, 1, Options{TLS: true})
	files := c.TLS()
	pair, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	put := func(certs []tls.Certificate) error {
		client, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
			TLS: &tls.Config{RootCAs: roots, Certificates: certs}})
		if err != nil {
			return err
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = client.Put(ctx, "k", "v")
		return err
	}
	if err := put([]tls.Certificate{pair}); err != nil {
		t.Fatalf("put with the client certificate: %v", err)
	}
	if err := put(nil); err == nil {
		t.Fatal("put without a client certificate succeeded")
	}
}
