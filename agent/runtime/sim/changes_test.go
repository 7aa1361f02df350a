package sim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// TestListChanges checks what ListChanges returns after each kind of
// change, that a quiet call returns nothing, and that a removed container
// leaves the wake heap.
func TestListChanges(t *testing.T) {
	r, clk := setup(t)
	ctx := context.Background()
	var pods []runtime.Pod
	var removed []types.UID
	list := func(all bool) ([]types.UID, []types.UID) {
		t.Helper()
		var err error
		pods, removed, err = r.ListChanges(ctx, all, pods, removed)
		if err != nil {
			t.Fatal(err)
		}
		var uids []types.UID
		for _, p := range pods {
			uids = append(uids, p.ID)
		}
		return uids, append([]types.UID(nil), removed...)
	}
	expect := func(what string, all bool, wantPods, wantRemoved []types.UID) {
		t.Helper()
		gotPods, gotRemoved := list(all)
		if !reflect.DeepEqual(gotPods, wantPods) || !reflect.DeepEqual(gotRemoved, wantRemoved) {
			t.Errorf("%s: listed %v removed %v, want %v and %v", what, gotPods, gotRemoved, wantPods, wantRemoved)
		}
	}
	expect("first call", false, []types.UID{"u1"}, nil)
	expect("nothing changed", false, nil, nil)

	sleeper := start(t, r, []string{"sleep", "2"}, 0)
	expect("container started", false, []types.UID{"u1"}, nil)
	clk.Step(time.Second)
	expect("still sleeping", false, nil, nil)
	clk.Step(time.Second)
	expect("exited by itself", false, []types.UID{"u1"}, nil)
	if pods[0].Containers[0].State != runtime.ContainerStateExited {
		t.Errorf("state %s, want exited", pods[0].Containers[0].State)
	}
	if err := r.RemoveContainer(ctx, sleeper); err != nil {
		t.Fatal(err)
	}
	expect("container removed", false, []types.UID{"u1"}, nil)

	long := start(t, r, []string{"sh", "-c", "sleep 600"}, 0)
	list(false)
	if len(r.wakes) != 1 {
		t.Fatalf("%d containers in the wake heap, want 1", len(r.wakes))
	}
	if err := r.StopContainer(ctx, long, runtime.StopOptions{Timeout: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	expect("stop requested, not yet killed", false, nil, nil)
	clk.Step(3 * time.Second)
	expect("killed at the grace period's end", false, []types.UID{"u1"}, nil)

	long = start(t, r, []string{"sh", "-c", "sleep 600"}, 0)
	list(false)
	if err := r.RemovePod(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if len(r.wakes) != 0 {
		t.Errorf("%d containers in the wake heap after their pod's removal, want 0", len(r.wakes))
	}
	expect("pod removed", false, nil, []types.UID{"u1"})
	if err := r.RunPodSandbox(ctx, runtime.SandboxConfig{UID: "u2"}); err != nil {
		t.Fatal(err)
	}
	expect("all", true, []types.UID{"u2"}, nil)
	expect("nothing after all", false, nil, nil)

	r.SetDown(context.DeadlineExceeded)
	if _, _, err := r.ListChanges(ctx, false, nil, nil); err == nil {
		t.Error("a down runtime lists")
	}
}
