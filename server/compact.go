package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/corekube/corekube/storage"
)

// compact discards etcd history periodically, as kube-apiserver does: at
// each tick it compacts to the revision it saw at the previous tick, so at
// least one interval of history remains for watches and paginated lists.
// Several servers on one etcd may all do it; compacting an already
// compacted revision is harmless.
func compact(ctx context.Context, st storage.Interface, interval time.Duration, log *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var previous int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if previous > 0 {
			if err := st.Compact(ctx, previous); err != nil && ctx.Err() == nil {
				log.Warn("etcd compaction failed", "revision", previous, "err", err)
			}
		}
		rev, err := st.CurrentRevision(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("etcd compaction: reading the revision failed", "err", err)
			}
			continue
		}
		previous = rev
	}
}
