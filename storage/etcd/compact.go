package etcd

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactRevKey is the etcd key through which the API servers sharing an
// etcd agree on who compacts, kube-apiserver's: its value is the revision
// last compacted to, its version counts the compaction rounds. It is
// outside any --etcd-prefix, as kube's, because a compaction discards the
// history of the whole etcd: clusters sharing one etcd share the rounds.
const CompactRevKey = "compact_rev_key"

// CompactRound is one round of the cluster-wide compaction that
// kube-apiserver's compactor runs. round is the version of CompactRevKey
// this server last saw (0 at first) and rev the revision it read then. In
// one transaction it claims the round (the key's version is still round:
// nobody else compacted since) by writing rev to the key, and if it won it
// compacts to rev, keeping everything written since its previous round.
// A server that lost learns the round another server started and the
// current revision, and tries again at its next tick. It returns the
// round and revision to pass next time, and whether this call compacted.
func (s *Store) CompactRound(ctx context.Context, round, rev int64) (nextRound, nextRev int64, compacted bool, err error) {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(CompactRevKey), "=", round)).
		Then(clientv3.OpPut(CompactRevKey, strconv.FormatInt(rev, 10))).
		Else(clientv3.OpGet(CompactRevKey)).
		Commit()
	if err != nil {
		return round, rev, false, fmt.Errorf("claim compaction round %d: %w", round+1, translate(err))
	}
	current := resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			// Deleted by hand since the compare: start over.
			return 0, current, false, nil
		}
		return kvs[0].Version, current, false, nil
	}
	if rev == 0 {
		// The first round only records where the next one compacts to.
		return round + 1, current, false, nil
	}
	if err := s.Compact(ctx, rev); err != nil {
		return round + 1, current, false, err
	}
	return round + 1, current, true, nil
}
