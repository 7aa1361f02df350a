// Package storage defines the storage contract the registry is built on: a
// key/value store with revisions, compare-and-swap updates, consistent
// paginated lists and watches. Values are opaque bytes (serialized objects);
// the registry owns encoding. The etcd implementation lives in storage/etcd
// and is the only importer of the etcd client.
package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Implementations wrap them (fmt.Errorf("...: %w", ErrX))
// and callers test with errors.Is. The registry maps them to Kubernetes
// Status errors in exactly one place.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("storage: key not found")
	// ErrAlreadyExists: Create found the key already present.
	ErrAlreadyExists = errors.New("storage: key already exists")
	// ErrConflict: a precondition on the current value failed (used by
	// callers' tryUpdate / precondition funcs; GuaranteedUpdate retries
	// revision races itself and never returns it for those).
	ErrConflict = errors.New("storage: conflict")
	// ErrCompacted: the requested revision has been compacted away.
	ErrCompacted = errors.New("storage: revision compacted")
	// ErrFutureRevision: the requested revision is newer than the store's
	// current revision.
	ErrFutureRevision = errors.New("storage: revision is in the future")
	// ErrUnavailable: the backend could not be reached in time.
	ErrUnavailable = errors.New("storage: backend unavailable")
)

// KV is one stored value and the revision that last modified it (etcd's
// mod revision). Revision is what the API calls metadata.resourceVersion.
type KV struct {
	Key      string
	Value    []byte
	Revision int64
}

// ListOptions select a page of keys under a prefix.
type ListOptions struct {
	// Revision reads the state as of that revision. 0 means the most recent
	// state (a linearizable read).
	Revision int64
	// StartKey, if set, is the first key (inclusive) of this page; it must be
	// under the prefix. Used for continue tokens.
	StartKey string
	// Limit caps the number of items returned; 0 means no limit. With a
	// Predicate, Limit counts matching items: the store keeps reading until
	// it has Limit matches or the prefix is exhausted.
	Limit int64
	// Predicate filters items; nil accepts everything.
	Predicate func(kv KV) (bool, error)
}

// ListResult is one page of a list.
type ListResult struct {
	Items []KV
	// Revision is the revision the page was read at; later pages of the same
	// list must pass it as ListOptions.Revision.
	Revision int64
	// NextKey is where the next page starts; empty when the list is complete.
	NextKey string
	// RemainingItemCount is the number of keys after this page, when known
	// (only without a Predicate); nil otherwise.
	RemainingItemCount *int64
}

// EventType says what happened to a key.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Error carries Err (for example ErrCompacted); the channel closes after it.
	Error EventType = "ERROR"
	// Progress reports that the store has seen everything up to Revision.
	Progress EventType = "PROGRESS"
)

// Event is one change seen by a watch. For Deleted, KV.Value is the value
// before deletion and KV.Revision the revision of the delete.
type Event struct {
	Type EventType
	KV   KV
	// PrevValue is the value before this change (nil for Added).
	PrevValue []byte
	Err       error
}

// UpdateFunc computes a new value from the current one. Returning an error
// aborts the update and GuaranteedUpdate returns that error unchanged.
// Returning a value equal to current.Value makes the update a no-op.
type UpdateFunc func(current KV) (newValue []byte, err error)

// WriteOptions are the options of one write (Create, GuaranteedUpdate).
type WriteOptions struct {
	// TTL, when positive, makes the key expire: the store deletes it, with
	// a Deleted watch event carrying its last value, at least TTL after
	// this write. A backend may keep it a little longer, to share one
	// expiry timer among the keys written close together (etcd: at most
	// min(5% of TTL, a minute) longer, as kube-apiserver's lease manager).
	// Zero means the key never expires, so a write without a TTL makes a
	// key that had one permanent again (etcd: a put detaches the lease).
	TTL time.Duration
	// LeaseScope names the keys that may share an expiry timer with this
	// one (callers pass a resource's key prefix): keys of different scopes
	// never do, as kube-apiserver keeps one lease manager per resource.
	LeaseScope string
	// Current, when set, is what the caller believes the key's current
	// value to be (a watch cache's copy, which may be stale): a
	// GuaranteedUpdate starts from it instead of reading the key, as
	// kube-apiserver's store starts from its cached object. Nothing changes
	// for the caller when it is stale: the compare-and-swap fails and the
	// update is retried from the value the store returns; and a tryUpdate
	// error or a no-op is only returned once tryUpdate has seen the value
	// actually stored. Its Value must be what the store held at its
	// Revision, or stand for it: a store never reads Value's bytes, it
	// only hands them to tryUpdate (or a Delete's precondition), compares
	// tryUpdate's answer with them (equal: a no-op) and returns them
	// (the no-op, the deleted value), so a wrapper that converts values
	// may pass its caller's bytes down and recognise them on their way
	// back. Ignored unless its Key is the updated key; other writes
	// ignore it.
	Current *KV
}

// WriteOption sets one of the WriteOptions.
type WriteOption func(*WriteOptions)

// WithTTL makes the written key expire ttl after the write (see
// WriteOptions.TTL); keys written with the same scope may share an expiry
// timer. A ttl of zero or less means no expiry.
func WithTTL(scope string, ttl time.Duration) WriteOption {
	return func(o *WriteOptions) {
		o.LeaseScope, o.TTL = scope, max(ttl, 0)
	}
}

// WithCurrent makes a GuaranteedUpdate start from kv, what the caller
// believes the key holds (see WriteOptions.Current).
func WithCurrent(kv KV) WriteOption {
	return func(o *WriteOptions) { o.Current = &kv }
}

// UpdateFrom is where a GuaranteedUpdate stands: the value its tryUpdate
// runs on, and whether that value is known to be the stored one (it is
// not when it is the caller's copy, WriteOptions.Current).
type UpdateFrom struct {
	KV      KV
	key     string
	current bool
	read    func() (KV, error)
}

// StartFrom is where a GuaranteedUpdate of key starts: o.Current when it
// is that key's (it may be stale), else what read returns. read is also
// how Stands learns the stored value.
func (o WriteOptions) StartFrom(key string, read func() (KV, error)) (*UpdateFrom, error) {
	if o.Current != nil && o.Current.Key == key {
		return &UpdateFrom{KV: *o.Current, key: key, read: read}, nil
	}
	kv, err := read()
	return &UpdateFrom{KV: kv, key: key, current: true, read: read}, err
}

// Attempt runs tryUpdate on KV. When it computes a new value, Attempt
// returns it to be written (write is true) by a compare-and-swap on KV's
// revision. Otherwise it returns the final answer of the update: KV
// unchanged, or tryUpdate's error as it is (so callers can errors.As
// it), both only once KV is known to be the stored value; from a stale
// copy it tries again from the stored value.
func (u *UpdateFrom) Attempt(tryUpdate UpdateFunc) (value []byte, write bool, kv KV, err error) {
	for {
		value, err := tryUpdate(u.KV)
		if err == nil && !bytes.Equal(value, u.KV.Value) {
			return value, true, KV{}, nil
		}
		stands, readErr := u.Stands()
		if readErr != nil {
			return nil, false, KV{}, fmt.Errorf("update %s: %w", u.key, readErr)
		}
		if !stands {
			continue
		}
		if err != nil {
			return nil, false, KV{}, err
		}
		return nil, false, u.KV, nil
	}
}

// Stands reports whether an answer of tryUpdate that writes nothing (an
// error, or the value unchanged) stands. It does when KV is known to be
// the stored value, or when the stored value, read now, is at KV's
// revision (the same revision is the same value). Otherwise KV moves to
// the stored value and the update must try again from it.
func (u *UpdateFrom) Stands() (bool, error) {
	if u.current {
		return true, nil
	}
	stored, err := u.read()
	if err != nil {
		return false, err
	}
	u.current = true
	if stored.Revision != u.KV.Revision {
		u.KV = stored
		return false, nil
	}
	return true, nil
}

// Check runs a Delete's precondition (nil accepts anything) on KV. Its
// error is the answer, unchanged, only once KV is known to be the stored
// value; on a stale copy Check moves to the stored value and checks that.
func (u *UpdateFrom) Check(precondition func(KV) error) error {
	if precondition == nil {
		return nil
	}
	for {
		err := precondition(u.KV)
		if err == nil {
			return nil
		}
		stands, readErr := u.Stands()
		if readErr != nil {
			return fmt.Errorf("delete %s: %w", u.key, readErr)
		}
		if stands {
			return err
		}
	}
}

// Lost moves to the value a lost compare-and-swap returned: the stored one.
func (u *UpdateFrom) Lost(kv KV) { u.KV, u.current = kv, true }

// ApplyWriteOptions folds opts into a WriteOptions, for implementations.
func ApplyWriteOptions(opts []WriteOption) WriteOptions {
	var o WriteOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Interface is the contract every storage backend satisfies. All methods are
// safe for concurrent use.
type Interface interface {
	// Get returns the current value of key, or ErrNotFound.
	Get(ctx context.Context, key string) (KV, error)
	// List returns a page of the keys under prefix (prefix must end in "/").
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	// Create stores value under key if the key does not exist, else
	// ErrAlreadyExists. The returned KV carries the new revision.
	Create(ctx context.Context, key string, value []byte, opts ...WriteOption) (KV, error)
	// GuaranteedUpdate reads key, calls tryUpdate and writes the result with
	// a compare-and-swap on the read revision, retrying on races. If the key
	// does not exist it returns ErrNotFound without calling tryUpdate. A
	// no-op update writes nothing, so it leaves the key's expiry as it was.
	// WithCurrent replaces the first read by the caller's copy, which may
	// be stale (then tryUpdate is called again with the stored value).
	GuaranteedUpdate(ctx context.Context, key string, tryUpdate UpdateFunc, opts ...WriteOption) (KV, error)
	// Delete removes key after precondition (may be nil) accepts its current
	// value, with a compare-and-swap so the checked value is the deleted
	// one. It returns the deleted value with the revision of the delete.
	// Of the WriteOptions only Current counts: where the delete starts
	// (precondition sees it first), as a GuaranteedUpdate's.
	Delete(ctx context.Context, key string, precondition func(current KV) error, opts ...WriteOption) (KV, error)
	// Watch streams every change under prefix after revision fromRevision
	// (exclusive; 0 means from now). The channel is closed when ctx ends or
	// after an Error event. Progress events are sent when the backend reports
	// progress with no changes.
	Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan Event, error)
	// CurrentRevision returns the store's latest revision. prefix names
	// the resource the caller reads (a key prefix, as List's), for the
	// backend's metrics; the revision is the whole store's.
	CurrentRevision(ctx context.Context, prefix string) (int64, error)
	// RequestProgress asks every open watch to report (with a Progress
	// event) the revision it has seen, even when nothing under its prefix
	// changed: a cache uses it to prove it has caught up.
	RequestProgress(ctx context.Context) error
	// Compact discards history before revision.
	Compact(ctx context.Context, revision int64) error
	// Healthy returns nil when the backend answers a read in time.
	Healthy(ctx context.Context) error
}

// UnavailableError is ErrUnavailable with the backend's own error (such
// as etcd's "etcdserver: request timed out"), which the API shows as
// kube-apiserver does; errors.Is(err, ErrUnavailable) holds.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return fmt.Sprintf("%v: %v", ErrUnavailable, e.Err) }

// Unwrap makes both ErrUnavailable and the backend's error match.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// CompactedError is the ErrCompacted of a watch or read at Requested when
// history before Compacted is gone; errors.Is(err, ErrCompacted) holds.
type CompactedError struct {
	Requested, Compacted int64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("revision %d is older than the compacted revision %d: %v", e.Requested, e.Compacted, ErrCompacted)
}

// Unwrap makes errors.Is(err, ErrCompacted) true.
func (e *CompactedError) Unwrap() error { return ErrCompacted }
