package etcd

import (
	"context"
	"errors"
	"testing"

	"github.com/corekube/corekube/storage"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestTranslate(t *testing.T) {
	other := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want error // nil: passed through unchanged
	}{
		{rpctypes.ErrCompacted, storage.ErrCompacted},
		{rpctypes.ErrFutureRev, storage.ErrFutureRevision},
		{rpctypes.ErrNoLeader, storage.ErrUnavailable},
		{rpctypes.ErrTimeout, storage.ErrUnavailable},
		{status.Error(codes.Unavailable, "connection refused"), storage.ErrUnavailable},
		{context.DeadlineExceeded, storage.ErrUnavailable},
		{context.Canceled, nil},
		{rpctypes.ErrPermissionDenied, nil},
		{other, nil},
	} {
		got := translate(tc.err)
		if tc.want == nil {
			if got != tc.err {
				t.Errorf("translate(%v) = %v, want it unchanged", tc.err, got)
			}
			continue
		}
		if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("translate(%v) = %v, want it to wrap both %v and the original", tc.err, got, tc.want)
		}
	}
}
