package registry_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/storage"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deleteEnv is a pod Store on a real embedded etcd whose storage can be
// interfered with between the two steps of a graceless delete.
type deleteEnv struct {
	store *registry.Store
	st    *racingStorage
}

func newDeleteEnv(t *testing.T) *deleteEnv {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := &racingStorage{Interface: newTestStorage(t)}
	return &deleteEnv{store: registry.NewStore(st, pods.NewStrategy(), registry.Options{Logger: quiet}), st: st}
}

// racingStorage runs afterUpdate once a GuaranteedUpdate has been written,
// and afterFailedDelete when a Delete failed, as another component
// reacting to the update would.
type racingStorage struct {
	storage.Interface
	afterUpdate       func(ctx context.Context, key string)
	afterFailedDelete func(ctx context.Context, key string)
}

func (r *racingStorage) Delete(ctx context.Context, key string, precondition func(storage.KV) error, opts ...storage.WriteOption) (storage.KV, error) {
	kv, err := r.Interface.Delete(ctx, key, precondition, opts...)
	if err != nil && r.afterFailedDelete != nil {
		r.afterFailedDelete(ctx, key)
	}
	return kv, err
}

func (r *racingStorage) GuaranteedUpdate(ctx context.Context, key string, tryUpdate storage.UpdateFunc, opts ...storage.WriteOption) (storage.KV, error) {
	kv, err := r.Interface.GuaranteedUpdate(ctx, key, tryUpdate, opts...)
	if err == nil && r.afterUpdate != nil {
		r.afterUpdate(ctx, key)
	}
	return kv, err
}

func (e *deleteEnv) runningPod(t *testing.T, name string) {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := e.store.Create(t.Context(), "default", pod, registry.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *deleteEnv) expectGone(t *testing.T, name string) {
	t.Helper()
	if _, err := e.store.Get(t.Context(), "default", name, nil); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s after delete: err %v, want NotFound", name, err)
	}
}

// TestGracelessDeleteToleratesRace: a delete with gracePeriodSeconds 0
// first writes deletionTimestamp; when someone else (the node agent)
// removes the pod before the second step, the delete still succeeds, as
// in kube (kubernetes#19403), rather than answering 404.
func TestGracelessDeleteToleratesRace(t *testing.T) {
	e := newDeleteEnv(t)
	e.runningPod(t, "p")
	e.st.afterUpdate = func(ctx context.Context, key string) {
		if _, err := e.st.Interface.Delete(ctx, key, nil); err != nil {
			t.Errorf("racing delete: %v", err)
		}
	}
	out, deleted, err := e.store.Delete(t.Context(), "default", "p", &metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil || !deleted {
		t.Fatalf("delete: deleted %v, err %v; want deleted", deleted, err)
	}
	if m := out.(*v1.Pod); m.DeletionTimestamp == nil || m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds != 0 {
		t.Errorf("answer is not the last state written: %+v", m.ObjectMeta)
	}
	e.expectGone(t, "p")
}

// TestGracelessLeftoverIsDeleted: a pod left marked for graceless deletion
// (deletionGracePeriodSeconds 0: the first step of a delete happened, the
// removal did not) goes on the next delete, whatever grace it asks for, as
// kube's BeforeDelete decides; it used to stay, "terminating" for ever.
func TestGracelessLeftoverIsDeleted(t *testing.T) {
	e := newDeleteEnv(t)
	e.runningPod(t, "p")
	key := "/pods/default/p"
	if _, err := e.st.Interface.GuaranteedUpdate(t.Context(), key, func(cur storage.KV) ([]byte, error) {
		var pod map[string]any
		if err := json.Unmarshal(storedJSON(t, cur.Value), &pod); err != nil {
			return nil, err
		}
		md := pod["metadata"].(map[string]any)
		md["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		md["deletionGracePeriodSeconds"] = 0
		return json.Marshal(pod)
	}); err != nil {
		t.Fatalf("mark the pod (is the key %s?): %v", key, err)
	}
	grace := int64(30)
	if _, deleted, err := e.store.Delete(t.Context(), "default", "p", &metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil || !deleted {
		t.Fatalf("delete: deleted %v, err %v; want deleted", deleted, err)
	}
	e.expectGone(t, "p")
}

// TestGracelessDeleteAfterConcurrentWrite: between the two steps of a
// graceless delete someone writes the pod (the agent's final status); the
// delete still removes it, as kube's, instead of starting over — by which
// time the agent may have removed the pod itself, and the retry answered
// 404 (the flaky agent TestForceDelete).
func TestGracelessDeleteAfterConcurrentWrite(t *testing.T) {
	e := newDeleteEnv(t)
	e.runningPod(t, "p")
	e.st.afterUpdate = func(ctx context.Context, key string) {
		e.st.afterUpdate = nil // once
		if _, err := e.st.Interface.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
			var pod map[string]any
			if err := json.Unmarshal(storedJSON(t, cur.Value), &pod); err != nil {
				return nil, err
			}
			pod["status"] = map[string]any{"phase": "Succeeded"}
			return json.Marshal(pod)
		}); err != nil {
			t.Errorf("concurrent write: %v", err)
		}
	}
	e.st.afterFailedDelete = func(ctx context.Context, key string) {
		e.st.afterFailedDelete = nil
		if _, err := e.st.Interface.Delete(ctx, key, nil); err != nil {
			t.Errorf("agent's delete: %v", err)
		}
	}
	_, deleted, err := e.store.Delete(t.Context(), "default", "p", &metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil || !deleted {
		t.Fatalf("delete: deleted %v, err %v; want deleted", deleted, err)
	}
	e.expectGone(t, "p")
}
