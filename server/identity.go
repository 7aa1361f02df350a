package server

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/corekube/corekube/registry"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// The apiserver identity leases, as kube-apiserver 1.32 keeps them: each
// server holds a Lease in kube-system that it renews while it runs, and
// every server deletes the ones left expired by servers gone for good.
const (
	// IdentityLeaseLabel marks a Lease as an API server's identity, with
	// the component as its value (kube's).
	IdentityLeaseLabel = "apiserver.kubernetes.io/identity"
	identityComponent  = "kube-apiserver"
)

// IdentityLeaseConfig tunes the identity leases; zero values are kube's.
type IdentityLeaseConfig struct {
	// Duration is the leases' leaseDurationSeconds (an hour).
	Duration time.Duration
	// RenewInterval is how often this server renews its lease (10s).
	RenewInterval time.Duration
	// GCPeriod is how often expired identity leases are deleted (an hour).
	GCPeriod time.Duration
}

func (c *IdentityLeaseConfig) setDefaults() {
	if c.Duration <= 0 {
		c.Duration = time.Hour
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = 10 * time.Second
	}
	if c.GCPeriod <= 0 {
		c.GCPeriod = time.Hour
	}
}

// apiserverIdentity is the name of this server's identity lease:
// "apiserver-" and the first 16 bytes of a SHA-256 in lower-case base32, as
// kube's. kube hashes the host name and the component (length-prefixed),
// so one server per host keeps one lease across restarts; several corekube
// servers may run on one host (tests, or side by side on a small machine),
// so the address it listens on is hashed too, length-prefixed the same
// way: a server restarted on the same host and address takes its lease
// back, as kube's does.
func apiserverIdentity(hostname, listenAddr string) string {
	var data []byte
	for _, field := range []string{hostname, identityComponent, listenAddr} {
		data = binary.BigEndian.AppendUint16(data, uint16(len(field)))
		data = append(data, field...)
	}
	sum := sha256.Sum256(data)
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// identityLease keeps this server's identity lease and collects expired
// ones.
type identityLease struct {
	leases   *registry.Store
	cfg      IdentityLeaseConfig
	name     string
	holder   string
	hostname string
	log      *slog.Logger
}

// runIdentityLease starts the renewal and the garbage collection of the
// identity leases; both stop with the watch caches.
func (s *Server) runIdentityLease(leases *registry.Store) error {
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("apiserver identity: %w", err)
	}
	name := apiserverIdentity(hostname, s.listener.Addr().String())
	l := &identityLease{
		leases: leases, cfg: s.cfg.IdentityLease, name: name, hostname: hostname, log: s.log,
		// A new holder per process, so that a restart shows (kube's).
		holder: name + "_" + string(uuid.NewUUID()),
	}
	s.identity = name
	s.runBackground(l.renewLoop)
	s.runBackground(l.gcLoop)
	return nil
}

// Identity is the name of this server's identity lease in kube-system.
func (s *Server) Identity() string { return s.identity }

// renewLoop renews the lease at once, then every RenewInterval (with kube's
// 4% jitter) until ctx ends.
func (l *identityLease) renewLoop(ctx context.Context) {
	for {
		// Bounded, so that an etcd without quorum delays the next attempt
		// instead of holding the loop.
		renewCtx, cancel := context.WithTimeout(ctx, max(l.cfg.RenewInterval, 5*time.Second))
		err := l.renew(renewCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			l.log.Warn("renewing the apiserver identity lease failed", "lease", l.name, "err", err)
		}
		wait := l.cfg.RenewInterval + time.Duration(rand.Float64()*0.04*float64(l.cfg.RenewInterval))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// renew writes the lease: created if missing, else its renewTime moved to
// now, with this process as holder and the configured duration and labels.
func (l *identityLease) renew(ctx context.Context) error {
	_, _, err := l.leases.Update(ctx, metav1.NamespaceSystem, l.name, func(_ context.Context, current runtime.Object) (runtime.Object, error) {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: metav1.NamespaceSystem}}
		if current != nil {
			cur, ok := current.(*coordinationv1.Lease)
			if !ok {
				return nil, fmt.Errorf("lease store holds a %T", current)
			}
			lease = cur.DeepCopy()
		}
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		lease.Labels[IdentityLeaseLabel] = identityComponent
		lease.Labels[v1.LabelHostname] = l.hostname
		seconds := int32(l.cfg.Duration / time.Second)
		lease.Spec.HolderIdentity = &l.holder
		lease.Spec.LeaseDurationSeconds = &seconds
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		return lease, nil
	}, registry.UpdateOptions{FieldManager: apiserverFieldManager})
	return err
}

// gcLoop deletes expired identity leases every GCPeriod until ctx ends.
func (l *identityLease) gcLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.cfg.GCPeriod):
		}
		collectCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := l.collect(collectCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			l.log.Warn("deleting expired apiserver identity leases failed", "err", err)
		}
	}
}

// collect deletes the identity leases whose renewTime is more than their
// duration ago (or that lack either), as kube's apiserver lease GC. The
// delete is conditional on the resourceVersion judged expired, so a lease
// renewed in between is kept.
func (l *identityLease) collect(ctx context.Context) error {
	selector := labels.SelectorFromSet(labels.Set{IdentityLeaseLabel: identityComponent})
	out, err := l.leases.List(ctx, metav1.NamespaceSystem, &metainternalversion.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list identity leases: %w", err)
	}
	list, ok := out.(*coordinationv1.LeaseList)
	if !ok {
		return fmt.Errorf("lease list is a %T", out)
	}
	now := time.Now()
	for i := range list.Items {
		lease := &list.Items[i]
		if !leaseExpired(lease, now) {
			continue
		}
		rv := lease.ResourceVersion
		_, _, err := l.leases.Delete(ctx, lease.Namespace, lease.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete expired identity lease %s: %w", lease.Name, err)
		}
	}
	return nil
}

func leaseExpired(lease *coordinationv1.Lease, now time.Time) bool {
	s := lease.Spec
	return s.RenewTime == nil || s.LeaseDurationSeconds == nil ||
		s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds)*time.Second).Before(now)
}
