package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// errLeaderElectionLost is what a leader returns once its lease is gone:
// the process exits non-zero, as kube-scheduler's and
// kube-controller-manager's do, rather than run on beside a new leader.
var errLeaderElectionLost = errors.New("leaderelection lost")

// leaderElection is kube's --leader-elect options for a component that
// two or more processes may run at once: only the holder of the Lease
// namespace/name runs the loops.
type leaderElection struct {
	enabled       bool
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	resourceLock  string
	namespace     string
	name          string
	// watchdog, when set, is the leaderElection health check fed by
	// the elector.
	watchdog *leaderelection.HealthzAdaptor
}

// leaderHealthTimeout is how long past its lease duration a leader may go
// without renewing before its leaderElection health check fails: kube's
// 20 s (kube-scheduler and kube-controller-manager).
const leaderHealthTimeout = 20 * time.Second

// addFlags registers kube's leader election flags, with kube's defaults
// and lease name as the default resource name.
func (o *leaderElection) addFlags(fs *pflag.FlagSet, name string) {
	fs.BoolVar(&o.enabled, "leader-elect", true, "Start a leader election client and gain leadership before running the loops; enable when running replicated components for high availability")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long non-leader candidates wait after observing a leadership renewal before trying to acquire leadership")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the acting leader retries refreshing leadership before it stops leading; at most the lease duration")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How long clients wait between attempts to acquire and renew leadership")
	fs.StringVar(&o.resourceLock, "leader-elect-resource-lock", resourcelock.LeasesResourceLock, "The type of resource object used for locking during leader election; only leases is supported, as in kube 1.32")
	fs.StringVar(&o.namespace, "leader-elect-resource-namespace", "kube-system", "Namespace of the Lease used for leader election")
	fs.StringVar(&o.name, "leader-elect-resource-name", name, "Name of the Lease used for leader election")
}

// electionIdentity is kube's holder identity: the host name, an
// underscore and a random UUID, so that two processes on one host differ.
func electionIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// runElected runs loops while this process, as identity, holds the lease
// of o, until ctx ends. Losing the lease cancels the loops at once and
// returns errLeaderElectionLost once they have returned. When ctx ends
// (SIGTERM), the loops stop first and the lease is released after them
// (ReleaseOnCancel), so that a successor takes over at once and never
// runs beside a loop still finishing its work.
func runElected(ctx context.Context, cfg *rest.Config, o leaderElection, identity string, loops []loop, log *slog.Logger) error {
	// Like kube's components, record "<identity> became leader" (and
	// "stopped leading") as LeaderElection events on the Lease, which is
	// how an admin sees a takeover with kubectl get events.
	events, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("leader election events: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: o.name})
	// The lock has a client of its own whose requests time out well
	// within the renew deadline, so that one hung request does not cost
	// the lease.
	lock, err := resourcelock.NewFromKubeconfig(o.resourceLock, o.namespace, o.name,
		resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: recorder},
		cfg, o.renewDeadline)
	if err != nil {
		return fmt.Errorf("--leader-elect-resource-lock: %w", err)
	}
	// The elector runs on a context of its own, ended only once the
	// loops have returned (or before it ever led, when ctx ends first):
	// ending it releases the lease.
	electCtx, stopElection := context.WithCancel(context.Background())
	defer stopElection()
	started := make(chan struct{})
	loopsDone := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.name,
		WatchDog:        o.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				defer close(loopsDone)
				close(started)
				log.Info("leading", "lease", o.namespace+"/"+o.name, "identity", identity)
				// The loops end with the lease (leading) or with the
				// process (ctx), whichever is first.
				loopsCtx, cancel := context.WithCancel(leading)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				wait := runLoops(loopsCtx, loops)
				<-loopsCtx.Done()
				wait()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					log.Error("leaderelection lost", "lease", o.namespace+"/"+o.name, "identity", identity)
				}
			},
			OnNewLeader: func(holder string) {
				if holder != identity {
					log.Info("new leader elected", "lease", o.namespace+"/"+o.name, "leader", holder)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-started:
				<-loopsDone
			default:
			}
		case <-started:
			<-loopsDone
		}
		stopElection()
	}()
	// Caches first, as kube-scheduler: a standby that takes over acts at
	// once on a current view instead of listing everything then.
	if err := warmLoops(ctx, loops, identity, log); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	log.Info("attempting to acquire leader lease", "lease", o.namespace+"/"+o.name, "identity", identity)
	elector.Run(electCtx)
	if ctx.Err() != nil {
		// A clean stop: the loops returned before the lease was released.
		return nil
	}
	// Lost: the loops' context ended with the lease. Give them a moment
	// to return, but exit regardless: the process must not outlive its
	// lease for long, whatever a loop is blocked on.
	select {
	case <-started:
		select {
		case <-loopsDone:
		case <-time.After(lostLeaseGrace):
			log.Error("loops still running after the lease was lost; exiting", "grace", lostLeaseGrace)
		}
	default:
	}
	return errLeaderElectionLost
}

// lostLeaseGrace bounds how long a process that lost its lease waits for
// its loops to return before it exits anyway.
const lostLeaseGrace = 5 * time.Second

// warmLoops runs the warm step of every loop that has one, in parallel,
// and waits for them (until ctx ends: a process stopped while warming
// returns nil).
func warmLoops(ctx context.Context, loops []loop, identity string, log *slog.Logger) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, l := range loops {
		if l.warm == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.warm(ctx); err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", l.name, err))
				mu.Unlock()
				return
			}
			log.Info("caches synced", "loop", l.name, "identity", identity)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
