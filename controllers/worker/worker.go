// Package worker is the runtime the controllers, the scheduler and the node
// agent share for their work queues and periodic passes: a Loop drains a
// rate-limited queue with a few goroutines (Get, the sync, then Forget or
// AddRateLimited, then Done), stops when its context ends, and survives a
// panic in the sync by logging it with the item and its stack and retrying
// the item later; Every runs a pass periodically with jitter, also
// surviving panics. Under `corekube up` every loop shares the API server's
// process, so a panic in one must not take the server down.
//
// It plays the part of controller-runtime's controller and of
// apimachinery's wait and runtime.HandleCrash for corekube; the agent
// imports it too, which is why it is not under controllers/internal.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// ErrStarted is returned by a second Start or Run of the same Loop.
var ErrStarted = errors.New("already started")

// Result tells a Loop what to do with an item whose sync succeeded.
type Result struct {
	// Requeue adds the item again after RequeueAfter (at once when it is
	// zero), after its failures were forgotten.
	Requeue      bool
	RequeueAfter time.Duration
}

// After is the Result that syncs the item again after d.
func After(d time.Duration) Result { return Result{Requeue: true, RequeueAfter: max(d, 0)} }

// Loop drains Queue with Workers goroutines calling Sync. A nil error
// forgets the item's failures (and requeues it when the Result asks); an
// error while the context has not ended is reported to OnError and the
// item is retried with the queue's rate limiter; an error once the context
// ended is dropped, since the queue is shutting down. A Loop runs once.
type Loop[T comparable] struct {
	// Name identifies the loop in the logs of a recovered panic.
	Name    string
	Queue   workqueue.TypedRateLimitingInterface[T]
	Workers int
	Sync    func(ctx context.Context, item T) (Result, error)
	// OnError reports a failed sync before its retry; nil logs it at Warn.
	OnError func(item T, err error)
	// Log receives the panics (and failures when OnError is nil);
	// nil is slog.Default().
	Log *slog.Logger

	started atomic.Bool
}

// Start starts the workers, registered in wg, and returns; the queue is
// shut down when ctx ends, which ends them. It returns ErrStarted when the
// Loop was started before.
func (l *Loop[T]) Start(ctx context.Context, wg *sync.WaitGroup) error {
	if !l.started.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: %w", l.Name, ErrStarted)
	}
	stop := context.AfterFunc(ctx, l.Queue.ShutDown)
	n := max(l.Workers, 1)
	var workers sync.WaitGroup
	workers.Add(n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer workers.Done()
			for l.processNext(ctx) {
			}
		}()
	}
	// The queue may have been shut down by its owner before ctx ended:
	// the AfterFunc is then released once the workers are gone.
	wg.Add(1)
	go func() {
		defer wg.Done()
		workers.Wait()
		stop()
	}()
	return nil
}

// Run starts the workers and blocks until ctx ends and every worker has
// returned.
func (l *Loop[T]) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if err := l.Start(ctx, &wg); err != nil {
		return err
	}
	wg.Wait()
	return nil
}

func (l *Loop[T]) logger() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.Default()
}

// processNext handles one item; false means the queue was shut down.
func (l *Loop[T]) processNext(ctx context.Context) bool {
	item, shutdown := l.Queue.Get()
	if shutdown {
		return false
	}
	defer l.Queue.Done(item)
	res, err, panicked := l.sync(ctx, item)
	switch {
	case panicked:
		l.Queue.AddRateLimited(item)
	case err == nil:
		l.Queue.Forget(item)
		if res.Requeue {
			l.Queue.AddAfter(item, res.RequeueAfter)
		}
	case ctx.Err() != nil:
	default:
		if l.OnError != nil {
			l.OnError(item, err)
		} else {
			l.logger().Warn("sync failed, requeuing", "loop", l.Name, "item", item, "err", err)
		}
		l.Queue.AddRateLimited(item)
	}
	return true
}

// sync calls Sync, turning a panic into a log line keyed by item.
func (l *Loop[T]) sync(ctx context.Context, item T) (res Result, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			LogPanic(l.logger(), l.Name, item, r)
		}
	}()
	res, err = l.Sync(ctx, item)
	return res, err, false
}

// LogPanic logs a recovered panic r with the item being processed and the
// stack, as apimachinery's runtime.HandleCrash does. It is for loops that
// recover by themselves (Recover) rather than through a Loop.
func LogPanic(log *slog.Logger, loop string, item any, r any) {
	log.Error("recovered from a panic; the item is retried later",
		"loop", loop, "item", item, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// Recover, deferred, recovers a panic in the current goroutine and logs it
// with item (LogPanic), then calls onPanic when it is not nil (to requeue
// the item). It is for loops whose queue is not a workqueue.
func Recover(log *slog.Logger, loop string, item any, onPanic func()) {
	if r := recover(); r != nil {
		LogPanic(log, loop, item, r)
		if onPanic != nil {
			onPanic()
		}
	}
}

// Every calls f at once and then again each period, jittered by up to
// jitter*period (wait.Jitter; 0 means none), measured from the end of one
// call to the start of the next, until ctx ends; it returns then. A panic
// in f is logged (LogPanic) and the next call comes on schedule.
func Every(ctx context.Context, clk clock.Clock, log *slog.Logger, name string, period time.Duration, jitter float64, f func(context.Context)) {
	if log == nil {
		log = slog.Default()
	}
	for {
		func() {
			defer Recover(log, name, nil, nil)
			f(ctx)
		}()
		d := period
		if jitter > 0 {
			d = wait.Jitter(period, jitter)
		}
		t := clk.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Once guards a component against being started twice, as the
// controllers' Start methods require.
type Once struct{ started atomic.Bool }

// Start returns nil the first time and an error naming component after.
func (o *Once) Start(component string) error {
	if !o.started.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: %w", component, ErrStarted)
	}
	return nil
}

// Run is the frame of a long-running Start: it starts the component once
// (Start's error otherwise), then runs body with a context that ends when
// Run returns and a WaitGroup for the goroutines body starts. However body
// returns, Run cancels that context, calls shutDown (which shuts the
// queues, so that their workers return) and waits for those goroutines:
// nothing body started outlives Run.
func (o *Once) Run(ctx context.Context, component string, shutDown func(), body func(ctx context.Context, wg *sync.WaitGroup) error) error {
	if err := o.Start(component); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		shutDown()
		wg.Wait()
	}()
	return body(ctx, &wg)
}

// NoResult adapts a sync that never asks for a requeue of its own.
func NoResult[T comparable](sync func(context.Context, T) error) func(context.Context, T) (Result, error) {
	return func(ctx context.Context, item T) (Result, error) { return Result{}, sync(ctx, item) }
}

// Tick calls f each period on a ticker (fixed rate, the first call one
// period after the start, no jitter) until ctx ends; it returns then. A
// panic in f is logged (LogPanic) and the next tick calls it again.
func Tick(ctx context.Context, clk clock.WithTicker, log *slog.Logger, name string, period time.Duration, f func(context.Context)) {
	if log == nil {
		log = slog.Default()
	}
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			func() {
				defer Recover(log, name, nil, nil)
				f(ctx)
			}()
		}
	}
}
