package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/priorityclasses"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// priorityClassCache is what the Priority admission plugin reads: every
// PriorityClass by name and the global default, kept from a watch of the
// store (kube's plugin reads an informer's lister). A pod create then
// costs a map lookup; the classes are few and change rarely, so each
// change rebuilds the whole snapshot.
type priorityClassCache struct {
	store *registry.Store
	log   *slog.Logger
	snap  atomic.Pointer[priorityClassSnapshot]
}

type priorityClassSnapshot struct {
	byName map[string]*schedulingv1.PriorityClass
	def    *schedulingv1.PriorityClass
}

// run keeps the snapshot until ctx ends (the server's background work
// owns it).
func (c *priorityClassCache) run(ctx context.Context) {
	follow(ctx, c.store, c.log, func(objs []runtime.Object) {
		classes := make([]*schedulingv1.PriorityClass, len(objs))
		for i, o := range objs {
			classes[i] = o.(*schedulingv1.PriorityClass)
		}
		c.snap.Store(newPriorityClassSnapshot(classes))
	})
}

func newPriorityClassSnapshot(classes []*schedulingv1.PriorityClass) *priorityClassSnapshot {
	s := &priorityClassSnapshot{byName: make(map[string]*schedulingv1.PriorityClass, len(classes))}
	for _, pc := range classes {
		s.byName[pc.Name] = pc
		// Two API servers may race two defaults in; kube takes the lowest.
		if pc.GlobalDefault && (s.def == nil || pc.Value < s.def.Value) {
			s.def = pc
		}
	}
	return s
}

// get returns the named class. A name the snapshot lacks (a class created
// an instant ago, or none) is looked up in the watch cache, then etcd:
// only pods naming a class that does not exist pay for that read.
func (c *priorityClassCache) get(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
	if s := c.snap.Load(); s != nil {
		if pc, ok := s.byName[name]; ok {
			return pc, nil
		}
	}
	obj, err := c.store.GetCached(ctx, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*schedulingv1.PriorityClass), nil
}

// globalDefault returns the default class (nil: none). Until the watch has
// delivered its first snapshot it lists the watch cache.
func (c *priorityClassCache) globalDefault(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	if s := c.snap.Load(); s != nil {
		return s.def, nil
	}
	obj, err := c.store.List(ctx, "", &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	list := obj.(*schedulingv1.PriorityClassList)
	classes := make([]*schedulingv1.PriorityClass, len(list.Items))
	for i := range list.Items {
		classes[i] = &list.Items[i]
	}
	return newPriorityClassSnapshot(classes).def, nil
}

// ensureSystemPriorityClasses creates the built-in classes that do not
// exist: kube's post-start hook scheduling/bootstrap-system-priority-classes.
// It is idempotent and safe with several API servers starting at once
// (AlreadyExists is success); a stored class is left as it is, as kube
// leaves it. The creates go through admission like kube's loopback ones.
func ensureSystemPriorityClasses(ctx context.Context, store *registry.Store, log *slog.Logger) error {
	for _, pc := range priorityclasses.SystemClasses() {
		if _, err := store.Get(ctx, "", pc.Name, &metav1.GetOptions{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get PriorityClass %s: %w", pc.Name, err)
		}
		_, err := store.Create(ctx, "", pc, registry.CreateOptions{FieldManager: apiserverFieldManager})
		switch {
		case err == nil:
			log.Info("created PriorityClass", "name", pc.Name, "value", pc.Value)
		case apierrors.IsAlreadyExists(err):
		default:
			return fmt.Errorf("create PriorityClass %s: %w", pc.Name, err)
		}
	}
	return nil
}
