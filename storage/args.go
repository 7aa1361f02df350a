package storage

import (
	"fmt"
	"strings"
)

// The checks and error contexts below are part of the contract, not of a
// backend: every implementation calls them, so that the backends cannot
// drift apart in what they accept or in how their errors read.

// ListStart checks the arguments of a List and returns the key the list
// starts at (inclusive): opts.StartKey, or prefix when it is unset.
// prefix must end in "/" and StartKey must be under it.
func ListStart(prefix string, opts ListOptions) (string, error) {
	if !strings.HasSuffix(prefix, "/") {
		return "", fmt.Errorf("list %s: prefix must end in %q", prefix, "/")
	}
	if opts.StartKey == "" {
		return prefix, nil
	}
	if !strings.HasPrefix(opts.StartKey, prefix) {
		return "", fmt.Errorf("list %s: start key %s is not under the prefix", prefix, opts.StartKey)
	}
	return opts.StartKey, nil
}

// ListError wraps err, the failure of a List of prefix with opts, with
// the list and the revision it was asked at.
func ListError(prefix string, opts ListOptions, err error) error {
	if opts.Revision != 0 {
		return fmt.Errorf("list %s at revision %d: %w", prefix, opts.Revision, err)
	}
	return fmt.Errorf("list %s: %w", prefix, err)
}

// KeyAfter returns the smallest key greater than key: where the page of a
// list after the one that ended at key starts (ListResult.NextKey).
func KeyAfter(key string) string { return key + "\x00" }

// WatchError is the Error event that ends a watch of prefix from revision
// from, carrying err.
func WatchError(prefix string, from int64, err error) Event {
	return Event{Type: Error, Err: fmt.Errorf("watch %s from revision %d: %w", prefix, from, err)}
}
