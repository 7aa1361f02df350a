// Package namespace is the namespace lifecycle controller: it empties
// namespaces that are being deleted and then removes their "kubernetes"
// finalizer, which lets the API server delete them, as kube's namespace
// controller does.
package namespace

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// finalizerName is the spec finalizer this controller owns.
const finalizerName = v1.FinalizerKubernetes

// Controller empties and finalizes terminating namespaces.
type Controller struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	log       *slog.Logger
	// retryDelay is how long a namespace whose content is still going
	// (pods terminating gracefully) waits before the next look.
	retryDelay time.Duration
	// deletionDelay is how long a deleted namespace waits before it is
	// emptied: kube's namespaceDeletionGracePeriod, 5s. `kubectl delete -f`
	// deletes a namespace and then, one by one, what the file puts in it,
	// and counts on those objects still being there.
	deletionDelay time.Duration
	// queueMetrics is the metrics provider of the workqueue (nil: none).
	queueMetrics workqueue.MetricsProvider
}

// New returns a controller for the server that cfg points at; metrics,
// when not nil, gives its workqueue ("namespace", as kube's) kube's
// workqueue_* metrics.
func New(cfg *rest.Config, log *slog.Logger, metrics workqueue.MetricsProvider) (*Controller, error) {
	cfg = useragent.Config(cfg, useragent.For(useragent.KubeControllerManager, "namespace-controller"))
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Controller{client: client, dynamic: dyn, discovery: client.Discovery(), log: log, queueMetrics: metrics, retryDelay: time.Second, deletionDelay: 5 * time.Second}, nil
}

// Start runs the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace", MetricsProvider: c.queueMetrics})
	defer queue.ShutDown()

	factory := informers.NewSharedInformerFactory(c.client, 0)
	nsInformer := factory.Core().V1().Namespaces().Informer()
	enqueue := func(obj any) {
		if ns, ok := obj.(*v1.Namespace); ok && ns.DeletionTimestamp != nil {
			queue.AddAfter(ns.Name, c.deletionDelay)
		}
	}
	if _, err := nsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("namespace controller: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nsInformer.HasSynced) {
		return ctx.Err()
	}

	// One worker, as before: a namespace still being emptied comes back
	// after retryDelay without counting as a failure.
	loop := &worker.Loop[string]{Name: "namespace", Queue: queue, Workers: 1, Log: c.log,
		Sync: func(ctx context.Context, name string) (worker.Result, error) {
			done, err := c.sync(ctx, name)
			if err != nil || done {
				return worker.Result{}, err
			}
			return worker.After(c.retryDelay), nil
		},
		OnError: func(name string, err error) {
			c.log.Warn("namespace deletion failed, retrying", "namespace", name, "err", err)
		}}
	if err := loop.Run(ctx); err != nil {
		return fmt.Errorf("namespace controller: %w", err)
	}
	return nil
}

// sync deletes what namespace name still contains; once it is empty it
// removes the finalizer. done reports that nothing is left to do.
func (c *Controller) sync(ctx context.Context, name string) (done bool, err error) {
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, finalizerName) {
		return true, nil
	}
	resources, err := c.namespacedResources()
	if err != nil {
		return false, err
	}
	empty := true
	background := metav1.DeletePropagationBackground
	for _, gvr := range resources {
		client := c.dynamic.Resource(gvr).Namespace(name)
		if err := client.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete %s in %s: %w", gvr.Resource, name, err)
		}
		left, err := client.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("list %s in %s: %w", gvr.Resource, name, err)
		}
		if err == nil && len(left.Items) > 0 {
			empty = false
		}
	}
	if !empty {
		return false, nil
	}
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f v1.FinalizerName) bool { return f == finalizerName })
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	c.log.Info("namespace deleted", "namespace", name)
	return true, nil
}

// namespacedResources lists, from discovery, every namespaced resource
// that can be listed and deleted by collection.
func (c *Controller) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discover namespaced resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if slices.Contains(r.Verbs, "deletecollection") && slices.Contains(r.Verbs, "list") {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out, nil
}
