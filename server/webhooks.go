package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/admission/webhook"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/server/audit"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// webhookAdmission is the dynamic admission of a server: the dispatcher
// (its Mutating and Validating plugins go into the chain) and the stores
// of the configurations it follows.
type webhookAdmission struct {
	dispatcher           *webhook.Dispatcher
	mutating, validating *registry.Store
	log                  *slog.Logger
}

// newWebhookAdmission returns the dispatcher wired to the namespace cache
// (for namespaceSelectors) and to the registry's warnings. ns is read at
// request time: the namespace Store is built after the chain.
func newWebhookAdmission(ns func() *registry.Store, log *slog.Logger, metrics *admission.Metrics) *webhookAdmission {
	if log == nil {
		log = slog.Default()
	}
	d := webhook.New(webhook.Config{
		NamespaceLabels: func(ctx context.Context, name string) (map[string]string, error) {
			obj, err := ns().GetCached(ctx, "", name)
			if err != nil {
				return nil, err
			}
			return obj.(*v1.Namespace).Labels, nil
		},
		Warn:     registry.AddWarning,
		Annotate: audit.AddAnnotation,
		Logger:   log,
		Metrics:  metrics,
	})
	return &webhookAdmission{dispatcher: d, log: log}
}

// run follows both kinds of configuration until ctx ends.
func (w *webhookAdmission) run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(ctx, w.validating, w.log, func(objs []runtime.Object) {
			configs := make([]*admissionregistrationv1.ValidatingWebhookConfiguration, len(objs))
			for i, o := range objs {
				configs[i] = o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			}
			w.dispatcher.SetValidating(webhook.CompileValidating(configs))
		})
	}()
	follow(ctx, w.mutating, w.log, func(objs []runtime.Object) {
		configs := make([]*admissionregistrationv1.MutatingWebhookConfiguration, len(objs))
		for i, o := range objs {
			configs[i] = o.(*admissionregistrationv1.MutatingWebhookConfiguration)
		}
		w.dispatcher.SetMutating(webhook.CompileMutating(configs))
	})
	<-done
}

// follow watches every object of store through its watch cache and hands
// apply the whole current set after each burst of events: never a set
// from before the initial events ended (the previous set stays in force
// until then), and always within an instant of a change.
func follow(ctx context.Context, store *registry.Store, log *slog.Logger, apply func([]runtime.Object)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := followOnce(ctx, store, apply); err != nil && ctx.Err() == nil {
			log.Warn("watch restarting", "resource", store.Info().Resource, "err", err, "after", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		// The watch ended cleanly (the server cuts watches now and then):
		// watch again, after a pause that keeps a stopping cache from
		// making this spin.
		backoff = 100 * time.Millisecond
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

func followOnce(ctx context.Context, store *registry.Store, apply func([]runtime.Object)) error {
	w, err := store.Watch(ctx, "", &metainternalversion.ListOptions{
		Watch:                true,
		SendInitialEvents:    ptr.To(true),
		AllowWatchBookmarks:  true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	items := map[string]runtime.Object{}
	synced := false
	for {
		ev, ok := w.Next()
		if !ok {
			return nil
		}
		switch ev.Type {
		case apiwatch.Added, apiwatch.Modified, apiwatch.Deleted:
			obj, err := ev.Decoded()
			if err != nil {
				return err
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				return err
			}
			if ev.Type == apiwatch.Deleted {
				delete(items, m.GetName())
			} else {
				items[m.GetName()] = obj
			}
		case apiwatch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				synced = true
			}
		case apiwatch.Error:
			return errWatchEnded
		}
		if synced && !w.Ready() {
			objs := make([]runtime.Object, 0, len(items))
			for _, o := range items {
				objs = append(objs, o)
			}
			apply(objs)
		}
	}
}

type watchEndedError struct{}

func (watchEndedError) Error() string { return "the watch ended with an error event" }

var errWatchEnded = watchEndedError{}

// runBackground runs fn beside the watch caches: it stops with them.
func (s *Server) runBackground(fn func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := s.stopCaches
	s.stopCaches = func() {
		cancel()
		if stop != nil {
			stop()
		}
	}
	s.caches.Add(1)
	go func() {
		defer s.caches.Done()
		fn(ctx)
	}()
}
