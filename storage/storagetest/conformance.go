// Package storagetest is a conformance suite that every storage.Interface
// implementation must pass. Backends call RunConformance from their tests.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
)

// timeout bounds every wait for a watch event or a channel close.
const timeout = 5 * time.Second

// Expiry tests write with ttl and wait up to expiryTimeout for the delete:
// a backend may round the TTL up (etcd: whole seconds, and a minimum lease
// TTL of about two seconds) and checks expiry only periodically.
const (
	ttl           = time.Second
	expiryTimeout = 30 * time.Second
)

// RunConformance runs the suite. newStore is called once per subtest and
// may return the same store every time: each subtest works under a key
// prefix of its own. Most subtests run in parallel; the compaction ones
// run last and alone, because compaction discards history store-wide. So
// the store must not be shared with tests running in parallel with this
// one.
func RunConformance(t *testing.T, newStore func(t *testing.T) storage.Interface) {
	t.Run("Parallel", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s storage.Interface, prefix string)
		}{
			{"CreateGet", testCreateGet},
			{"UpdateChangesValue", testUpdateChangesValue},
			{"UpdateNoOp", testUpdateNoOp},
			{"UpdateErrorUnchanged", testUpdateErrorUnchanged},
			{"UpdateNotFound", testUpdateNotFound},
			{"UpdateRetriesOnRace", testUpdateRetriesOnRace},
			{"UpdateKeyDeletedDuringUpdate", testUpdateKeyDeleted},
			{"UpdateConcurrent", testUpdateConcurrent},
			{"UpdateFromCurrent", testUpdateFromCurrent},
			{"UpdateFromStaleCurrent", testUpdateFromStaleCurrent},
			{"UpdateFromDeletedCurrent", testUpdateFromDeletedCurrent},
			{"DeletePrecondition", testDeletePrecondition},
			{"DeletePreconditionFails", testDeletePreconditionFails},
			{"DeleteFromStaleCurrent", testDeleteFromStaleCurrent},
			{"DeleteNotFound", testDeleteNotFound},
			{"DeleteRetriesOnRace", testDeleteRetriesOnRace},
			{"ListPrefix", testListPrefix},
			{"ListPagingAtPinnedRevision", testListPaging},
			{"ListPredicate", testListPredicate},
			{"ListFutureRevision", testListFutureRevision},
			{"ListInvalidArguments", testListInvalidArguments},
			{"WatchFromRevision", testWatchFromRevision},
			{"WatchFromNow", testWatchFromNow},
			{"WatchClosesOnCancel", testWatchClosesOnCancel},
			{"WatchRequestProgress", testWatchRequestProgress},
			{"CurrentRevisionMonotonic", testCurrentRevision},
			{"Healthy", testHealthy},
			{"TTLExpires", testTTLExpires},
			{"TTLKeptOnUpdate", testTTLKeptOnUpdate},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, newStore(t), newPrefix())
			})
		}
	})
	// t.Run returns only after the parallel group above has finished.
	t.Run("Compaction", func(t *testing.T) {
		testCompaction(t, newStore(t), newPrefix())
	})
}

var (
	runID     = time.Now().UnixNano()
	prefixSeq atomic.Int64
)

// newPrefix returns a prefix no other subtest, nor an earlier run against
// a persistent store, has used.
func newPrefix() string {
	return fmt.Sprintf("/storagetest/%x-%d/", runID, prefixSeq.Add(1))
}

func testCreateGet(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	kv, err := s.Create(ctx, key, []byte("v1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if kv.Key != key || string(kv.Value) != "v1" || kv.Revision <= 0 {
		t.Fatalf("Create returned %+v", kv)
	}
	if got := mustGet(t, s, key); !equalKV(got, kv) {
		t.Errorf("Get = %+v, want %+v", got, kv)
	}
	if _, err := s.Create(ctx, key, []byte("v2")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Errorf("second Create: err = %v, want ErrAlreadyExists", err)
	}
	if got := mustGet(t, s, key); !equalKV(got, kv) {
		t.Errorf("Get after failed Create = %+v, want %+v", got, kv)
	}
	if _, err := s.Get(ctx, prefix+"missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get missing: err = %v, want ErrNotFound", err)
	}
}

func testUpdateChangesValue(t *testing.T, s storage.Interface, prefix string) {
	key := prefix + "a"
	old := mustCreate(t, s, key, "v1")
	kv, err := s.GuaranteedUpdate(t.Context(), key, func(cur storage.KV) ([]byte, error) {
		if !equalKV(cur, old) {
			t.Errorf("tryUpdate got %+v, want %+v", cur, old)
		}
		return []byte("v2"), nil
	})
	if err != nil {
		t.Fatalf("GuaranteedUpdate: %v", err)
	}
	if string(kv.Value) != "v2" || kv.Revision <= old.Revision {
		t.Fatalf("GuaranteedUpdate returned %+v, want v2 after revision %d", kv, old.Revision)
	}
	if got := mustGet(t, s, key); !equalKV(got, kv) {
		t.Errorf("Get = %+v, want %+v", got, kv)
	}
}

func testUpdateNoOp(t *testing.T, s storage.Interface, prefix string) {
	key := prefix + "a"
	old := mustCreate(t, s, key, "v1")
	kv, err := s.GuaranteedUpdate(t.Context(), key, func(cur storage.KV) ([]byte, error) {
		return slices.Clone(cur.Value), nil
	})
	if err != nil {
		t.Fatalf("GuaranteedUpdate: %v", err)
	}
	if !equalKV(kv, old) {
		t.Errorf("no-op GuaranteedUpdate returned %+v, want unchanged %+v", kv, old)
	}
	if got := mustGet(t, s, key); !equalKV(got, old) {
		t.Errorf("Get after no-op = %+v, want %+v (no write)", got, old)
	}
}

// apiError stands for the API Status errors callers return from tryUpdate
// and preconditions, which they expect back untouched.
type apiError struct{ reason string }

func (e *apiError) Error() string { return "api error: " + e.reason }

func testUpdateErrorUnchanged(t *testing.T, s storage.Interface, prefix string) {
	key := prefix + "a"
	old := mustCreate(t, s, key, "v1")
	want := &apiError{reason: "conflict"}
	_, err := s.GuaranteedUpdate(t.Context(), key, func(storage.KV) ([]byte, error) {
		return nil, want
	})
	if err != want {
		t.Errorf("GuaranteedUpdate err = %v (%T), want the tryUpdate error unchanged", err, err)
	}
	if got := mustGet(t, s, key); !equalKV(got, old) {
		t.Errorf("Get after failed update = %+v, want %+v", got, old)
	}
}

func testUpdateNotFound(t *testing.T, s storage.Interface, prefix string) {
	_, err := s.GuaranteedUpdate(t.Context(), prefix+"missing", func(storage.KV) ([]byte, error) {
		t.Error("tryUpdate called for a missing key")
		return []byte("x"), nil
	})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}

// testUpdateRetriesOnRace makes a competing write land between the read
// and the compare-and-swap: tryUpdate must run again on the newer value.
func testUpdateRetriesOnRace(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	mustCreate(t, s, key, "v1")
	var seen []string
	kv, err := s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		seen = append(seen, string(cur.Value))
		if len(seen) == 1 {
			mustUpdate(t, s, key, "v2")
		}
		return append(slices.Clone(cur.Value), '+'), nil
	})
	if err != nil {
		t.Fatalf("GuaranteedUpdate: %v", err)
	}
	if want := []string{"v1", "v2"}; !slices.Equal(seen, want) {
		t.Errorf("tryUpdate saw %q, want %q", seen, want)
	}
	if string(kv.Value) != "v2+" {
		t.Errorf("value = %q, want %q", kv.Value, "v2+")
	}
	if got := mustGet(t, s, key); !equalKV(got, kv) {
		t.Errorf("Get = %+v, want %+v", got, kv)
	}
}

func testUpdateKeyDeleted(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	mustCreate(t, s, key, "v1")
	calls := 0
	_, err := s.GuaranteedUpdate(ctx, key, func(storage.KV) ([]byte, error) {
		calls++
		if _, err := s.Delete(ctx, key, nil); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		return []byte("v2"), nil
	})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
	if calls != 1 {
		t.Errorf("tryUpdate called %d times, want 1", calls)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get: err = %v, want ErrNotFound (the update must not recreate the key)", err)
	}
}

func testUpdateConcurrent(t *testing.T, s storage.Interface, prefix string) {
	const n = 20
	key := prefix + "counter"
	mustCreate(t, s, key, "0")
	var (
		wg    sync.WaitGroup
		tries atomic.Int64
	)
	for range n {
		wg.Go(func() {
			_, err := s.GuaranteedUpdate(t.Context(), key, func(cur storage.KV) ([]byte, error) {
				tries.Add(1)
				i, err := strconv.Atoi(string(cur.Value))
				if err != nil {
					return nil, err
				}
				return []byte(strconv.Itoa(i + 1)), nil
			})
			if err != nil {
				t.Errorf("GuaranteedUpdate: %v", err)
			}
		})
	}
	wg.Wait()
	if got := mustGet(t, s, key); string(got.Value) != strconv.Itoa(n) {
		t.Errorf("counter = %s, want %d", got.Value, n)
	}
	t.Logf("%d increments took %d tryUpdate calls", n, tries.Load())
}

func testDeletePrecondition(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	mustCreate(t, s, key, "v1")
	cur := mustUpdate(t, s, key, "v2")
	called := false
	kv, err := s.Delete(ctx, key, func(got storage.KV) error {
		called = true
		if !equalKV(got, cur) {
			t.Errorf("precondition got %+v, want %+v", got, cur)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if !called {
		t.Error("precondition not called")
	}
	if kv.Key != key || string(kv.Value) != "v2" || kv.Revision <= cur.Revision {
		t.Errorf("Delete returned %+v, want the last value v2 with a revision after %d", kv, cur.Revision)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}

	// A nil precondition deletes unconditionally.
	mustCreate(t, s, key, "v3")
	if kv, err := s.Delete(ctx, key, nil); err != nil || string(kv.Value) != "v3" {
		t.Errorf("Delete(nil precondition) = %+v, %v; want v3", kv, err)
	}
}

// testDeleteFromStaleCurrent: a Delete given a stale value (WithCurrent)
// deletes the stored one, which its precondition sees; a precondition
// that fails only on the stale value does not fail the delete; one given
// the value of a key deleted since is ErrNotFound.
func testDeleteFromStaleCurrent(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	stale := mustCreate(t, s, key, "v1")
	stored := mustUpdate(t, s, key, "v2")
	var seen []string
	kv, err := s.Delete(ctx, key, func(cur storage.KV) error {
		seen = append(seen, string(cur.Value))
		return nil
	}, storage.WithCurrent(stale))
	if err != nil || string(kv.Value) != "v2" || kv.Revision <= stored.Revision {
		t.Fatalf("Delete from stale = %+v, %v; want the stored v2 deleted", kv, err)
	}
	if !slices.Equal(seen, []string{"v1", "v2"}) {
		t.Errorf("precondition saw %q, want the stale then the stored value", seen)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}

	stale = mustCreate(t, s, key, "v1")
	mustUpdate(t, s, key, "v2")
	kv, err = s.Delete(ctx, key, func(cur storage.KV) error {
		if string(cur.Value) == "v1" {
			return &apiError{reason: "stale"}
		}
		return nil
	}, storage.WithCurrent(stale))
	if err != nil || string(kv.Value) != "v2" {
		t.Errorf("Delete whose precondition fails on the stale value = %+v, %v; want v2 deleted", kv, err)
	}
	want := &apiError{reason: "uid mismatch"}
	stale = mustCreate(t, s, key, "v1")
	now := mustUpdate(t, s, key, "v2")
	if _, err := s.Delete(ctx, key, func(storage.KV) error { return want }, storage.WithCurrent(stale)); err != want {
		t.Errorf("Delete failing on both values: err = %v, want the precondition's error unchanged", err)
	}
	if got := mustGet(t, s, key); !equalKV(got, now) {
		t.Errorf("Get after a failed Delete = %+v, want %+v", got, now)
	}

	stale = mustGet(t, s, key)
	if _, err := s.Delete(ctx, key, nil); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Delete(ctx, key, nil, storage.WithCurrent(stale)); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Delete from the value of a deleted key: err = %v, want ErrNotFound", err)
	}
}

func testDeletePreconditionFails(t *testing.T, s storage.Interface, prefix string) {
	key := prefix + "a"
	old := mustCreate(t, s, key, "v1")
	want := &apiError{reason: "uid mismatch"}
	_, err := s.Delete(t.Context(), key, func(storage.KV) error { return want })
	if err != want {
		t.Errorf("Delete err = %v (%T), want the precondition error unchanged", err, err)
	}
	if got := mustGet(t, s, key); !equalKV(got, old) {
		t.Errorf("Get after refused Delete = %+v, want %+v", got, old)
	}
}

func testDeleteNotFound(t *testing.T, s storage.Interface, prefix string) {
	_, err := s.Delete(t.Context(), prefix+"missing", func(storage.KV) error {
		t.Error("precondition called for a missing key")
		return nil
	})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}

// testDeleteRetriesOnRace changes the key between the precondition and the
// delete: the precondition must be checked again, on the value deleted.
func testDeleteRetriesOnRace(t *testing.T, s storage.Interface, prefix string) {
	key := prefix + "a"
	mustCreate(t, s, key, "v1")
	var seen []string
	var v2 storage.KV
	kv, err := s.Delete(t.Context(), key, func(cur storage.KV) error {
		seen = append(seen, string(cur.Value))
		if len(seen) == 1 {
			v2 = mustUpdate(t, s, key, "v2")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if want := []string{"v1", "v2"}; !slices.Equal(seen, want) {
		t.Errorf("precondition saw %q, want %q", seen, want)
	}
	if string(kv.Value) != "v2" || kv.Revision <= v2.Revision {
		t.Errorf("Delete returned %+v, want v2 with a revision after %d", kv, v2.Revision)
	}
}

func testListPrefix(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	// Created out of order; the nested key is under the prefix too. The
	// sibling shares the prefix minus its slash and must not show up.
	var want []storage.KV
	for _, k := range []string{"c", "a", "sub/x", "b"} {
		want = append(want, mustCreate(t, s, prefix+k, "value of "+k))
	}
	mustCreate(t, s, strings.TrimSuffix(prefix, "/")+"x/sibling", "no")
	slices.SortFunc(want, func(a, b storage.KV) int { return strings.Compare(a.Key, b.Key) })

	res, err := s.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	assertKVs(t, res.Items, want)
	if res.Revision < want[len(want)-1].Revision {
		t.Errorf("Revision = %d, want at least %d", res.Revision, want[len(want)-1].Revision)
	}
	if res.NextKey != "" || res.RemainingItemCount != nil {
		t.Errorf("complete list has NextKey %q, RemainingItemCount %v", res.NextKey, res.RemainingItemCount)
	}

	empty, err := s.List(ctx, prefix+"nothing/", storage.ListOptions{})
	if err != nil || len(empty.Items) != 0 || empty.Revision == 0 {
		t.Errorf("List of an empty prefix = %+v, %v; want no items and a revision", empty, err)
	}
}

// testListPaging pages through a snapshot while writers change the prefix
// underneath: pages read at the first page's revision see none of it.
func testListPaging(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	var snapshot []storage.KV
	for i := range 25 {
		snapshot = append(snapshot, mustCreate(t, s, fmt.Sprintf("%sk%02d", prefix, i), fmt.Sprintf("v%d", i)))
	}

	first, err := s.List(ctx, prefix, storage.ListOptions{Limit: 10})
	if err != nil {
		t.Fatalf("List page 1: %v", err)
	}

	stop, wrote := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { churn(ctx, t, s, prefix, stop, wrote) })
	defer func() { close(stop); wg.Wait() }()
	select {
	case <-wrote: // pages 2 and 3 are read after concurrent writes
	case <-time.After(timeout):
		t.Fatal("writer made no progress")
	}

	pages := []storage.ListResult{first}
	wantRemaining := []int64{15, 5}
	for next := first; next.NextKey != ""; {
		if len(pages) > 3 {
			t.Fatalf("more than 3 pages of 10 for 25 keys")
		}
		next, err = s.List(ctx, prefix, storage.ListOptions{Revision: first.Revision, StartKey: next.NextKey, Limit: 10})
		if err != nil {
			t.Fatalf("List page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, next)
	}
	var items []storage.KV
	for i, p := range pages {
		items = append(items, p.Items...)
		if p.Revision != first.Revision {
			t.Errorf("page %d read at revision %d, want %d", i+1, p.Revision, first.Revision)
		}
		if i < len(wantRemaining) {
			if len(p.Items) != 10 || p.RemainingItemCount == nil || *p.RemainingItemCount != wantRemaining[i] {
				t.Errorf("page %d: %d items, RemainingItemCount %v; want 10 and %d", i+1, len(p.Items), p.RemainingItemCount, wantRemaining[i])
			}
		} else if p.RemainingItemCount != nil {
			t.Errorf("last page RemainingItemCount = %d, want nil", *p.RemainingItemCount)
		}
	}
	assertKVs(t, items, snapshot)
}

// churn updates, deletes and creates keys under prefix until stop closes,
// closing wrote once it has done one of each.
func churn(ctx context.Context, t *testing.T, s storage.Interface, prefix string, stop <-chan struct{}, wrote chan<- struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if _, err := s.GuaranteedUpdate(ctx, fmt.Sprintf("%sk%02d", prefix, i%25), func(cur storage.KV) ([]byte, error) {
			return append(slices.Clone(cur.Value), '!'), nil
		}); err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("churn update: %v", err)
			return
		}
		if _, err := s.Delete(ctx, fmt.Sprintf("%sk%02d", prefix, (i+7)%25), nil); err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("churn delete: %v", err)
			return
		}
		if _, err := s.Create(ctx, fmt.Sprintf("%sk%02d-new%d", prefix, i%25, i), []byte("new")); err != nil {
			t.Errorf("churn create: %v", err)
			return
		}
		if i == 0 {
			close(wrote)
		}
	}
}

func testListPredicate(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	var want []storage.KV
	for i := range 30 {
		parity := []string{"even", "odd"}[i%2]
		kv := mustCreate(t, s, fmt.Sprintf("%sk%02d", prefix, i), parity)
		if parity == "even" {
			want = append(want, kv)
		}
	}
	even := func(kv storage.KV) (bool, error) { return string(kv.Value) == "even", nil }

	all, err := s.List(ctx, prefix, storage.ListOptions{Predicate: even})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	assertKVs(t, all.Items, want)
	if all.NextKey != "" || all.RemainingItemCount != nil {
		t.Errorf("complete filtered list has NextKey %q, RemainingItemCount %v", all.NextKey, all.RemainingItemCount)
	}

	const limit = 4
	var items []storage.KV
	opts := storage.ListOptions{Limit: limit, Predicate: even}
	for page := 1; ; page++ {
		if page > 10 {
			t.Fatal("filtered paging does not end")
		}
		res, err := s.List(ctx, prefix, opts)
		if err != nil {
			t.Fatalf("List page %d: %v", page, err)
		}
		if res.RemainingItemCount != nil {
			t.Errorf("page %d: RemainingItemCount = %d with a predicate, want nil", page, *res.RemainingItemCount)
		}
		if res.NextKey != "" && len(res.Items) != limit {
			t.Errorf("page %d: %d items before the end, want exactly %d", page, len(res.Items), limit)
		}
		if opts.Revision != 0 && res.Revision != opts.Revision {
			t.Errorf("page %d: revision %d, want %d", page, res.Revision, opts.Revision)
		}
		items = append(items, res.Items...)
		if res.NextKey == "" {
			break
		}
		opts.StartKey, opts.Revision = res.NextKey, res.Revision
	}
	assertKVs(t, items, want)

	wantErr := errors.New("predicate failed")
	_, err = s.List(ctx, prefix, storage.ListOptions{Predicate: func(storage.KV) (bool, error) { return false, wantErr }})
	if !errors.Is(err, wantErr) {
		t.Errorf("List with a failing predicate: err = %v, want %v", err, wantErr)
	}
}

func testListFutureRevision(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	mustCreate(t, s, prefix+"a", "v")
	rev := mustCurrentRevision(t, s)
	_, err := s.List(ctx, prefix, storage.ListOptions{Revision: rev + 1_000_000})
	if !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("List at a future revision: err = %v, want ErrFutureRevision", err)
	}
}

// testListInvalidArguments: a prefix must end in "/" and a start key be
// under the prefix; neither is a storage error.
func testListInvalidArguments(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	mustCreate(t, s, prefix+"a", "v")
	for _, tc := range []struct {
		name, prefix string
		opts         storage.ListOptions
	}{
		{"prefix without slash", strings.TrimSuffix(prefix, "/"), storage.ListOptions{}},
		{"start key outside the prefix", prefix, storage.ListOptions{StartKey: "/elsewhere/a"}},
	} {
		res, err := s.List(ctx, tc.prefix, tc.opts)
		if err == nil {
			t.Errorf("List with a %s = %s, want an error", tc.name, formatKVs(res.Items))
			continue
		}
		for _, sentinel := range []error{storage.ErrNotFound, storage.ErrCompacted, storage.ErrFutureRevision, storage.ErrUnavailable} {
			if errors.Is(err, sentinel) {
				t.Errorf("List with a %s: err = %v, want no storage error", tc.name, err)
			}
		}
	}
}

// testWatchFromRevision replays history from a revision, then follows live
// changes.
func testWatchFromRevision(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	from := mustCreate(t, s, prefix+"a", "before").Revision
	key := prefix + "b"
	added := mustCreate(t, s, key, "v1")
	mustCreate(t, s, strings.TrimSuffix(prefix, "/")+"x/b", "sibling") // not under prefix
	modified := mustUpdate(t, s, key, "v2")
	deleted, err := s.Delete(ctx, key, nil)
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}

	ch, err := s.Watch(ctx, prefix, from)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	expectEvent(t, ch, storage.Event{Type: storage.Added, KV: added})
	expectEvent(t, ch, storage.Event{Type: storage.Modified, KV: modified, PrevValue: []byte("v1")})
	expectEvent(t, ch, storage.Event{Type: storage.Deleted, KV: deleted, PrevValue: []byte("v2")})

	live := mustCreate(t, s, prefix+"c", "live")
	expectEvent(t, ch, storage.Event{Type: storage.Added, KV: live})
}

func testWatchFromNow(t *testing.T, s storage.Interface, prefix string) {
	mustCreate(t, s, prefix+"old", "v")
	ch, err := s.Watch(t.Context(), prefix, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// Anything written after Watch returns is seen; nothing before is.
	kv := mustCreate(t, s, prefix+"new", "v")
	expectEvent(t, ch, storage.Event{Type: storage.Added, KV: kv})
}

func testWatchClosesOnCancel(t *testing.T, s storage.Interface, prefix string) {
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := s.Watch(ctx, prefix, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	kv := mustCreate(t, s, prefix+"a", "v")
	expectEvent(t, ch, storage.Event{Type: storage.Added, KV: kv})
	// Events still unread when ctx ends may be delivered or dropped, but
	// the channel must close either way.
	for i := range 10 {
		mustUpdate(t, s, prefix+"a", strconv.Itoa(i))
	}
	cancel()
	expectClosed(t, ch)
}

func testCurrentRevision(t *testing.T, s storage.Interface, prefix string) {
	before := mustCurrentRevision(t, s)
	kv := mustCreate(t, s, prefix+"a", "v")
	after := mustCurrentRevision(t, s)
	if !(before < kv.Revision && kv.Revision <= after) {
		t.Errorf("revisions not monotonic: before %d, write %d, after %d", before, kv.Revision, after)
	}
}

func testHealthy(t *testing.T, s storage.Interface, _ string) {
	if err := s.Healthy(t.Context()); err != nil {
		t.Errorf("Healthy: %v", err)
	}
}

// testCompaction checks reads of compacted history. It must run alone.
func testCompaction(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	mustCreate(t, s, prefix+"a", "v1")
	mustUpdate(t, s, prefix+"a", "v2")
	rev := mustUpdate(t, s, prefix+"a", "v3").Revision
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	for _, r := range []int64{rev, rev - 1} {
		if err := s.Compact(ctx, r); err != nil {
			t.Errorf("Compact(%d) after Compact(%d): %v, want nil", r, rev, err)
		}
	}

	if _, err := s.List(ctx, prefix, storage.ListOptions{Revision: rev - 1}); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("List below the compacted revision: err = %v, want ErrCompacted", err)
	}
	res, err := s.List(ctx, prefix, storage.ListOptions{Revision: rev})
	if err != nil || len(res.Items) != 1 || string(res.Items[0].Value) != "v3" {
		t.Errorf("List at the compacted revision = %+v, %v; want v3", res, err)
	}

	ch, err := s.Watch(ctx, prefix, rev-2)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	e := recv(t, ch)
	if e.Type != storage.Error || !errors.Is(e.Err, storage.ErrCompacted) {
		t.Errorf("watch from a compacted revision got %+v, want an Error event with ErrCompacted", e)
	}
	expectClosed(t, ch)
}

func mustCreate(t *testing.T, s storage.Interface, key, value string) storage.KV {
	t.Helper()
	kv, err := s.Create(t.Context(), key, []byte(value))
	if err != nil {
		t.Fatalf("Create %s: %v", key, err)
	}
	return kv
}

func mustGet(t *testing.T, s storage.Interface, key string) storage.KV {
	t.Helper()
	kv, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return kv
}

func mustUpdate(t *testing.T, s storage.Interface, key, value string) storage.KV {
	t.Helper()
	kv, err := s.GuaranteedUpdate(t.Context(), key, func(storage.KV) ([]byte, error) { return []byte(value), nil })
	if err != nil {
		t.Fatalf("GuaranteedUpdate %s: %v", key, err)
	}
	return kv
}

func mustCurrentRevision(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	rev, err := s.CurrentRevision(t.Context(), "/")
	if err != nil {
		t.Fatalf("CurrentRevision: %v", err)
	}
	return rev
}

func equalKV(a, b storage.KV) bool {
	return a.Key == b.Key && bytes.Equal(a.Value, b.Value) && a.Revision == b.Revision
}

func assertKVs(t *testing.T, got, want []storage.KV) {
	t.Helper()
	if !slices.EqualFunc(got, want, equalKV) {
		t.Errorf("got %d items:\n%s\nwant %d:\n%s", len(got), formatKVs(got), len(want), formatKVs(want))
	}
}

func formatKVs(kvs []storage.KV) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "\t%s=%q@%d\n", kv.Key, kv.Value, kv.Revision)
	}
	return b.String()
}

// recv returns the next change or Error event, skipping Progress events,
// which a backend may send at any time.
func recv(t *testing.T, ch <-chan storage.Event) storage.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed, want an event")
			}
			if e.Type != storage.Progress {
				return e
			}
		case <-deadline:
			t.Fatalf("no watch event within %v", timeout)
		}
	}
}

func expectEvent(t *testing.T, ch <-chan storage.Event, want storage.Event) {
	t.Helper()
	got := recv(t, ch)
	if got.Type != want.Type || !equalKV(got.KV, want.KV) || !bytes.Equal(got.PrevValue, want.PrevValue) || got.Err != nil {
		t.Fatalf("watch event = %s, want %s", formatEvent(got), formatEvent(want))
	}
}

func formatEvent(e storage.Event) string {
	return fmt.Sprintf("%s %s=%q@%d prev=%q err=%v", e.Type, e.KV.Key, e.KV.Value, e.KV.Revision, e.PrevValue, e.Err)
}

// expectClosed drains ch until it is closed.
func expectClosed(t *testing.T, ch <-chan storage.Event) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch channel not closed within %v", timeout)
		}
	}
}

// testWatchRequestProgress: after a write elsewhere, RequestProgress makes
// a watch that saw nothing report a revision at least that write's.
func testWatchRequestProgress(t *testing.T, s storage.Interface, prefix string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Watch(ctx, prefix+"watched/", 0)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := s.Create(ctx, prefix+"elsewhere/k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(timeout)
	for {
		if err := s.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			if e.Type != storage.Progress {
				t.Fatalf("unexpected event %s", formatEvent(e))
			}
			if e.KV.Revision >= kv.Revision {
				return
			}
		case <-deadline:
			t.Fatalf("no progress event at revision >= %d within %v", kv.Revision, timeout)
		}
	}
}

// testTTLExpires: a key written with a TTL is deleted by the store, and the
// watch sees a Deleted event with its last value; keys without a TTL, or
// whose TTL a later write without one removed, stay.
func testTTLExpires(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	ch, err := s.Watch(ctx, prefix, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	withTTL := storage.WithTTL(prefix, ttl)
	// "kept" had a TTL until an update without one made it permanent; it
	// is written before "expiring", so its old expiry comes first.
	if _, err := s.Create(ctx, prefix+"kept", []byte("v1"), withTTL); err != nil {
		t.Fatalf("Create with TTL: %v", err)
	}
	kept := mustUpdate(t, s, prefix+"kept", "v2")
	permanent := mustCreate(t, s, prefix+"permanent", "v")
	expiring, err := s.Create(ctx, prefix+"expiring", []byte("v"), withTTL)
	if err != nil {
		t.Fatalf("Create with TTL: %v", err)
	}
	del := waitDeleted(t, ch, prefix+"expiring")
	if string(del.KV.Value) != "v" || !bytes.Equal(del.PrevValue, []byte("v")) || del.KV.Revision <= expiring.Revision {
		t.Errorf("expiry event = %s, want the last value after revision %d", formatEvent(del), expiring.Revision)
	}
	if _, err := s.Get(ctx, prefix+"expiring"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after expiry: err = %v, want ErrNotFound", err)
	}
	// A later key's expiry proves that the expiry of everything written
	// before it has been processed, "kept"'s old one included.
	if _, err := s.Create(ctx, prefix+"later", []byte("v"), withTTL); err != nil {
		t.Fatalf("Create with TTL: %v", err)
	}
	waitDeleted(t, ch, prefix+"later")
	res, err := s.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	assertKVs(t, res.Items, []storage.KV{kept, permanent})
}

// testTTLKeptOnUpdate: an update with the TTL keeps the key expiring, and
// the Deleted event carries the updated value.
func testTTLKeptOnUpdate(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	ch, err := s.Watch(ctx, prefix, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	key := prefix + "a"
	withTTL := storage.WithTTL(prefix, ttl)
	if _, err := s.Create(ctx, key, []byte("v1"), withTTL); err != nil {
		t.Fatalf("Create with TTL: %v", err)
	}
	if _, err := s.GuaranteedUpdate(ctx, key, func(storage.KV) ([]byte, error) { return []byte("v2"), nil }, withTTL); err != nil {
		t.Fatalf("GuaranteedUpdate with TTL: %v", err)
	}
	if del := waitDeleted(t, ch, key); string(del.KV.Value) != "v2" {
		t.Errorf("expiry event = %s, want the value v2", formatEvent(del))
	}
}

// waitDeleted returns the Deleted event of key, skipping other changes
// under the watched prefix; a Deleted event of any other key fails.
func waitDeleted(t *testing.T, ch <-chan storage.Event, key string) storage.Event {
	t.Helper()
	deadline := time.After(expiryTimeout)
	for {
		select {
		case e, ok := <-ch:
			switch {
			case !ok:
				t.Fatalf("watch closed before %s expired", key)
			case e.Type == storage.Error:
				t.Fatalf("watch failed before %s expired: %v", key, e.Err)
			case e.Type == storage.Deleted && e.KV.Key == key:
				return e
			case e.Type == storage.Deleted:
				t.Fatalf("unexpected delete while waiting for %s to expire: %s", key, formatEvent(e))
			}
		case <-deadline:
			t.Fatalf("%s did not expire within %v", key, expiryTimeout)
		}
	}
}

// testUpdateFromCurrent: an update given the current value (WithCurrent)
// starts from it, and a no-op or an error answered from it are the
// update's answer, the value untouched.
func testUpdateFromCurrent(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	old := mustCreate(t, s, key, "v1")
	calls := 0
	kv, err := s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		calls++
		return slices.Clone(cur.Value), nil
	}, storage.WithCurrent(old))
	if err != nil || !equalKV(kv, old) {
		t.Errorf("no-op from current = %+v, %v; want %+v", kv, err, old)
	}
	want := &apiError{reason: "invalid"}
	if _, err := s.GuaranteedUpdate(ctx, key, func(storage.KV) ([]byte, error) {
		calls++
		return nil, want
	}, storage.WithCurrent(old)); err != want {
		t.Errorf("error from current: err = %v, want the tryUpdate error unchanged", err)
	}
	if calls != 2 {
		t.Errorf("tryUpdate called %d times for a no-op and an error from the current value, want once each", calls)
	}
	kv, err = s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		if !equalKV(cur, old) {
			t.Errorf("tryUpdate got %+v, want the given current %+v", cur, old)
		}
		return []byte("v2"), nil
	}, storage.WithCurrent(old))
	if err != nil || string(kv.Value) != "v2" || kv.Revision <= old.Revision {
		t.Fatalf("update from current = %+v, %v", kv, err)
	}
	if got := mustGet(t, s, key); !equalKV(got, kv) {
		t.Errorf("Get = %+v, want %+v", got, kv)
	}
	// Another key's current value is ignored.
	other := mustCreate(t, s, prefix+"b", "b1")
	kv, err = s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		if string(cur.Value) != "v2" {
			t.Errorf("tryUpdate got %+v, want the stored v2", cur)
		}
		return []byte("v3"), nil
	}, storage.WithCurrent(other))
	if err != nil || string(kv.Value) != "v3" {
		t.Errorf("update given another key's value = %+v, %v", kv, err)
	}
}

// testUpdateFromStaleCurrent: given a stale value, the update answers as
// if it had read the stored one: the write is retried from it, and an
// error or a no-op computed from the stale value is computed again.
func testUpdateFromStaleCurrent(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	stale := mustCreate(t, s, key, "v1")
	mustUpdate(t, s, key, "v2")
	var seen []string
	kv, err := s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		seen = append(seen, string(cur.Value))
		return append(slices.Clone(cur.Value), '+'), nil
	}, storage.WithCurrent(stale))
	if err != nil || string(kv.Value) != "v2+" {
		t.Fatalf("update from stale = %+v, %v; want v2+", kv, err)
	}
	if !slices.Equal(seen, []string{"v1", "v2"}) {
		t.Errorf("tryUpdate saw %q, want the stale then the stored value", seen)
	}
	// An error on the stale value, success on the stored one.
	now := kv
	kv, err = s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		if cur.Revision != now.Revision {
			return nil, &apiError{reason: "conflict"}
		}
		return []byte("v3"), nil
	}, storage.WithCurrent(stale))
	if err != nil || string(kv.Value) != "v3" {
		t.Fatalf("update failing on the stale value = %+v, %v; want v3", kv, err)
	}
	// A no-op on the stale value, a change on the stored one.
	now = kv
	kv, err = s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		if string(cur.Value) == "v1" {
			return slices.Clone(cur.Value), nil
		}
		return []byte("v4"), nil
	}, storage.WithCurrent(stale))
	if err != nil || string(kv.Value) != "v4" || kv.Revision <= now.Revision {
		t.Fatalf("update that is a no-op on the stale value = %+v, %v; want v4", kv, err)
	}
	// A no-op on both: the stored value, unchanged.
	now = kv
	kv, err = s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		return slices.Clone(cur.Value), nil
	}, storage.WithCurrent(stale))
	if err != nil || !equalKV(kv, now) {
		t.Errorf("no-op from stale = %+v, %v; want the stored %+v", kv, err, now)
	}
	// An error on both is the stored value's.
	want := &apiError{reason: "invalid"}
	_, err = s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		if cur.Revision == now.Revision {
			return nil, want
		}
		return nil, &apiError{reason: "stale"}
	}, storage.WithCurrent(stale))
	if err != want {
		t.Errorf("error from stale: err = %v, want the stored value's error", err)
	}
	if got := mustGet(t, s, key); !equalKV(got, now) {
		t.Errorf("Get = %+v, want %+v", got, now)
	}
}

// testUpdateFromDeletedCurrent: given the value of a key deleted since,
// the update is ErrNotFound, whatever tryUpdate made of the value.
func testUpdateFromDeletedCurrent(t *testing.T, s storage.Interface, prefix string) {
	ctx := t.Context()
	key := prefix + "a"
	stale := mustCreate(t, s, key, "v1")
	if _, err := s.Delete(ctx, key, nil); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, fail := range []bool{false, true} {
		_, err := s.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
			if fail {
				return nil, &apiError{reason: "conflict"}
			}
			return []byte("v2"), nil
		}, storage.WithCurrent(stale))
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("update of a deleted key (tryUpdate fails: %v): err = %v, want ErrNotFound", fail, err)
		}
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after updates of a deleted key: err = %v, want ErrNotFound", err)
	}
}
