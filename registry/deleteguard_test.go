package registry_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/priorityclasses"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeleteGuard: a DELETE of a guarded object is refused with the
// guard's error (after the delete options are checked), and a
// deletecollection goes round the guard, as kube's does round a REST's
// Delete.
func TestDeleteGuard(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := registry.NewStore(newTestStorage(t), priorityclasses.NewStrategy(), registry.Options{Logger: quiet})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = store.Run(ctx)
	}()
	defer wg.Wait()
	defer cancel()

	for _, pc := range priorityclasses.SystemClasses() {
		if _, err := store.Create(ctx, "", pc, registry.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := store.Delete(ctx, "", priorityclasses.SystemNodeCritical, nil)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("delete a built-in class: %v, want Forbidden", err)
	}
	bad := metav1.DeletionPropagation("Sometimes")
	if _, _, err := store.Delete(ctx, "", priorityclasses.SystemNodeCritical, &metav1.DeleteOptions{PropagationPolicy: &bad}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid options: %v, want the options refused first", err)
	}
	out, err := store.DeleteCollection(ctx, "", &metainternalversion.ListOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.(*schedulingv1.PriorityClassList).Items); n != 2 {
		t.Fatalf("deletecollection deleted %d classes, want both built-ins", n)
	}
	if _, err := store.Get(ctx, "", priorityclasses.SystemClusterCritical, nil); !apierrors.IsNotFound(err) {
		t.Fatalf("after deletecollection: %v, want NotFound", err)
	}
}
