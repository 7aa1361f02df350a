package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/corekube/corekube/controllers/worker"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// seriesWindow is how long after its last occurrence a repeated event
// keeps counting into the same series (kube's events finishTime).
const seriesWindow = 6 * time.Minute

// recorder writes Events through events.k8s.io/v1 the way
// kube-scheduler's recorder does (eventTime, reportingComponent, reportingInstance,
// action; repeats counted in series), through a bounded queue and a few
// owned workers. Writes for one event always go to the same worker, so a
// series update never overtakes its event's creation.
type recorder struct {
	client     kubernetes.Interface
	controller string
	instance   string
	clock      clock.WithTicker
	log        *slog.Logger
	flushEvery time.Duration
	queues     []chan eventOp

	mu     sync.Mutex
	series map[eventKey]*seriesState
}

// eventKey identifies repeats of one event.
type eventKey struct {
	uid                      types.UID
	kind, namespace, name    string
	typ, reason, action, msg string
}

type seriesState struct {
	event   *v1.Event // as first written
	count   int32
	last    time.Time
	written int32 // the count the server has
}

// eventOp is one write: a new event, or a series count for an existing one.
type eventOp struct {
	event  *v1.Event // the event; Series set for a count update
	update bool
	key    eventKey
}

func newRecorder(client kubernetes.Interface, cfg Config) *recorder {
	host, _ := os.Hostname()
	r := &recorder{
		client:     client,
		controller: cfg.SchedulerName,
		instance:   cfg.SchedulerName + "-" + host,
		clock:      cfg.Clock,
		log:        cfg.Logger,
		flushEvery: cfg.EventSeriesFlush,
		series:     map[eventKey]*seriesState{},
	}
	per := max(cfg.EventQueueSize/cfg.EventWorkers, 1)
	for range cfg.EventWorkers {
		r.queues = append(r.queues, make(chan eventOp, per))
	}
	return r
}

// run writes events until ctx ends; wg tracks its goroutines.
func (r *recorder) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, q := range r.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case op := <-q:
					r.writeGuarded(ctx, op)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		worker.Tick(ctx, r.clock, r.log, "scheduler-events-flush", r.flushEvery, func(context.Context) { r.flush() })
	}()
}

// writeGuarded is write surviving a panic in it: the event is lost (and
// logged), the writer goes on.
func (r *recorder) writeGuarded(ctx context.Context, op eventOp) {
	defer worker.Recover(r.log, "scheduler-events", nil, nil)
	r.write(ctx, op)
}

// Eventf records an event about obj. aggregate counts repeats of the same
// event (same object, type, reason, action and message) within
// seriesWindow into one Event's series instead of writing new ones.
func (r *recorder) Eventf(obj *v1.Pod, typ, reason, action string, aggregate bool, format string, args ...any) {
	r.eventf(obj, nil, typ, reason, action, aggregate, format, args...)
}

// EventfRelated is Eventf with a second object the event is about (the
// preemptor of a Preempted event).
func (r *recorder) EventfRelated(obj, related *v1.Pod, typ, reason, action string, format string, args ...any) {
	r.eventf(obj, related, typ, reason, action, false, format, args...)
}

func (r *recorder) eventf(obj, related *v1.Pod, typ, reason, action string, aggregate bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	now := r.clock.Now()
	ref := v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: obj.Namespace, Name: obj.Name,
		UID: obj.UID, ResourceVersion: obj.ResourceVersion,
	}
	key := eventKey{uid: obj.UID, kind: ref.Kind, namespace: ref.Namespace, name: ref.Name, typ: typ, reason: reason, action: action, msg: msg}
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ref.Namespace},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		EventTime:           metav1.NewMicroTime(now),
		Action:              action,
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
	}
	if related != nil {
		ev.Related = &v1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: related.Namespace, Name: related.Name,
			UID: related.UID, ResourceVersion: related.ResourceVersion,
		}
	}
	if aggregate {
		r.mu.Lock()
		if st := r.series[key]; st != nil && now.Sub(st.last) < seriesWindow {
			st.count++
			st.last = now
			var op *eventOp
			if st.count == 2 {
				// The first repeat is written at once, later ones by flush.
				op = r.seriesOp(key, st)
				st.written = st.count
			}
			r.mu.Unlock()
			if op != nil {
				r.enqueue(*op)
			}
			return
		}
		r.series[key] = &seriesState{event: ev.DeepCopy(), count: 1, last: now, written: 1}
		r.mu.Unlock()
	}
	r.enqueue(eventOp{event: ev, key: key})
}

// seriesOp is the write of st's count; r.mu is held.
func (r *recorder) seriesOp(key eventKey, st *seriesState) *eventOp {
	ev := st.event.DeepCopy()
	ev.Series = &v1.EventSeries{Count: st.count, LastObservedTime: metav1.NewMicroTime(st.last)}
	return &eventOp{event: ev, update: true, key: key}
}

func (r *recorder) enqueue(op eventOp) {
	h := fnv.New32a()
	h.Write([]byte(op.event.Namespace + "/" + op.event.Name))
	select {
	case r.queues[h.Sum32()%uint32(len(r.queues))] <- op:
	default:
		r.log.Debug("event queue full, dropping event", "reason", op.event.Reason, "object", op.event.InvolvedObject.Name)
	}
}

// flush writes the counts of series that grew and forgets series that
// ended.
func (r *recorder) flush() {
	now := r.clock.Now()
	var ops []eventOp
	r.mu.Lock()
	for key, st := range r.series {
		if st.count > st.written {
			ops = append(ops, *r.seriesOp(key, st))
			st.written = st.count
		}
		if now.Sub(st.last) >= seriesWindow {
			delete(r.series, key)
		}
	}
	r.mu.Unlock()
	for _, op := range ops {
		r.enqueue(op)
	}
}

func (r *recorder) write(ctx context.Context, op eventOp) {
	// Through events.k8s.io/v1, as kube-scheduler's client-go events
	// recorder writes; the server stores them as core/v1 Events too.
	events := r.client.EventsV1().Events(op.event.Namespace)
	if op.update {
		patch, err := json.Marshal(map[string]any{"series": op.event.Series})
		if err != nil {
			return
		}
		_, err = events.Patch(ctx, op.event.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			r.markWritten(op)
			return
		}
		if !apierrors.IsNotFound(err) {
			r.log.Debug("event series update failed", "event", op.event.Name, "err", err)
			return
		}
		// The event is gone (or its creation was dropped): write it whole.
	}
	ev := toEventsV1(op.event)
	ev.ResourceVersion = ""
	if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		r.log.Debug("event write failed", "reason", ev.Reason, "object", ev.Regarding.Name, "err", err)
		return
	}
	r.markWritten(op)
}

// toEventsV1 is the events.k8s.io/v1 form of an event the recorder built:
// the fields it sets, under their events.k8s.io names.
func toEventsV1(ev *v1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:          *ev.ObjectMeta.DeepCopy(),
		EventTime:           ev.EventTime,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
		Action:              ev.Action,
		Reason:              ev.Reason,
		Regarding:           ev.InvolvedObject,
		Note:                ev.Message,
		Type:                ev.Type,
	}
	if ev.Related != nil {
		related := *ev.Related
		out.Related = &related
	}
	if ev.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return out
}

func (r *recorder) markWritten(op eventOp) {
	if op.event.Series == nil {
		return
	}
	r.mu.Lock()
	if st := r.series[op.key]; st != nil && st.written < op.event.Series.Count {
		st.written = op.event.Series.Count
	}
	r.mu.Unlock()
}
