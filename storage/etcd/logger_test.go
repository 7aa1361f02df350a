package etcd

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestZapLoggerPassesOnlyErrors(t *testing.T) {
	var buf bytes.Buffer
	lg := zapLogger(slog.New(slog.NewTextHandler(&buf, nil))).Named("raft").With(zap.String("member", "m1"))
	lg.Info("chatty")
	lg.Warn("chatty too")
	lg.Error("disk full", zap.Error(errors.New("ENOSPC")), zap.Int("attempt", 2))

	out := buf.String()
	if strings.Contains(out, "chatty") {
		t.Errorf("info or warn logged:\n%s", out)
	}
	for _, want := range []string{"level=ERROR", `msg="disk full"`, "etcd.member=m1", "etcd.logger=raft", "etcd.attempt=2", "etcd.error=ENOSPC"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}
