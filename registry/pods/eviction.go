package pods

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/poddisruptionbudgets"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// evictionFinishTimeout bounds the delete of a pod whose eviction already
// took its disruption from the budget (kube's bound for a write).
const evictionFinishTimeout = 34 * time.Second

// MaxDisruptedPodSize is kube's bound on status.disruptedPods: past it the
// eviction subresource refuses evictions the disruption controller has not
// caught up with yet.
const MaxDisruptedPodSize = 2000

// evictionRetry is kube's EvictionsRetry: a conflict on the budget (or, for
// pods evicted without a budget check, on the pod) is retried up to 20
// times, 500ms apart with 10% jitter.
type evictionRetry struct {
	steps    int
	interval time.Duration
	jitter   float64
}

var defaultEvictionRetry = evictionRetry{steps: 20, interval: 500 * time.Millisecond, jitter: 0.1}

// do calls fn until it succeeds, fails with an error retriable does not
// accept, or the attempts run out (the last error is returned, as client-go's
// retry.OnError does). Waits end early when ctx ends.
func (r evictionRetry) do(ctx context.Context, retriable func(error) bool, fn func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err == nil || !retriable(err) || attempt >= r.steps {
			return err
		}
		wait := r.interval + time.Duration(rand.Float64()*r.jitter*float64(r.interval))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// EvictionREST serves POST pods/{name}/eviction with kube-apiserver v1.32's
// semantics (pkg/registry/core/pod/storage/eviction.go): a pod that is
// pending, terminal or already terminating is deleted without looking at
// budgets; otherwise the one PodDisruptionBudget that selects it must allow
// a disruption, which is taken (status.disruptionsAllowed decremented, the
// pod recorded in status.disruptedPods) by a /status write guarded by the
// budget's resourceVersion before the pod is marked DisruptionTarget and
// deleted. The compare-and-swap on the budget is what keeps any number of
// concurrent evictions, through any number of API servers sharing etcd,
// within the budget.
//
// Budgets bind this API alone. The node agents' node-pressure eviction
// (agent/eviction.go), like the kubelet's, does not go through it and does
// not consult PodDisruptionBudgets: a node running out of memory fails
// its pods (reason Evicted) whatever their budgets allow.
type EvictionREST struct {
	pods      *registry.Store // get and delete
	podStatus *registry.Store // the DisruptionTarget condition
	pdbs      *registry.Store // list and get budgets
	pdbStatus *registry.Store // take a disruption
	retry     evictionRetry
	now       func() time.Time
}

var (
	v1Eviction = policyv1.SchemeGroupVersion.WithKind("Eviction")
	// pdbResource names budgets in Forbidden errors as kube does.
	pdbResource = schema.GroupResource{Group: policyv1.GroupName, Resource: "poddisruptionbudget"}
	// podKindResource names pods in precondition conflicts as kube does.
	podKindResource = schema.GroupResource{Resource: "Pod"}
)

// NewEvictionREST returns the eviction subresource of podStore, which
// takes disruptions from the budgets in pdbStore.
func NewEvictionREST(podStore, pdbStore *registry.Store) *EvictionREST {
	return &EvictionREST{
		// The eviction was admitted as itself (handlers: AdmitCreate);
		// the pod writes it makes are not admitted again, as in kube. The
		// budget's status update is, as kube's goes through its loopback
		// client.
		pods:      podStore.WithoutAdmission(),
		podStatus: podStore.Subresource("status", NewStatusStrategy()).WithoutAdmission(),
		pdbs:      pdbStore,
		pdbStatus: pdbStore.Subresource("status", poddisruptionbudgets.NewStatusStrategy()),
		retry:     defaultEvictionRetry,
		now:       time.Now,
	}
}

// New returns an empty Eviction.
func (e *EvictionREST) New() runtime.Object { return &policyv1.Eviction{} }

// GroupVersionKind is policy/v1 Eviction, as discovery shows it.
func (e *EvictionREST) GroupVersionKind() schema.GroupVersionKind { return v1Eviction }

// AcceptsGroupVersion accepts policy/v1 and policy/v1beta1 Evictions.
func (e *EvictionREST) AcceptsGroupVersion(gv schema.GroupVersion) bool {
	return gv == policyv1.SchemeGroupVersion || gv == policyv1beta1.SchemeGroupVersion
}

// Create evicts the pod namespace/name.
func (e *EvictionREST) Create(ctx context.Context, namespace, name string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	eviction, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Eviction object: %T", obj))
	}
	if eviction.Namespace != "" && eviction.Namespace != namespace {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if name != eviction.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	var queryDryRun []string
	if dryRun {
		queryDryRun = []string{metav1.DryRunAll}
	}
	original, err := propagateDryRun(eviction, queryDryRun)
	if err != nil {
		return nil, err
	}

	// Pods that are not running, or already going, are deleted without a
	// budget check: they are disrupted already.
	var pod *v1.Pod
	deleted := false
	retriable := apierrors.IsConflict
	if !resourceVersionIsUnset(original) {
		// The client's own resourceVersion precondition is not retried.
		retriable = func(error) bool { return false }
	}
	err = e.retry.do(ctx, retriable, func() error {
		obj, err := e.pods.Get(ctx, namespace, name, nil)
		if err != nil {
			return err
		}
		pod = obj.(*v1.Pod)
		if !canIgnorePDB(pod) {
			return nil
		}
		opts := original
		if shouldEnforceResourceVersion(pod) && resourceVersionIsUnset(original) {
			// Not racing with the pod starting to run.
			opts = withResourceVersion(original, pod.ResourceVersion)
		}
		if err := e.addConditionAndDelete(ctx, namespace, name, opts); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case deleted:
		return evictionSucceeded(), nil
	}

	pdbs, err := e.budgetsFor(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(pdbs) > 1 {
		return &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure,
			Message:  "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
			Code:     http.StatusInternalServerError,
		}, nil
	}
	var pdbName string
	unhealthyAllowed := false
	if len(pdbs) == 1 {
		pdb := pdbs[0]
		pdbName = pdb.Name
		if !podReady(pod) {
			// An unready pod does not count as healthy: taking it does not
			// disrupt the application when the policy says so, or when the
			// budget is met without it.
			switch {
			case pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow:
				unhealthyAllowed = true
			case pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0:
				unhealthyAllowed = true
			}
		}
		if !unhealthyAllowed {
			refresh := false
			err := e.retry.do(ctx, apierrors.IsConflict, func() error {
				if refresh {
					obj, err := e.pdbs.Get(ctx, pod.Namespace, pdbName, nil)
					if err != nil {
						return err
					}
					pdb = obj.(*policyv1.PodDisruptionBudget)
				}
				if err := e.checkAndDecrement(ctx, pod.Name, pdb, len(original.DryRun) > 0); err != nil {
					refresh = true
					return err
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			// The disruption is taken: finish even if the client goes or
			// the request times out, but within a bound of its own, as
			// etcd without quorum would otherwise hold this forever.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), evictionFinishTimeout)
			defer cancel()
		}
	}

	opts := original
	if unhealthyAllowed {
		// The pod must not have become ready since the decision.
		opts = withResourceVersion(original, pod.ResourceVersion)
	}
	if err := e.addConditionAndDelete(ctx, namespace, name, opts); err != nil {
		if apierrors.IsConflict(err) && unhealthyAllowed && resourceVersionIsUnset(original) {
			return nil, tooManyRequestsStillProcessing(pdbName)
		}
		return nil, err
	}
	return evictionSucceeded(), nil
}

// addConditionAndDelete marks the pod DisruptionTarget (reason
// EvictionByEvictionAPI) unless this is a dry run, then deletes it with
// opts. The condition write checks opts' preconditions against the newest
// pod; a resourceVersion precondition then follows the pod to the version
// that write made.
func (e *EvictionREST) addConditionAndDelete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions) error {
	if len(opts.DryRun) == 0 {
		mark := func(_ context.Context, current runtime.Object) (runtime.Object, error) {
			pod := current.(*v1.Pod)
			if p := opts.Preconditions; p != nil {
				if p.UID != nil && *p.UID != "" && *p.UID != pod.UID {
					return nil, apierrors.NewConflict(podKindResource, pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, pod.UID))
				}
				if p.ResourceVersion != nil && *p.ResourceVersion != "" && *p.ResourceVersion != pod.ResourceVersion {
					return nil, apierrors.NewConflict(podKindResource, pod.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, pod.ResourceVersion))
				}
			}
			setPodCondition(&pod.Status, v1.PodCondition{
				Type:    v1.DisruptionTarget,
				Status:  v1.ConditionTrue,
				Reason:  "EvictionByEvictionAPI",
				Message: "Eviction API: evicting",
			}, e.now())
			return pod, nil
		}
		updated, _, err := e.podStatus.Update(ctx, namespace, name, mark, registry.UpdateOptions{})
		if err != nil {
			return err
		}
		if !resourceVersionIsUnset(opts) {
			opts = withResourceVersion(opts, updated.(*v1.Pod).ResourceVersion)
		}
	}
	_, _, err := e.pods.Delete(ctx, namespace, name, opts)
	return err
}

// checkAndDecrement takes one disruption from pdb (which it may change) or
// says why not: 429 while the budget's status is not current or allows no
// disruption. A dry run stops before the write.
func (e *EvictionREST) checkAndDecrement(ctx context.Context, podName string, pdb *policyv1.PodDisruptionBudget, dryRun bool) error {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return tooManyRequestsStillProcessing(pdb.Name)
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return apierrors.NewForbidden(pdbResource, pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	}
	if len(pdb.Status.DisruptedPods) > MaxDisruptedPodSize {
		return apierrors.NewForbidden(pdbResource, pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
		})
		return err
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		updateDisruptionAllowedCondition(pdb)
	}
	if dryRun {
		return nil
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	// The disruption controller does not count the pod as healthy while it
	// is recorded here, and forgets it if it is not deleted in 2 minutes.
	pdb.Status.DisruptedPods[podName] = metav1.NewTime(e.now())
	// The budget as read, resourceVersion included: a concurrent change
	// makes this a 409 Conflict and the caller reads the budget again.
	write := func(context.Context, runtime.Object) (runtime.Object, error) { return pdb.DeepCopy(), nil }
	// kube writes it through its loopback client (UpdateStatus), so the
	// fields changed are recorded for that client's manager.
	_, _, err := e.pdbStatus.Update(ctx, pdb.Namespace, pdb.Name, write, registry.UpdateOptions{FieldManager: loopbackManager})
	return err
}

// loopbackManager is the field manager kube derives from its loopback
// client's User-Agent ("kube-apiserver/v1.32.x ...").
const loopbackManager = "kube-apiserver"

// budgetsFor returns copies of the budgets in the pod's namespace whose
// selector matches the pod (a budget with an invalid selector matches
// nothing; an empty one matches everything, as in policy/v1).
func (e *EvictionREST) budgetsFor(ctx context.Context, pod *v1.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	obj, err := e.pdbs.List(ctx, pod.Namespace, nil)
	if err != nil {
		return nil, err
	}
	list := obj.(*policyv1.PodDisruptionBudgetList)
	var out []*policyv1.PodDisruptionBudget
	for i := range list.Items {
		pdb := &list.Items[i]
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		// List items share maps with the watch cache: copy before changing.
		out = append(out, pdb.DeepCopy())
	}
	return out, nil
}

// propagateDryRun merges the dryRun query parameter into the eviction's
// delete options; the two must agree when both are set.
func propagateDryRun(eviction *policyv1.Eviction, queryDryRun []string) (*metav1.DeleteOptions, error) {
	if eviction.DeleteOptions == nil {
		return &metav1.DeleteOptions{DryRun: queryDryRun}, nil
	}
	if len(eviction.DeleteOptions.DryRun) == 0 {
		eviction.DeleteOptions.DryRun = queryDryRun
		return eviction.DeleteOptions, nil
	}
	if len(queryDryRun) == 0 {
		return eviction.DeleteOptions, nil
	}
	if !reflect.DeepEqual(queryDryRun, eviction.DeleteOptions.DryRun) {
		// kube answers a plain error: 500 without a reason.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Message: fmt.Sprintf("Non-matching dry-run options in request and content: %v and %v", queryDryRun, eviction.DeleteOptions.DryRun),
		}}
	}
	return eviction.DeleteOptions, nil
}

// canIgnorePDB: terminal, pending and terminating pods are evicted without
// a budget check.
func canIgnorePDB(pod *v1.Pod) bool {
	switch pod.Status.Phase {
	case v1.PodSucceeded, v1.PodFailed, v1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// shouldEnforceResourceVersion: a pending pod is deleted only as read, so
// that it cannot start running (and count for a budget) in between.
func shouldEnforceResourceVersion(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || pod.DeletionTimestamp != nil {
		return false
	}
	return true
}

func resourceVersionIsUnset(opts *metav1.DeleteOptions) bool {
	return opts.Preconditions == nil || opts.Preconditions.ResourceVersion == nil
}

// withResourceVersion returns a copy of opts with a resourceVersion
// precondition.
func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	out := opts.DeepCopy()
	if out.Preconditions == nil {
		out.Preconditions = &metav1.Preconditions{}
	}
	out.Preconditions.ResourceVersion = &rv
	return out
}

// tooManyRequestsStillProcessing is kube's 429 for a budget whose status
// the disruption controller has not computed for its current spec, with a
// suggestion to retry in 10 seconds.
func tooManyRequestsStillProcessing(pdbName string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdbName),
	})
	return err
}

func evictionSucceeded() *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusCreated,
	}
}

// podReady reports whether the pod's Ready condition is True (kube's
// IsPodReady, the eviction's notion of healthy).
func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// setPodCondition sets cond in status as kube's UpdatePodCondition does:
// lastTransitionTime moves only when the status changes.
func setPodCondition(status *v1.PodStatus, cond v1.PodCondition, now time.Time) {
	cond.LastTransitionTime = metav1.NewTime(now)
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != cond.Type {
			continue
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		*old = cond
		return
	}
	status.Conditions = append(status.Conditions, cond)
}

// updateDisruptionAllowedCondition sets the budget's DisruptionAllowed
// condition from status.disruptionsAllowed, as kube's pdb helper does.
func updateDisruptionAllowedCondition(pdb *policyv1.PodDisruptionBudget) {
	if pdb.Status.Conditions == nil {
		pdb.Status.Conditions = []metav1.Condition{}
	}
	cond := metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.InsufficientPodsReason,
		ObservedGeneration: pdb.Status.ObservedGeneration,
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	apimeta.SetStatusCondition(&pdb.Status.Conditions, cond)
}
