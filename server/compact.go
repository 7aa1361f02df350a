package server

import (
	"context"
	"log/slog"
	"time"

	etcdstore "github.com/corekube/corekube/storage/etcd"
)

// compactionSteps is how many rounds the compactor tries per interval.
// kube-apiserver's compactor runs one round an interval and compacts to
// the revision it saw at its previous round, so it keeps between one and
// two intervals of history: under a steady write rate (a bulk load, 500
// lease renewals a second at 5,000 nodes) etcd's file grows to hold up to
// two intervals of writes, and the file keeps that size (its pages stay
// mapped) after the writes slow down. Rounds every interval/5, each
// compacting to the newest revision seen at least an interval before,
// keep between one and 1.2 intervals: the same guarantee to watches and
// paginated lists (an interval of history at least), 40% less history at
// most.
const compactionSteps = 5

// compact discards etcd history periodically, once for all the API servers
// sharing the etcd, as kube-apiserver's compactor: at each tick a server
// tries to claim the next round through etcd (etcdstore.CompactRound);
// the one that does compacts to the newest revision it saw at least an
// interval before, so at least one interval of history remains for
// watches and paginated lists, and the others see they lost and follow.
// If the server that compacts goes away, another claims the next round at
// its next tick.
func compact(ctx context.Context, st *etcdstore.Store, interval time.Duration, log *slog.Logger) {
	step := max(interval/compactionSteps, time.Millisecond)
	// A timer from the end of each round, not a ticker: rounds that fell
	// behind do not run back to back.
	timer := time.NewTimer(step)
	defer timer.Stop()
	var round int64
	var seen revisionLog
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		target := seen.newestAtOrBefore(now.Add(-interval))
		// Bounded, so that an etcd without quorum delays the next round
		// instead of holding the loop.
		roundCtx, cancel := context.WithTimeout(ctx, time.Minute)
		next, current, compacted, err := st.CompactRound(roundCtx, round, target)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("etcd compaction failed", "round", round+1, "revision", target, "err", err)
		case compacted:
			log.Debug("etcd compacted", "round", next, "revision", target)
		}
		if err == nil {
			seen.add(now, current)
		}
		round = next
		timer.Reset(step)
	}
}

// revisionLog is the revisions the compactor saw and when, oldest first,
// to find the newest one at least an interval old.
type revisionLog []revisionAt

type revisionAt struct {
	at  time.Time
	rev int64
}

func (l *revisionLog) add(at time.Time, rev int64) {
	*l = append(*l, revisionAt{at: at, rev: rev})
}

// newestAtOrBefore returns the newest revision seen at or before cutoff (0
// if none) and forgets the ones before it, which no later cutoff needs.
func (l *revisionLog) newestAtOrBefore(cutoff time.Time) int64 {
	entries := *l
	i := 0
	for i < len(entries) && !entries[i].at.After(cutoff) {
		i++
	}
	if i == 0 {
		return 0
	}
	*l = entries[i-1:]
	return entries[i-1].rev
}
