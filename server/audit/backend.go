package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Backend takes events; Process never blocks for long.
type Backend interface {
	Process(ev *Event)
}

// DefaultBufferSize is how many events wait to be written before new ones
// are dropped (kube's --audit-log-batch-buffer-size).
const DefaultBufferSize = 10000

// LogBackend writes events as JSON lines from one goroutine, fed through a
// bounded buffer: a request only ever waits for a channel send that does
// not block; when the writer falls that far behind, events are dropped and
// counted (Dropped), as kube's batching backend does.
type LogBackend struct {
	out    io.Writer
	log    *slog.Logger
	events chan *Event

	total, dropped, failed atomic.Int64

	stopOnce sync.Once
	done     chan struct{}
}

// NewLogBackend returns a backend writing to out, buffering up to size
// events (DefaultBufferSize when size <= 0). Run writes them.
func NewLogBackend(out io.Writer, size int, log *slog.Logger) *LogBackend {
	if size <= 0 {
		size = DefaultBufferSize
	}
	return &LogBackend{out: out, log: log, events: make(chan *Event, size), done: make(chan struct{})}
}

// Process queues ev, or drops it when the buffer is full.
func (b *LogBackend) Process(ev *Event) {
	b.total.Add(1)
	select {
	case b.events <- ev:
	default:
		if n := b.dropped.Add(1); n&(n-1) == 0 {
			// At powers of two only: a full buffer must not flood the log.
			b.log.Warn("audit buffer full: events dropped", "dropped", n)
		}
	}
}

// Total is how many events were given to Process.
func (b *LogBackend) Total() int64 { return b.total.Load() }

// Dropped is how many events were dropped because the buffer was full.
func (b *LogBackend) Dropped() int64 { return b.dropped.Load() }

// Failed is how many events could not be encoded or written.
func (b *LogBackend) Failed() int64 { return b.failed.Load() }

// Run writes queued events until ctx ends, then writes what is still
// queued and returns. Events that wait are written together, one write
// per batch.
func (b *LogBackend) Run(ctx context.Context) {
	defer close(b.done)
	var buf bytes.Buffer
	write := func(ev *Event) {
		data, err := json.Marshal(ev)
		if err != nil {
			b.failed.Add(1)
			b.log.Error("encode audit event", "auditID", ev.AuditID, "err", err)
			return
		}
		buf.Write(data)
		buf.WriteByte('\n')
	}
	flush := func() {
		if buf.Len() == 0 {
			return
		}
		if _, err := b.out.Write(buf.Bytes()); err != nil {
			b.failed.Add(1)
			b.log.Error("write audit events", "err", err)
		}
		buf.Reset()
	}
	for {
		select {
		case ev := <-b.events:
			write(ev)
			for more := true; more && buf.Len() < 1<<20; {
				select {
				case ev := <-b.events:
					write(ev)
				default:
					more = false
				}
			}
			flush()
		case <-ctx.Done():
			for {
				select {
				case ev := <-b.events:
					write(ev)
				default:
					flush()
					return
				}
			}
		}
	}
}

// Wait waits until Run has returned.
func (b *LogBackend) Wait() { <-b.done }

// The backend's counters under kube's names.
var (
	auditEventDesc = prometheus.NewDesc("apiserver_audit_event_total",
		"[ALPHA] Counter of audit events generated and sent to the audit backend.", nil, nil)
	auditErrorDesc = prometheus.NewDesc("apiserver_audit_error_total",
		"[ALPHA] Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
		[]string{"plugin"}, nil)
)

// Describe implements prometheus.Collector: the backend is registered
// with the server's metrics registry and read at every scrape.
func (b *LogBackend) Describe(ch chan<- *prometheus.Desc) {
	ch <- auditEventDesc
	ch <- auditErrorDesc
}

// Collect implements prometheus.Collector.
func (b *LogBackend) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(auditEventDesc, prometheus.CounterValue, float64(b.Total()))
	ch <- prometheus.MustNewConstMetric(auditErrorDesc, prometheus.CounterValue, float64(b.Dropped()+b.Failed()), "log")
}
