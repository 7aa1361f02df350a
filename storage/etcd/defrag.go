package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// bbolt never gives freed pages back to the file system: after compactions
// the database file keeps the size of the largest history it ever held,
// and etcd maps the whole file into the process when it opens it (with
// MAP_POPULATE on Linux, every page is read in), so a restarted server's
// resident memory carries every free page. Defragmentation rewrites the
// file with the live pages only. It blocks every write while it runs,
// which costs nothing before the server serves: so the embedded etcd is
// defragmented at start when enough of its file is free, as k3s does for
// its embedded etcd. A running server's file is left to operators
// (etcdctl defrag), as with kube-apiserver.
var (
	// defragMinFree is the free space in the file, in bytes, below which
	// a defragmentation is not worth its time.
	defragMinFree int64 = 64 << 20
	// defragMinFreeShare is the share of the file that must be free.
	defragMinFreeShare = 0.25
)

// defragWorthIt reports whether a database file of size bytes, inUse of
// them live, is worth defragmenting.
func defragWorthIt(size, inUse int64) bool {
	free := size - inUse
	return free >= defragMinFree && float64(free) >= defragMinFreeShare*float64(size)
}

// defragmentIfFragmented defragments the member at endpoint when its
// database file is mostly free (defragWorthIt) and logs what it did.
func defragmentIfFragmented(ctx context.Context, client *clientv3.Client, endpoint string, log *slog.Logger) error {
	before, err := client.Status(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("etcd status: %w", err)
	}
	if !defragWorthIt(before.DbSize, before.DbSizeInUse) {
		return nil
	}
	began := time.Now()
	if _, err := client.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment etcd's database (%d bytes, %d in use): %w", before.DbSize, before.DbSizeInUse, err)
	}
	took := time.Since(began)
	after, err := client.Status(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("etcd status after defragmentation: %w", err)
	}
	log.Info("defragmented etcd's database at start",
		"sizeBefore", before.DbSize, "inUseBefore", before.DbSizeInUse, "sizeAfter", after.DbSize, "took", took.Round(time.Millisecond))
	return nil
}
