package serviceaccount_test

import (
	"context"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/serviceaccount"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/storage/memory"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// startServer runs a server without test servers' own controllers, so
// that the one under test is the only one keeping ServiceAccounts.
func startServer(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := testserver.NewConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// An in-memory store: the controller is under test, not etcd.
	st := memory.New()
	t.Cleanup(st.Close)
	cfg.Storage = st
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	client, err := kubernetes.NewForConfig(testserver.ClientConfig(srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return client, srv.URL()
}

// run starts the controller on a factory of its own until the test ends.
func run(t *testing.T, client kubernetes.Interface) *serviceaccount.Controller {
	t.Helper()
	factory := sharedinformers.NewFactory(client)
	c, err := serviceaccount.New(client, factory, serviceaccount.Config{Logger: testserver.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	go sharedinformers.Run(ctx, factory)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return c
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// exists reports whether namespace ns has a default ServiceAccount other
// than the one with uid notUID.
func exists(client kubernetes.Interface, ns, notUID string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		sa, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, serviceaccount.DefaultName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && string(sa.UID) != notUID, err
	}
}

func TestController(t *testing.T) {
	client, _ := startServer(t)
	ctx := context.Background()
	// A namespace from before the controller starts.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "early"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := run(t, client)
	for _, ns := range []string{"early", metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, v1.NamespaceNodeLease} {
		waitFor(t, "the default ServiceAccount of "+ns, exists(client, ns, ""))
	}
	if err := c.Start(ctx); err == nil {
		t.Error("a second Start did not fail")
	}

	// A new namespace.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the default ServiceAccount of late", exists(client, "late", ""))

	// Deleted: made again.
	old, err := client.CoreV1().ServiceAccounts("late").Get(ctx, serviceaccount.DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().ServiceAccounts("late").Delete(ctx, serviceaccount.DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new default ServiceAccount in late", exists(client, "late", string(old.UID)))

	// Terminating (no namespace controller here: it stays so): not made
	// again. Once a namespace created after the deletion has its account,
	// the controller has seen the deletion.
	if err := client.CoreV1().Namespaces().Delete(ctx, "early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "early to be terminating", func(ctx context.Context) (bool, error) {
		ns, err := client.CoreV1().Namespaces().Get(ctx, "early", metav1.GetOptions{})
		return err == nil && ns.Status.Phase == v1.NamespaceTerminating, err
	})
	if err := client.CoreV1().ServiceAccounts("early").Delete(ctx, serviceaccount.DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the default ServiceAccount of later", exists(client, "later", ""))
	if _, err := client.CoreV1().ServiceAccounts("early").Get(ctx, serviceaccount.DefaultName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("default ServiceAccount of a terminating namespace: %v, want NotFound", err)
	}
}

// TestRun: Run, the controller on a factory of its own, keeps the
// accounts and returns once ctx ends.
func TestRun(t *testing.T) {
	client, url := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serviceaccount.Run(ctx, testserver.ClientConfig(url), serviceaccount.Config{Logger: testserver.Logger()})
	}()
	waitFor(t, "the default ServiceAccount of default", exists(client, metav1.NamespaceDefault, ""))
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10s after its context ended")
	}
}
