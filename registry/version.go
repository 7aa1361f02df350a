package registry

import (
	"bytes"
	"context"
	"fmt"

	"github.com/corekube/corekube/storage"
	"k8s.io/apimachinery/pkg/runtime"
)

// StorageVersionConverter is implemented by strategies that serve a
// resource whose objects are stored in another version's encoding, the way
// kube-apiserver serves one storage under several group/versions
// (events.k8s.io/v1 Events over the core/v1 ones): the same keys, the same
// revisions, so an object written through one version is read, listed and
// watched through the other. The Store of such a strategy reads and writes
// through a storage that converts every value on its way in and out; the
// rest of the Store (and its watch cache) sees only the served encoding.
type StorageVersionConverter interface {
	valueConverter
	// NewStored returns an empty object of the stored version.
	NewStored() runtime.Object
}

// valueConverter converts values between the encoding a Store works in
// and the one its storage holds: another version's (StorageVersionConverter),
// or another media type (storageCodec).
type valueConverter interface {
	// ToStorage converts the JSON of a served object (as the Store
	// encodes it: kind, apiVersion, no resourceVersion) into the stored
	// form.
	ToStorage(served []byte) ([]byte, error)
	// FromStorage converts a stored value into the served version's JSON
	// encoding, as encode would write it (kind and apiVersion of the served
	// version, no resourceVersion).
	FromStorage(stored []byte) ([]byte, error)
}

// convertingStorage is a storage.Interface whose values are in the Store's
// encoding over one that holds them in another (valueConverter).
type convertingStorage struct {
	storage.Interface
	conv valueConverter
}

// newConvertingStorage wraps st, whose values conv converts.
func newConvertingStorage(st storage.Interface, conv valueConverter) storage.Interface {
	return &convertingStorage{Interface: st, conv: conv}
}

func (c *convertingStorage) from(kv storage.KV) (storage.KV, error) {
	if kv.Value == nil {
		return kv, nil
	}
	v, err := c.conv.FromStorage(kv.Value)
	if err != nil {
		return kv, fmt.Errorf("convert %s from its storage version: %w", kv.Key, err)
	}
	kv.Value = v
	return kv, nil
}

func (c *convertingStorage) to(key string, value []byte) ([]byte, error) {
	v, err := c.conv.ToStorage(value)
	if err != nil {
		return nil, fmt.Errorf("convert %s to its storage version: %w", key, err)
	}
	return v, nil
}

func (c *convertingStorage) Get(ctx context.Context, key string) (storage.KV, error) {
	kv, err := c.Interface.Get(ctx, key)
	if err != nil {
		return kv, err
	}
	return c.from(kv)
}

func (c *convertingStorage) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if pred := opts.Predicate; pred != nil {
		opts.Predicate = func(kv storage.KV) (bool, error) {
			converted, err := c.from(kv)
			if err != nil {
				return false, err
			}
			return pred(converted)
		}
	}
	res, err := c.Interface.List(ctx, prefix, opts)
	if err != nil {
		return res, err
	}
	items := make([]storage.KV, len(res.Items))
	for i, kv := range res.Items {
		if items[i], err = c.from(kv); err != nil {
			return storage.ListResult{}, err
		}
	}
	res.Items = items
	return res, nil
}

func (c *convertingStorage) Create(ctx context.Context, key string, value []byte, opts ...storage.WriteOption) (storage.KV, error) {
	stored, err := c.to(key, value)
	if err != nil {
		return storage.KV{}, err
	}
	kv, err := c.Interface.Create(ctx, key, stored, opts...)
	if err != nil {
		return kv, err
	}
	// The caller knows what it wrote: give it back its own encoding.
	kv.Value = value
	return kv, nil
}

func (c *convertingStorage) GuaranteedUpdate(ctx context.Context, key string, tryUpdate storage.UpdateFunc, opts ...storage.WriteOption) (storage.KV, error) {
	cur := c.current(key, opts)
	var written []byte
	kv, err := c.Interface.GuaranteedUpdate(ctx, key, func(current storage.KV) ([]byte, error) {
		served, err := cur.from(c, current)
		if err != nil {
			return nil, err
		}
		next, err := tryUpdate(served)
		if err != nil {
			return nil, err
		}
		written = next
		if bytes.Equal(next, served.Value) {
			// A no-op in the served form is one in storage too: the
			// stored value goes back unchanged (and keeps its expiry).
			return current.Value, nil
		}
		return c.to(key, next)
	}, opts...)
	if err != nil {
		return kv, err
	}
	if written != nil {
		kv.Value = written
		return kv, nil
	}
	return cur.from(c, kv)
}

func (c *convertingStorage) Delete(ctx context.Context, key string, precondition func(current storage.KV) error, opts ...storage.WriteOption) (storage.KV, error) {
	cur := c.current(key, opts)
	var check func(storage.KV) error
	if precondition != nil {
		check = func(current storage.KV) error {
			served, err := cur.from(c, current)
			if err != nil {
				return err
			}
			return precondition(served)
		}
	}
	kv, err := c.Interface.Delete(ctx, key, check, opts...)
	if err != nil {
		return kv, err
	}
	return cur.from(c, kv)
}

// current returns the caller's copy of key's value (storage.WithCurrent),
// if it gave one, unconverted: the storage below never reads its bytes (it
// hands them to tryUpdate or the precondition, and compares tryUpdate's
// answer with them), so they need not be in its form as long as they are
// recognised when they come back (currentCopy.from), which saves
// converting every update's and delete's starting point.
func (c *convertingStorage) current(key string, opts []storage.WriteOption) currentCopy {
	o := storage.ApplyWriteOptions(opts)
	if o.Current == nil || o.Current.Key != key {
		return currentCopy{}
	}
	return currentCopy{value: o.Current.Value}
}

// currentCopy is the caller's copy of a value, in the Store's form.
type currentCopy struct{ value []byte }

// from is c.from, except that the caller's copy itself (the storage below
// starts from it, and returns it when a delete succeeds or an update is a
// no-op) is already in the Store's form.
func (cur currentCopy) from(c *convertingStorage, kv storage.KV) (storage.KV, error) {
	if len(cur.value) > 0 && len(kv.Value) == len(cur.value) && &kv.Value[0] == &cur.value[0] {
		return kv, nil
	}
	return c.from(kv)
}

// Watch converts every event's values. A value that cannot be converted
// ends the watch with an Error event, as a backend error would.
func (c *convertingStorage) Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan storage.Event, error) {
	in, err := c.Interface.Watch(ctx, prefix, fromRevision)
	if err != nil {
		return nil, err
	}
	// Buffered as the backend's is: a burst costs no goroutine handoff
	// per event.
	out := make(chan storage.Event, 100)
	// Owned by the watch: it ends when the backend's channel closes, which
	// it does when ctx ends.
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Type != storage.Error && ev.Type != storage.Progress {
				var err error
				if ev.KV, err = c.from(ev.KV); err == nil && ev.PrevValue != nil {
					var prev storage.KV
					prev, err = c.from(storage.KV{Key: ev.KV.Key, Value: ev.PrevValue})
					ev.PrevValue = prev.Value
				}
				if err != nil {
					ev = storage.Event{Type: storage.Error, Err: err}
				}
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				// Drain so the backend's sender is never stuck.
				for range in {
				}
				return
			}
			if ev.Type == storage.Error {
				for range in {
				}
				return
			}
		}
	}()
	return out, nil
}
