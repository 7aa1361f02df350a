// Package serviceaccount is the ServiceAccounts controller: it keeps a
// "default" ServiceAccount in every active namespace, creating it in new
// namespaces and again when it is deleted, as kube-controller-manager's
// serviceaccount-controller does. Pods rely on it: ServiceAccount admission
// gives a pod without serviceAccountName the "default" one and refuses the
// pod when it does not exist.
package serviceaccount

import (
	"context"
	"fmt"
	"github.com/corekube/corekube/controllers/useragent"
	"github.com/corekube/corekube/controllers/worker"
	"log/slog"

	"github.com/corekube/corekube/controllers/sharedinformers"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultName is the ServiceAccount every namespace gets.
const DefaultName = "default"

// UserAgent is the controller's user agent when built from a rest.Config,
// kube-controller-manager's name for it.
var UserAgent = useragent.For(useragent.KubeControllerManager, "service-account-controller")

// Config configures a Controller. Zero fields take kube's defaults.
type Config struct {
	// Logger receives the controller's logs; nil is slog.Default().
	Logger *slog.Logger
	// Workers is how many namespaces are synced at once: 1, as
	// kube-controller-manager runs it.
	Workers int
	// QueueMetrics gives the controller's workqueues kube's workqueue_*
	// metrics under kube's queue names (workqueuemetrics.For); nil: none.
	QueueMetrics workqueue.MetricsProvider
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	return c
}

// Controller keeps the default ServiceAccounts. Create it with New or
// NewForConfig on the process's shared informer factory and run it with
// Start.
type Controller struct {
	client kubernetes.Interface
	cfg    Config
	log    *slog.Logger

	namespaces      corelisters.NamespaceLister
	serviceAccounts corelisters.ServiceAccountLister
	nsSynced        cache.InformerSynced
	saSynced        cache.InformerSynced

	queue   workqueue.TypedRateLimitingInterface[string]
	started worker.Once
}

// New returns a controller that reads namespaces and ServiceAccounts from
// factory's informers and writes through client. It registers its event
// handlers now: factory's owner starts the factory after New and shuts it
// down after Start returned.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	nsInformer := factory.Core().V1().Namespaces()
	saInformer := factory.Core().V1().ServiceAccounts()
	c := &Controller{
		client:          client,
		cfg:             cfg,
		log:             cfg.Logger.With("controller", "serviceaccount"),
		namespaces:      nsInformer.Lister(),
		serviceAccounts: saInformer.Lister(),
		nsSynced:        nsInformer.Informer().HasSynced,
		saSynced:        saInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "serviceaccount", MetricsProvider: cfg.QueueMetrics}),
	}
	// A deleted default ServiceAccount is made again; other deletions do
	// not concern the controller.
	if _, err := saInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.serviceAccountDeleted,
	}); err != nil {
		return nil, fmt.Errorf("service account controller: %w", err)
	}
	// Every namespace is looked at when it appears and when it changes
	// (kube also reacts to updates: a namespace whose account was deleted
	// while the controller was down is repaired on its next change, and
	// on every start through the initial list).
	if _, err := nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueNamespace,
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	}); err != nil {
		return nil, fmt.Errorf("service account controller: %w", err)
	}
	return c, nil
}

// NewForConfig returns New with a client of its own (user agent UserAgent
// unless set) for the server restConfig points at.
func NewForConfig(restConfig *rest.Config, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	client, err := useragent.NewClient(restConfig, UserAgent)
	if err != nil {
		return nil, fmt.Errorf("service account controller: %w", err)
	}
	return New(client, factory, cfg)
}

func (c *Controller) serviceAccountDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	sa, ok := obj.(*v1.ServiceAccount)
	if !ok || sa.Name != DefaultName {
		return
	}
	c.queue.Add(sa.Namespace)
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*v1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// Start runs the controller until ctx ends, once its informers have
// synced (the factory's owner starts them). It returns nil when ctx ends
// and an error when it cannot start; it runs once.
func (c *Controller) Start(ctx context.Context) error {
	if err := c.started.Start("service account controller"); err != nil {
		return err
	}
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.nsSynced, c.saSynced) {
		return nil
	}
	c.log.Info("service account controller started", "workers", c.cfg.Workers)
	loop := &worker.Loop[string]{Name: "serviceaccount", Queue: c.queue, Workers: c.cfg.Workers, Log: c.log,
		Sync: worker.NoResult(c.sync), OnError: func(name string, err error) {
			c.log.Warn("cannot create the default service account, retrying", "namespace", name, "err", err)
		}}
	if err := loop.Run(ctx); err != nil {
		return fmt.Errorf("service account controller: %w", err)
	}
	return nil
}

// sync creates the default ServiceAccount of namespace name when the
// namespace is active and the account is missing from the cache. A
// namespace being deleted gets nothing: it is being emptied.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.Status.Phase != v1.NamespaceActive || ns.DeletionTimestamp != nil {
		return nil
	}
	switch _, err := c.serviceAccounts.ServiceAccounts(name).Get(DefaultName); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get service account %s/%s: %w", name, DefaultName, err)
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}}
	_, err = c.client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.log.Debug("created the default service account", "namespace", name)
		return nil
	case apierrors.IsAlreadyExists(err):
		// The cache was behind: it exists.
		return nil
	case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		// Deleted since the cache saw it; nothing to keep there.
		return nil
	case apierrors.IsNotFound(err):
		// The namespace itself is gone.
		return nil
	}
	return fmt.Errorf("create service account %s/%s: %w", name, DefaultName, err)
}

// Run builds a shared informer factory for the server restConfig points
// at, runs a controller on it until ctx ends and returns once both have
// stopped. It suits processes (test servers) that run this controller
// alone; a process with several controllers shares one factory (New).
func Run(ctx context.Context, restConfig *rest.Config, cfg Config) error {
	client, err := useragent.NewClient(restConfig, UserAgent)
	if err != nil {
		return fmt.Errorf("service account controller: %w", err)
	}
	factory := sharedinformers.NewFactory(client)
	c, err := New(client, factory, cfg)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	return c.Start(ctx)
}
