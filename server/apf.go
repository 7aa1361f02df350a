package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/server/flowcontrol"
)

// kube's field managers of the APF configuration: the bootstrap
// configuration's writer and the status conditions' writer.
const (
	apfProducerFieldManager = "api-priority-and-fairness-config-producer-v1"
	apfConsumerFieldManager = "api-priority-and-fairness-config-consumer-v1"
)

// apf is the server's API Priority and Fairness: the filter's controller
// and the stores of its configuration.
type apf struct {
	ctl              *flowcontrol.Controller
	flowSchemas      *registry.Store
	flowSchemaStatus *registry.Store
	priorityLevels   *registry.Store
}

// setupFlowControl builds the controller and starts what keeps it: one
// goroutine follows the FlowSchemas and PriorityLevelConfigurations
// through the watch caches, another ensures the bootstrap objects
// (whenever the configuration changes, so that a deleted mandatory object
// comes back at once) and writes the Dangling conditions. It returns once
// the bootstrap objects are stored and the controller runs on them (kube's
// readyz waits for its APF post-start hooks).
func (s *Server) setupFlowControl(ctx context.Context, api *handlers.API) error {
	counts := map[string]*registry.Store{}
	a := &apf{}
	for _, r := range api.Resources() {
		info := r.Store.Info()
		counts[info.Group+"/"+info.Resource] = r.Store
		switch {
		case info.Group == flowcontrolv1.GroupName && info.Resource == "flowschemas":
			a.flowSchemas = r.Store
			a.flowSchemaStatus = r.Subresources["status"].Store
		case info.Group == flowcontrolv1.GroupName && info.Resource == "prioritylevelconfigurations":
			a.priorityLevels = r.Store
		}
	}
	serverCL := s.cfg.MaxRequestsInflight + s.cfg.MaxMutatingRequestsInflight
	a.ctl = flowcontrol.New(flowcontrol.Options{
		ServerConcurrencyLimit: serverCL,
		Count: func(group, resource string) int64 {
			if st := counts[group+"/"+resource]; st != nil {
				return int64(st.CacheStats().Objects)
			}
			return 0
		},
	})
	s.apf = a
	s.log.Info("API priority and fairness", "serverConcurrencyLimit", serverCL)

	if _, _, err := s.ensureFlowControlBootstrap(s.privilegedContext(ctx), true); err != nil {
		return fmt.Errorf("ensure the flow control bootstrap configuration: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	stopCaches := s.stopCaches
	s.stopCaches = func() { cancel(); stopCaches() }
	kick := make(chan struct{}, 1)
	loaded := make(chan struct{})
	s.caches.Add(2)
	go func() {
		defer s.caches.Done()
		s.followFlowControl(runCtx, kick, loaded)
	}()
	go func() {
		defer s.caches.Done()
		s.maintainFlowControl(runCtx, kick)
	}()
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the flow control configuration: %w", ctx.Err())
	}
}

// withFlowControl is the APF filter.
func (s *Server) withFlowControl(next http.Handler) http.Handler {
	if s.apf == nil {
		return next
	}
	return s.apf.ctl.Handler(next)
}

// apfState is the stored configuration as last seen.
type apfState struct {
	flowSchemas    map[string]*flowcontrolv1.FlowSchema
	priorityLevels map[string]*flowcontrolv1.PriorityLevelConfiguration
}

// followFlowControl feeds the controller from the two watch caches: the
// configuration once both are listed (then it closes loaded), then after
// every change; each change also kicks the maintainer. A cut watch starts
// over.
func (s *Server) followFlowControl(ctx context.Context, kick chan<- struct{}, loaded chan<- struct{}) {
	type event struct {
		kind string
		obj  runtime.Object
		del  bool
		// synced: the watch's initial events are all in; reset: a new
		// watch starts, whose initial events are the whole state.
		synced, reset bool
	}
	events := make(chan event, 64)
	follow := func(st *registry.Store, kind string) {
		for ctx.Err() == nil {
			w, err := st.Watch(ctx, "", &metainternalversion.ListOptions{AllowWatchBookmarks: true})
			if err != nil {
				s.log.Error("watch the flow control configuration", "resource", st.Info().Resource, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			select {
			case events <- event{kind: kind, reset: true}:
			case <-ctx.Done():
			}
			for {
				ev, ok := w.Next()
				if !ok || ev.Type == apiwatch.Error {
					break
				}
				if ev.Type == apiwatch.Bookmark {
					if m, err := metaOf(ev.Object); err == nil && m.GetAnnotations()["k8s.io/initial-events-end"] == "true" {
						select {
						case events <- event{kind: kind, synced: true}:
						case <-ctx.Done():
						}
					}
					continue
				}
				obj, err := ev.Decoded()
				if err != nil {
					s.log.Error("decode flow control configuration", "err", err)
					continue
				}
				select {
				case events <- event{kind: kind, obj: obj, del: ev.Type == apiwatch.Deleted}:
				case <-ctx.Done():
				}
			}
			w.Stop()
		}
	}
	var followers sync.WaitGroup
	defer followers.Wait()
	for kind, st := range map[string]*registry.Store{"fs": s.apf.flowSchemas, "pl": s.apf.priorityLevels} {
		followers.Add(1)
		go func() {
			defer followers.Done()
			follow(st, kind)
		}()
	}
	state := apfState{flowSchemas: map[string]*flowcontrolv1.FlowSchema{}, priorityLevels: map[string]*flowcontrolv1.PriorityLevelConfiguration{}}
	synced := map[string]bool{}
	for {
		var ev event
		select {
		case <-ctx.Done():
			return
		case ev = <-events:
		}
		switch {
		case ev.reset && ev.kind == "fs":
			synced[ev.kind], state.flowSchemas = false, map[string]*flowcontrolv1.FlowSchema{}
		case ev.reset:
			synced[ev.kind], state.priorityLevels = false, map[string]*flowcontrolv1.PriorityLevelConfiguration{}
		case ev.synced:
			synced[ev.kind] = true
		case ev.kind == "fs":
			fs := ev.obj.(*flowcontrolv1.FlowSchema)
			if ev.del {
				delete(state.flowSchemas, fs.Name)
			} else {
				state.flowSchemas[fs.Name] = fs
			}
		default:
			pl := ev.obj.(*flowcontrolv1.PriorityLevelConfiguration)
			if ev.del {
				delete(state.priorityLevels, pl.Name)
			} else {
				state.priorityLevels[pl.Name] = pl
			}
		}
		// Apply once both are listed, and then after each burst of
		// events (the rest of a burst is already queued).
		if !synced["fs"] || !synced["pl"] || len(events) > 0 {
			continue
		}
		fss := make([]*flowcontrolv1.FlowSchema, 0, len(state.flowSchemas))
		for _, fs := range state.flowSchemas {
			fss = append(fss, fs)
		}
		pls := make([]*flowcontrolv1.PriorityLevelConfiguration, 0, len(state.priorityLevels))
		for _, pl := range state.priorityLevels {
			pls = append(pls, pl)
		}
		s.apf.ctl.Update(fss, pls)
		if loaded != nil {
			close(loaded)
			loaded = nil
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// apfRestoreInterval is the least time between two ensure passes that
// rewrite stored bootstrap objects. Missing objects are created at once;
// a changed spec is restored at most this often, so that two servers of
// different versions (a rolling upgrade) that disagree on an object
// rewrite it now and then, not in a tight loop (kube restores on a
// periodic pass).
const apfRestoreInterval = 10 * time.Second

// maintainFlowControl is kube's APF configuration controllers: at start
// and after every change, the bootstrap objects are ensured and each
// FlowSchema's Dangling condition is brought up to date.
func (s *Server) maintainFlowControl(ctx context.Context, kick <-chan struct{}) {
	ctx = s.privilegedContext(ctx)
	var lastRestore time.Time
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		// The first pass ran in setupFlowControl; the first kick (the
		// configuration loaded) writes the Dangling conditions.
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry.C:
		}
		restore := time.Since(lastRestore) >= apfRestoreInterval
		restored, deferred, err := s.ensureFlowControlBootstrap(ctx, restore)
		if err != nil && ctx.Err() == nil {
			s.log.Error("ensure the flow control bootstrap configuration", "err", err)
		}
		if restored {
			lastRestore = time.Now()
		}
		if deferred {
			retry.Reset(apfRestoreInterval - time.Since(lastRestore))
		}
		if err := s.updateDangling(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("update the FlowSchemas' Dangling conditions", "err", err)
		}
	}
}

// ensureFlowControlBootstrap creates the bootstrap objects that are
// missing and, when restore is true, restores the spec of those kube
// keeps: the mandatory ones always (the exempt level's shares and
// lendablePercent excepted), the suggested ones unless annotated
// apf.kubernetes.io/autoupdate-spec "false" (kube's configuration
// ensurer). It reports whether it rewrote an object, and whether one
// needs rewriting that restore=false left alone.
func (s *Server) ensureFlowControlBootstrap(ctx context.Context, restore bool) (restored, deferred bool, err error) {
	b := flowcontrol.BootstrapConfiguration()
	// One goroutine per object: a first start writes them all, in about
	// the time of one write.
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	ensure := func(st *registry.Store, want runtime.Object, mandatory bool, setSpec func(cur, want runtime.Object) bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := s.ensureOne(ctx, st, want, mandatory, restore, setSpec)
			mu.Lock()
			defer mu.Unlock()
			restored = restored || o == ensureUpdated
			deferred = deferred || o == ensureDeferred
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", st.Info().Resource, want.(metav1.Object).GetName(), err))
			}
		}()
	}
	for _, want := range b.PriorityLevels {
		mandatory := b.Mandatory["PriorityLevelConfiguration/"+want.Name]
		ensure(s.apf.priorityLevels, want, mandatory, func(cur, want runtime.Object) bool {
			c, w := cur.(*flowcontrolv1.PriorityLevelConfiguration), want.(*flowcontrolv1.PriorityLevelConfiguration)
			if mandatory && c.Spec.Exempt != nil && w.Spec.Exempt != nil {
				// The operator may size the exempt level.
				w.Spec.Exempt = c.Spec.Exempt.DeepCopy()
			}
			if equality.Semantic.DeepEqual(c.Spec, w.Spec) {
				return false
			}
			c.Spec = w.Spec
			return true
		})
	}
	for _, want := range b.FlowSchemas {
		ensure(s.apf.flowSchemas, want, b.Mandatory["FlowSchema/"+want.Name], func(cur, want runtime.Object) bool {
			c, w := cur.(*flowcontrolv1.FlowSchema), want.(*flowcontrolv1.FlowSchema)
			if equality.Semantic.DeepEqual(c.Spec, w.Spec) {
				return false
			}
			c.Spec = w.Spec
			return true
		})
	}
	wg.Wait()
	return restored, deferred, errors.Join(errs...)
}

// ensureOutcome is what ensureOne did.
type ensureOutcome int

const (
	ensureNothing ensureOutcome = iota
	ensureCreated
	ensureUpdated
	ensureDeferred
)

// ensureOne creates want when missing, else (when restore is true) sets
// its spec (setSpec, which reports a change) and autoupdate annotation as
// flowcontrol.AutoUpdate decides.
func (s *Server) ensureOne(ctx context.Context, st *registry.Store, want runtime.Object, mandatory, restore bool, setSpec func(cur, want runtime.Object) bool) (ensureOutcome, error) {
	name := want.(metav1.Object).GetName()
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := st.Get(ctx, "", name, &metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj := want.DeepCopyObject()
			obj.(metav1.Object).SetAnnotations(map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"})
			_, err = st.Create(ctx, "", obj, registry.CreateOptions{FieldManager: apfProducerFieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return ensureCreated, err
		}
		if err != nil {
			return ensureNothing, err
		}
		m := cur.(metav1.Object)
		updateSpec, annotation := flowcontrol.AutoUpdate(mandatory, m.GetAnnotations(), m.GetGeneration())
		changed := false
		if m.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey] != annotation {
			ann := map[string]string{}
			for k, v := range m.GetAnnotations() {
				ann[k] = v
			}
			ann[flowcontrolv1.AutoUpdateAnnotationKey] = annotation
			m.SetAnnotations(ann)
			changed = true
		}
		if updateSpec && setSpec(cur, want.DeepCopyObject()) {
			changed = true
		}
		if !changed {
			return ensureNothing, nil
		}
		if !restore {
			return ensureDeferred, nil
		}
		_, _, err = st.Update(ctx, "", name, func(_ context.Context, live runtime.Object) (runtime.Object, error) {
			if lm := live.(metav1.Object); lm.GetResourceVersion() != m.GetResourceVersion() {
				return nil, apierrors.NewConflict(st.Info().GroupResource(), name, fmt.Errorf("changed meanwhile"))
			}
			return cur, nil
		}, registry.UpdateOptions{FieldManager: apfProducerFieldManager})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		return ensureUpdated, err
	}
	return ensureNothing, fmt.Errorf("gave up after 5 conflicts")
}

// updateDangling sets each FlowSchema's Dangling condition: True when its
// priority level does not exist, as kube's configuration consumer.
func (s *Server) updateDangling(ctx context.Context) error {
	pls, err := s.apf.priorityLevels.List(ctx, "", &metainternalversion.ListOptions{})
	if err != nil {
		return err
	}
	exists := map[string]bool{}
	for _, pl := range pls.(*flowcontrolv1.PriorityLevelConfigurationList).Items {
		exists[pl.Name] = true
	}
	fss, err := s.apf.flowSchemas.List(ctx, "", &metainternalversion.ListOptions{})
	if err != nil {
		return err
	}
	var errs []string
	for _, fs := range fss.(*flowcontrolv1.FlowSchemaList).Items {
		want := danglingCondition(fs.Spec.PriorityLevelConfiguration.Name, exists[fs.Spec.PriorityLevelConfiguration.Name])
		if i := slices.IndexFunc(fs.Status.Conditions, func(c flowcontrolv1.FlowSchemaCondition) bool { return c.Type == want.Type }); i >= 0 {
			c := fs.Status.Conditions[i]
			if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
				continue
			}
		}
		_, _, err := s.apf.flowSchemaStatus.Update(ctx, "", fs.Name, func(_ context.Context, live runtime.Object) (runtime.Object, error) {
			obj := live.DeepCopyObject().(*flowcontrolv1.FlowSchema)
			want.LastTransitionTime = metav1.Now()
			i := slices.IndexFunc(obj.Status.Conditions, func(c flowcontrolv1.FlowSchemaCondition) bool { return c.Type == want.Type })
			switch {
			case i < 0:
				obj.Status.Conditions = append(obj.Status.Conditions, want)
			case obj.Status.Conditions[i].Status == want.Status:
				want.LastTransitionTime = obj.Status.Conditions[i].LastTransitionTime
				obj.Status.Conditions[i] = want
			default:
				obj.Status.Conditions[i] = want
			}
			return obj, nil
		}, registry.UpdateOptions{FieldManager: apfConsumerFieldManager})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("%s: %v", fs.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// danglingCondition is kube's Dangling condition of a FlowSchema whose
// priority level exists or not.
func danglingCondition(level string, exists bool) flowcontrolv1.FlowSchemaCondition {
	if exists {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse, Reason: "Found",
			Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", level)}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue, Reason: "NotFound",
		Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", level)}
}
