package etcdcluster

import (
	"context"
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
	if err := put(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	m := c.Members()
	m[0].Kill()
	if err := put(10 * time.Second); err != nil {
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
	if err := put(10 * time.Second); err != nil {
		t.Fatalf("put after quorum is back: %v", err)
	}
}
