package informertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// SelectedLabel is the label Churn flips; Selector selects the pods that
// carry it with the value "in".
const (
	SelectedLabel = "sel"
	Selector      = SelectedLabel + "=in"
)

// NewPod is a minimal valid pod, selected by Selector when in.
func NewPod(name string, in bool) *v1.Pod {
	value := "out"
	if in {
		value = "in"
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{SelectedLabel: value, "app": "churn"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// ChurnOptions shape a Churn run.
type ChurnOptions struct {
	Workers int // goroutines
	Ops     int // operations in all
	Names   int // size of the pool of pod names the operations pick from
	Prefix  string
	Seed    uint64
}

// ChurnResult counts the operations that took effect, by kind, and the
// unexpected errors.
type ChurnResult struct {
	Done   map[string]int
	Errors []string
}

func (r ChurnResult) String() string {
	kinds := make([]string, 0, len(r.Done))
	for k, n := range r.Done {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return strings.Join(kinds, " ")
}

// Check fails the test on unexpected errors, or when an operation kind
// never took effect.
func (r ChurnResult) Check(tb testing.TB) {
	tb.Helper()
	for _, e := range r.Errors[:min(len(r.Errors), 10)] {
		tb.Errorf("churn: %s", e)
	}
	if len(r.Errors) > 10 {
		tb.Errorf("churn: %d more errors", len(r.Errors)-10)
	}
	for _, kind := range []string{"create", "update", "label", "delete", "bind"} {
		if r.Done[kind] == 0 {
			tb.Errorf("churn: no %s took effect (%s)", kind, r)
		}
	}
}

// Churn runs opts.Ops mixed operations on pods in namespace from
// opts.Workers goroutines at once: creates, image updates (get + update,
// retried on conflict), label flips in and out of Selector (merge patch),
// deletes with gracePeriodSeconds=0, and bindings to nodes. Operations on
// the same names race: AlreadyExists, NotFound and Conflict are expected
// outcomes, not errors.
func Churn(ctx context.Context, client kubernetes.Interface, namespace string, opts ChurnOptions) ChurnResult {
	pods := client.CoreV1().Pods(namespace)
	var mu sync.Mutex
	res := ChurnResult{Done: map[string]int{}}
	record := func(kind string, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			res.Done[kind]++
		case apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", kind, err))
		}
	}
	var wg sync.WaitGroup
	for w := range opts.Workers {
		n := opts.Ops / opts.Workers
		if w < opts.Ops%opts.Workers {
			n++
		}
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("%sp%d", opts.Prefix, rng.IntN(opts.Names))
				switch op := rng.IntN(100); {
				case op < 30:
					_, err := pods.Create(ctx, NewPod(name, rng.IntN(2) == 0), metav1.CreateOptions{})
					record("create", err)
				case op < 50:
					image := fmt.Sprintf("busybox:1.%d.%d", w, i)
					err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
						pod, err := pods.Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						pod.Spec.Containers[0].Image = image
						_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
						return err
					})
					record("update", err)
				case op < 72:
					value := "out"
					if rng.IntN(2) == 0 {
						value = "in"
					}
					patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, SelectedLabel, value)
					_, err := pods.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
					record("label", err)
				case op < 87:
					err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
					record("delete", err)
				default:
					binding := &v1.Binding{
						ObjectMeta: metav1.ObjectMeta{Name: name},
						Target:     v1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("node-%d", rng.IntN(4))},
					}
					record("bind", pods.Bind(ctx, binding, metav1.CreateOptions{}))
				}
			}
		}()
	}
	wg.Wait()
	return res
}
