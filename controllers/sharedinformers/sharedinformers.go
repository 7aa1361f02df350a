// Package sharedinformers builds the one informer factory that the
// controllers of a process share, as kube-controller-manager shares one
// SharedInformerFactory: one cache and one watch per resource, however many
// controllers read it.
//
// Lifetime: the process that composes the controllers owns the factory. It
// builds it, constructs every controller on it (each registers its
// informers, indexers and event handlers in its constructor), then runs it
// (Run, or Start and Shutdown) once; the controllers' Start methods only
// wait for the caches to sync. Informers requested after the factory
// started are not started (a controller constructed too late waits
// forever for its caches).
//
// Memory: the factory's transform (Transform) keeps, of every pod, only the
// union of what the controllers sharing it read, in a Pod of this package
// rather than a v1.Pod: a pod field a controller starts to read must be
// added there.
package sharedinformers

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/controllers/internal/intern"
	"github.com/corekube/corekube/controllers/useragent"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// UserAgent is the user agent of the factory's client when built from a
// rest.Config, kube-controller-manager's name for it.
var UserAgent = useragent.For(useragent.KubeControllerManager, "shared-informers")

// NewFactory returns a factory whose informers list and watch through
// client, never resync, and store what Transform keeps.
func NewFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(Transform))
}

// NewFactoryForConfig returns NewFactory for the server restConfig points
// at, through a client of its own (user agent UserAgent unless set).
func NewFactoryForConfig(restConfig *rest.Config) (informers.SharedInformerFactory, error) {
	client, err := useragent.NewClient(restConfig, UserAgent)
	if err != nil {
		return nil, fmt.Errorf("shared informers: %w", err)
	}
	return NewFactory(client), nil
}

// Run starts the informers requested from factory so far and, when ctx
// ends, stops them and returns once their goroutines have returned. Call
// it once, after every controller sharing factory has been constructed.
func Run(ctx context.Context, factory informers.SharedInformerFactory) {
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// Transform is the factory's transform: it keeps what the controllers read
// of the objects the informers store.
//
//   - Pods become Pods (see stripPod) holding the union of what node
//     lifecycle, pod GC, disruption and the garbage collector read. None
//     of them writes a pod built from its cached copy: they patch, or read
//     the whole pod from the server first.
//   - Nodes are kept whole: node lifecycle writes node status from its
//     cached copy (kube's node controller does the same), so a field
//     dropped here would be dropped on the server.
//   - Budgets and leases lose their managedFields, which nothing reads (the
//     disruption controller writes budget status from its cached copy: a
//     write without managedFields keeps the stored ones, as in kube).
//
// It is idempotent: client-go may hand it an object it already transformed.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Pod:
		return stripPod(o), nil
	case *Pod:
		return o, nil
	case *policyv1.PodDisruptionBudget:
		o.ManagedFields = nil
	case *coordinationv1.Lease:
		o.ManagedFields = nil
	}
	return obj, nil
}

// stripPod keeps of pod:
//
//   - name, namespace, uid, resourceVersion: keys, preconditions, event
//     references (all three);
//   - labels: budget selectors (disruption);
//   - creationTimestamp: deletion order (pod GC);
//   - deletionTimestamp (all three);
//   - ownerReferences, finalizers: the garbage collector's graph;
//   - spec.nodeName (node lifecycle, pod GC); spec.tolerations: NoExecute
//     eviction (node lifecycle);
//   - status.phase (all three); status.reason: evicted pods go first
//     (pod GC);
//   - the Ready condition's status: healthy pods (disruption), marking
//     pods not ready (node lifecycle); the DisruptionTarget condition
//     whole: stale disruption conditions (disruption), eviction (node
//     lifecycle).
//
// Building a Pod lets go of everything else the decoder allocated; labels,
// tolerations, owner references, the Ready condition and the namespace
// and node names are shared between the pods that have equal ones
// (package intern; the cached objects are read-only).
func stripPod(pod *v1.Pod) *Pod {
	out := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: intern.String(pod.Namespace), UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels:            intern.Labels(pod.Labels),
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			OwnerReferences: intern.OwnerReferences(pod.OwnerReferences), Finalizers: pod.Finalizers,
		},
		Spec:   PodSpec{NodeName: intern.String(pod.Spec.NodeName), Tolerations: intern.Tolerations(pod.Spec.Tolerations)},
		Status: PodStatus{Phase: pod.Status.Phase, Reason: pod.Status.Reason},
	}
	var ready *v1.PodCondition
	var target *v1.PodCondition
	for i := range pod.Status.Conditions {
		switch pod.Status.Conditions[i].Type {
		case v1.PodReady:
			ready = &pod.Status.Conditions[i]
		case v1.DisruptionTarget:
			target = &pod.Status.Conditions[i]
		}
	}
	switch {
	case target == nil && ready != nil:
		// The common case: a list shared by every pod with the same
		// Ready status.
		out.Status.Conditions = readyOnly(ready.Status)
	case target != nil:
		if ready != nil {
			out.Status.Conditions = append(out.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: ready.Status})
		}
		out.Status.Conditions = append(out.Status.Conditions, *target)
	}
	return out
}

// readyConditions are the condition lists of the pods whose only kept
// condition is Ready, by its status: the Ready condition keeps its type
// and status only (the readers ask whether it is True, and node lifecycle
// patches it to False by type), so every such pod shares one of these
// read-only lists.
var readyConditions = map[v1.ConditionStatus][]v1.PodCondition{
	v1.ConditionTrue:    {{Type: v1.PodReady, Status: v1.ConditionTrue}},
	v1.ConditionFalse:   {{Type: v1.PodReady, Status: v1.ConditionFalse}},
	v1.ConditionUnknown: {{Type: v1.PodReady, Status: v1.ConditionUnknown}},
}

func readyOnly(status v1.ConditionStatus) []v1.PodCondition {
	if l, ok := readyConditions[status]; ok {
		return l
	}
	return []v1.PodCondition{{Type: v1.PodReady, Status: status}}
}
