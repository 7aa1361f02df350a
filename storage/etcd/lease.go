package etcd

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseConfig tunes how keys written with a TTL share etcd leases. The
// defaults are kube-apiserver's (LeaseReuseDurationSeconds 60, at most
// 1,000 objects per lease).
type LeaseConfig struct {
	// ReuseDuration caps the window during which one lease is handed out
	// again: the window is min(5% of the TTL, ReuseDuration), and the lease
	// is granted that much longer than the TTL, so that no key lives less
	// than asked. Default a minute.
	ReuseDuration time.Duration
	// MaxObjects caps how many writes attach to one lease, so that one
	// expiry does not delete an unbounded number of keys at once in a
	// single etcd transaction. Default 1,000.
	MaxObjects int64
}

const (
	defaultLeaseReuseDuration = time.Minute
	defaultLeaseMaxObjects    = 1000
	// leaseReusePercent is the share of the TTL a lease may be reused for.
	leaseReusePercent = 0.05
)

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.ReuseDuration <= 0 {
		c.ReuseDuration = defaultLeaseReuseDuration
	}
	if c.MaxObjects <= 0 {
		c.MaxObjects = defaultLeaseMaxObjects
	}
	return c
}

// leaseGranter is the part of the etcd client the lease manager needs.
type leaseGranter interface {
	Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error)
}

// leaseManager hands out etcd leases for writes with a TTL. Granting a
// lease is a raft round trip and each lease costs etcd memory and an
// expiry check, so, as kube-apiserver's lease manager does, it reuses the
// lease it granted last for a short window instead of granting one per
// write. Leases are kept per scope (a resource's key prefix): keys of
// different scopes never share one. It is safe for concurrent use.
type leaseManager struct {
	granter leaseGranter
	cfg     LeaseConfig
	now     func() time.Time
	// granted, when set, is told at each grant the count kube's
	// etcd_lease_object_counts observes then.
	granted func(count int64)

	mu     sync.Mutex // guards scopes, not the slots in it
	scopes map[string]*leaseSlot
}

// leaseSlot is the lease last granted for one scope.
type leaseSlot struct {
	// mu is held across Grant, so that concurrent writers of one scope
	// wait for the one new lease rather than each granting their own.
	mu       sync.Mutex
	id       clientv3.LeaseID
	expires  time.Time // by our clock, measured from before the grant
	attached int64
}

func newLeaseManager(granter leaseGranter, cfg LeaseConfig) *leaseManager {
	return &leaseManager{granter: granter, cfg: cfg.withDefaults(), now: time.Now, scopes: map[string]*leaseSlot{}}
}

func (m *leaseManager) slot(scope string) *leaseSlot {
	m.mu.Lock()
	defer m.mu.Unlock()
	sl, ok := m.scopes[scope]
	if !ok {
		sl = &leaseSlot{}
		m.scopes[scope] = sl
	}
	return sl
}

// get returns a lease that expires no sooner than ttl from now and, when it
// is reused, at most the reuse window later than that.
func (m *leaseManager) get(ctx context.Context, scope string, ttl time.Duration) (clientv3.LeaseID, error) {
	// etcd counts lease TTLs in whole seconds; round up, never down.
	ttlSec := max(int64(math.Ceil(ttl.Seconds())), 1)
	reuse := min(time.Duration(leaseReusePercent*float64(ttlSec))*time.Second, m.cfg.ReuseDuration.Truncate(time.Second))
	want := time.Duration(ttlSec) * time.Second

	sl := m.slot(scope)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	now := m.now()
	// Reuse the last lease if it outlives the TTL asked for, but by no
	// more than the window (it may have been granted for a longer TTL).
	outlives := now.Add(want).Before(sl.expires)
	notTooLong := !sl.expires.After(now.Add(want + reuse))
	if sl.id != clientv3.NoLease && outlives && notTooLong && sl.attached < m.cfg.MaxObjects {
		sl.attached++
		return sl.id, nil
	}
	grant := want + reuse
	resp, err := m.granter.Grant(ctx, int64(grant/time.Second))
	if err != nil {
		return clientv3.NoLease, err
	}
	if m.granted != nil {
		// As kube: the objects attached to the previous lease, plus the
		// one this grant is for.
		m.granted(sl.attached + 1)
	}
	sl.id, sl.expires, sl.attached = resp.ID, now.Add(grant), 1
	return sl.id, nil
}

// forget drops id from scope if it is the lease handed out there, so the
// next write grants a new one.
func (m *leaseManager) forget(scope string, id clientv3.LeaseID) {
	sl := m.slot(scope)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.id == id {
		sl.id, sl.expires, sl.attached = clientv3.NoLease, time.Time{}, 0
	}
}

// staleLease reports whether a write failed because its lease is gone
// (revoked, or lost by an etcd whose clock ran ahead of ours) and, if so,
// forgets that lease so that a retry gets a fresh one.
func (m *leaseManager) staleLease(scope string, id clientv3.LeaseID, err error) bool {
	if id == clientv3.NoLease || !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false
	}
	m.forget(scope, id)
	return true
}
