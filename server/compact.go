package server

import (
	"context"
	"log/slog"
	"time"

	etcdstore "github.com/corekube/corekube/storage/etcd"
)

// compact discards etcd history periodically, once for all the API servers
// sharing the etcd, as kube-apiserver's compactor: at each tick a server
// tries to claim the next round through etcd (etcdstore.CompactRound);
// the one that does compacts to the revision it saw at its previous tick,
// so at least one interval of history remains for watches and paginated
// lists, and the others see they lost and follow. If the server that
// compacts goes away, another claims the next round within two intervals.
func compact(ctx context.Context, st *etcdstore.Store, interval time.Duration, log *slog.Logger) {
	// A timer from the end of each round, not a ticker: a late tick must
	// not be followed at once by the next one, which would compact away
	// history younger than an interval.
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var round, rev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// Bounded, so that an etcd without quorum delays the next round
		// instead of holding the loop.
		roundCtx, cancel := context.WithTimeout(ctx, time.Minute)
		next, nextRev, compacted, err := st.CompactRound(roundCtx, round, rev)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("etcd compaction failed", "round", round+1, "revision", rev, "err", err)
		case compacted:
			log.Debug("etcd compacted", "round", next, "revision", rev)
		}
		round, rev = next, nextRev
		timer.Reset(interval)
	}
}
