package etcd

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeGranter records the TTLs it grants and numbers the leases.
type fakeGranter struct {
	mu     sync.Mutex
	grants []int64
}

func (g *fakeGranter) Grant(_ context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grants = append(g.grants, ttl)
	return &clientv3.LeaseGrantResponse{ID: clientv3.LeaseID(len(g.grants)), TTL: ttl}, nil
}

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestLeaseManager(cfg LeaseConfig) (*leaseManager, *fakeGranter, *fakeClock) {
	g := &fakeGranter{}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := newLeaseManager(g, cfg)
	m.now = clock.now
	return m, g, clock
}

func mustLease(t *testing.T, m *leaseManager, scope string, ttl time.Duration) clientv3.LeaseID {
	t.Helper()
	id, err := m.get(t.Context(), scope, ttl)
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	return id
}

func TestLeaseReuseWindow(t *testing.T) {
	m, g, clock := newTestLeaseManager(LeaseConfig{})
	first := mustLease(t, m, "/registry/events/", time.Hour)
	// An hour's window is min(5% = 3m, 1m) = 1m, granted on top of the TTL.
	if len(g.grants) != 1 || g.grants[0] != 3600+60 {
		t.Fatalf("grants = %v, want one of %d s", g.grants, 3600+60)
	}
	clock.t = clock.t.Add(59 * time.Second)
	if id := mustLease(t, m, "/registry/events/", time.Hour); id != first {
		t.Errorf("within the window: lease %d, want the first, %d", id, first)
	}
	// At the end of the window the lease would not outlive a new TTL.
	clock.t = clock.t.Add(time.Second)
	if id := mustLease(t, m, "/registry/events/", time.Hour); id == first {
		t.Errorf("after the window: lease %d reused, want a new one", id)
	}
}

func TestLeaseShortTTLNotReused(t *testing.T) {
	m, g, _ := newTestLeaseManager(LeaseConfig{})
	// 5% of 2s rounds down to no window: every write grants a lease, and
	// a fraction of a second rounds up to one.
	mustLease(t, m, "s", 2*time.Second)
	mustLease(t, m, "s", 2*time.Second)
	mustLease(t, m, "s", 100*time.Millisecond)
	if want := []int64{2, 2, 1}; !slices.Equal(g.grants, want) {
		t.Errorf("grants = %v, want %v", g.grants, want)
	}
}

func TestLeaseMaxObjects(t *testing.T) {
	m, g, _ := newTestLeaseManager(LeaseConfig{MaxObjects: 3})
	var ids []clientv3.LeaseID
	for range 7 {
		ids = append(ids, mustLease(t, m, "s", time.Hour))
	}
	want := []clientv3.LeaseID{1, 1, 1, 2, 2, 2, 3}
	if !slices.Equal(ids, want) || len(g.grants) != 3 {
		t.Errorf("leases = %v (grants %v), want %v", ids, g.grants, want)
	}
}

func TestLeaseScopesApart(t *testing.T) {
	m, _, _ := newTestLeaseManager(LeaseConfig{})
	events := mustLease(t, m, "/registry/events/", time.Hour)
	other := mustLease(t, m, "/registry/other/", time.Hour)
	if events == other {
		t.Fatalf("two scopes share lease %d", events)
	}
	if id := mustLease(t, m, "/registry/events/", time.Hour); id != events {
		t.Errorf("events lease = %d, want %d still", id, events)
	}
}

func TestLeaseLongerTTLNotServedShorterLease(t *testing.T) {
	m, _, _ := newTestLeaseManager(LeaseConfig{})
	short := mustLease(t, m, "s", 10*time.Minute)
	if id := mustLease(t, m, "s", time.Hour); id == short {
		t.Errorf("an hour's TTL got the 10-minute lease %d", id)
	}
}

func TestLeaseForget(t *testing.T) {
	m, _, _ := newTestLeaseManager(LeaseConfig{})
	first := mustLease(t, m, "s", time.Hour)
	m.forget("s", first+100) // not the current lease: no effect
	if id := mustLease(t, m, "s", time.Hour); id != first {
		t.Fatalf("lease = %d, want %d", id, first)
	}
	m.forget("s", first)
	if id := mustLease(t, m, "s", time.Hour); id == first {
		t.Errorf("forgotten lease %d handed out again", id)
	}
}

func TestLeaseConcurrent(t *testing.T) {
	m, g, _ := newTestLeaseManager(LeaseConfig{MaxObjects: 10})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := m.get(context.Background(), "s", time.Hour); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(g.grants) != 20 { // 200 writes, 10 per lease
		t.Errorf("%d grants for 200 writes of at most 10 per lease, want 20", len(g.grants))
	}
}

// TestRevokedLeaseReplaced: a write whose reused lease was revoked behind
// the store's back gets a new lease instead of failing.
func TestRevokedLeaseReplaced(t *testing.T) {
	s := New(shared.Client())
	ctx := t.Context()
	prefix := "/lease-revoked/" + strconv.FormatInt(time.Now().UnixNano(), 10) + "/"
	// An hour's TTL makes the second write reuse the first one's lease.
	withTTL := storage.WithTTL(prefix, time.Hour)
	if _, err := s.Create(ctx, prefix+"a", []byte("v"), withTTL); err != nil {
		t.Fatalf("Create: %v", err)
	}
	resp, err := shared.Client().Get(ctx, prefix+"a")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("Get %sa = %v, %v; want a key with a lease", prefix, resp, err)
	}
	if _, err := shared.Client().Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if _, err := s.Create(ctx, prefix+"b", []byte("v"), withTTL); err != nil {
		t.Fatalf("Create after the lease was revoked: %v", err)
	}
	if _, err := s.GuaranteedUpdate(ctx, prefix+"b", func(storage.KV) ([]byte, error) { return []byte("v2"), nil }, withTTL); err != nil {
		t.Fatalf("GuaranteedUpdate: %v", err)
	}
	resp, err = shared.Client().Get(ctx, prefix+"b")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("Get %sb = %v, %v; want a key with a lease", prefix, resp, err)
	}
}
