package pleg

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"github.com/corekube/corekube/agent/runtime/sim"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fullRelister is the PLEG's relist as it was before change tracking,
// kept as the reference: it lists every pod, compares each with its record
// and returns the events per pod, in order, and the counts.
type fullRelister struct {
	rt      Lister
	records map[types.UID]*runtime.Pod // the listing events were last generated against
	seen    [len(ContainerStates)]bool
}

func (f *fullRelister) relist(t *testing.T) (map[types.UID][]string, Counts) {
	t.Helper()
	pods, err := f.rt.ListPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	counts := Counts{Seen: f.seen}
	current := map[types.UID]*runtime.Pod{}
	for i := range pods {
		p := &pods[i]
		current[p.ID] = p
		if p.SandboxReady {
			counts.RunningPods++
		}
		for _, c := range p.Containers {
			counts.Containers[stateIndex(c.State)]++
			counts.Seen[stateIndex(c.State)] = true
		}
	}
	f.seen = counts.Seen
	ids := map[types.UID]bool{}
	for id := range f.records {
		ids[id] = true
	}
	for id := range current {
		ids[id] = true
	}
	events := map[types.UID][]string{}
	for pid := range ids {
		old, cur := f.records[pid], current[pid]
		var evs []*PodLifecycleEvent
		forEachContainerID(old, cur, func(cid string) {
			evs = append(evs, generateEvents(pid, cid, containerState(old, cid), containerState(cur, cid))...)
		})
		for _, e := range evs {
			if e.Type != ContainerChanged {
				events[pid] = append(events[pid], e.Data+"/"+string(e.Type))
			}
		}
		switch {
		case cur == nil:
			delete(f.records, pid)
		case len(evs) > 0:
			cp := *cur
			cp.Containers = append([]runtime.Container(nil), cur.Containers...)
			f.records[pid] = &cp
		}
	}
	return events, counts
}

// eventsByPod drains ch into the events of each pod, in order.
func eventsByPod(ch chan *PodLifecycleEvent) map[types.UID][]string {
	out := map[types.UID][]string{}
	for {
		select {
		case e := <-ch:
			out[e.ID] = append(out[e.ID], e.Data+"/"+string(e.Type))
		default:
			return out
		}
	}
}

// TestIncrementalRelistMatchesFullRelist drives a simulated runtime of a
// few hundred pods through random transitions (sandboxes and containers
// started, stopped, removed; containers that exit by themselves at random
// times; status reads that advance them in between) and checks after each
// step that the PLEG, which lists only what changed, sends exactly the
// events a full relist sends, pod by pod in the same order, with the same
// counts.
func TestIncrementalRelistMatchesFullRelist(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			ctx := context.Background()
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			rt := sim.New(clk)
			if _, err := rt.PullImage(ctx, "busybox"); err != nil {
				t.Fatal(err)
			}
			ch := make(chan *PodLifecycleEvent, 100000)
			g := New(rt, Options{Clock: clk, Events: ch, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if g.changes == nil {
				t.Fatal("the simulated runtime is not a ChangeLister")
			}
			ref := &fullRelister{rt: rt, records: map[types.UID]*runtime.Pod{}}

			programs := [][]string{
				nil,            // a server: runs until stopped
				{"sleep", "2"}, // exits 0 after 2 s
				{"sh", "-c", "sleep 1; exit 3"},
				{"sh", "-c", "while true; do echo x; sleep 1; done"},
				{"sh", "-c", "sleep 600"}, // ignores SIGTERM: killed at the grace period's end
			}
			var uids []types.UID
			containers := map[types.UID][]string{}
			nextUID := 0
			newPod := func() {
				uid := types.UID(fmt.Sprintf("pod-%d", nextUID))
				nextUID++
				if err := rt.RunPodSandbox(ctx, runtime.SandboxConfig{UID: uid, Name: string(uid), Namespace: "default"}); err != nil {
					t.Fatal(err)
				}
				uids = append(uids, uid)
			}
			for range 120 {
				newPod()
			}
			var died int
			for step := range 60 {
				for range 1 + rng.IntN(12) {
					if len(uids) == 0 {
						newPod()
					}
					i := rng.IntN(len(uids))
					uid := uids[i]
					switch op := rng.IntN(100); {
					case op < 35:
						id, err := rt.StartContainer(ctx, uid, runtime.ContainerConfig{Name: "c", Image: "busybox", Argv: programs[rng.IntN(len(programs))]})
						if err == nil {
							containers[uid] = append(containers[uid], id)
						}
					case op < 55 && len(containers[uid]) > 0:
						id := containers[uid][rng.IntN(len(containers[uid]))]
						_ = rt.StopContainer(ctx, id, runtime.StopOptions{Timeout: time.Duration(rng.IntN(4)) * time.Second})
					case op < 70 && len(containers[uid]) > 0:
						j := rng.IntN(len(containers[uid]))
						if rt.RemoveContainer(ctx, containers[uid][j]) == nil {
							containers[uid] = append(containers[uid][:j], containers[uid][j+1:]...)
						}
					case op < 78:
						if _, err := rt.GetPodStatus(ctx, uid); err != nil {
							t.Fatal(err)
						}
					case op < 84:
						if err := rt.StopPodSandbox(ctx, uid); err != nil {
							t.Fatal(err)
						}
					case op < 88:
						// The sandbox again, after a stop or not.
						if err := rt.RunPodSandbox(ctx, runtime.SandboxConfig{UID: uid, Name: string(uid), Namespace: "default"}); err != nil {
							t.Fatal(err)
						}
					case op < 94:
						if err := rt.RemovePod(ctx, uid); err != nil {
							t.Fatal(err)
						}
						delete(containers, uid)
						uids = append(uids[:i], uids[i+1:]...)
					default:
						newPod()
					}
				}
				clk.Step(time.Duration(rng.IntN(2500)) * time.Millisecond)

				// The incremental relist first: were it to miss a due
				// container, the reference's listing (which advances every
				// container) would not hide it.
				g.Relist(ctx)
				got, gotCounts := eventsByPod(ch), g.Counts()
				want, wantCounts := ref.relist(t)
				if !reflect.DeepEqual(got, want) {
					for pid := range want {
						if !reflect.DeepEqual(got[pid], want[pid]) {
							t.Errorf("step %d: pod %s: events %v, a full relist sends %v", step, pid, got[pid], want[pid])
						}
					}
					for pid := range got {
						if _, ok := want[pid]; !ok {
							t.Errorf("step %d: pod %s: events %v, a full relist sends none", step, pid, got[pid])
						}
					}
					t.FailNow()
				}
				for _, evs := range want {
					for _, e := range evs {
						if strings.HasSuffix(e, "/"+string(ContainerDied)) {
							died++
						}
					}
				}
				if gotCounts != wantCounts {
					t.Fatalf("step %d: counts %+v, a full relist counts %+v", step, gotCounts, wantCounts)
				}
			}
			if died == 0 {
				t.Fatal("no container died: the scenario tests nothing")
			}
		})
	}
}

// BenchmarkRelist measures one relist of 1,000 nodes of 30 pods (one PLEG
// and runtime each, as an agent process runs them) where 10 containers
// changed in all: it should cost what changed, not 30,000 pods.
func BenchmarkRelist(b *testing.B) {
	const nodes, podsPerNode, changes = 1000, 30, 10
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ch := make(chan *PodLifecycleEvent, 1<<20)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	type node struct {
		rt   *sim.Runtime
		pleg *GenericPLEG
		ids  []string
	}
	all := make([]node, nodes)
	for i := range all {
		n := &all[i]
		n.rt = sim.New(clk)
		if _, err := n.rt.PullImage(ctx, "nginx"); err != nil {
			b.Fatal(err)
		}
		for j := range podsPerNode {
			uid := types.UID(fmt.Sprintf("n%d-p%d", i, j))
			if err := n.rt.RunPodSandbox(ctx, runtime.SandboxConfig{UID: uid, Name: string(uid), Namespace: "default"}); err != nil {
				b.Fatal(err)
			}
			id, err := n.rt.StartContainer(ctx, uid, runtime.ContainerConfig{Name: "nginx", Image: "nginx"})
			if err != nil {
				b.Fatal(err)
			}
			n.ids = append(n.ids, id)
		}
		n.pleg = New(n.rt, Options{Clock: clk, Events: ch, Logger: log})
		n.pleg.Relist(ctx)
	}
	for len(ch) > 0 {
		<-ch
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// 10 containers change: each stopped (it exits) and restarted.
		for range changes {
			i, j := rng.IntN(nodes), rng.IntN(podsPerNode)
			n := &all[i]
			if err := n.rt.StopContainer(ctx, n.ids[j], runtime.StopOptions{Timeout: time.Second}); err != nil {
				b.Fatal(err)
			}
			if err := n.rt.RemoveContainer(ctx, n.ids[j]); err != nil {
				b.Fatal(err)
			}
			id, err := n.rt.StartContainer(ctx, types.UID(fmt.Sprintf("n%d-p%d", i, j)), runtime.ContainerConfig{Name: "nginx", Image: "nginx"})
			if err != nil {
				b.Fatal(err)
			}
			n.ids[j] = id
		}
		clk.Step(time.Second)
		b.StartTimer()
		for i := range all {
			all[i].pleg.Relist(ctx)
		}
		b.StopTimer()
		for len(ch) > 0 {
			<-ch
		}
		b.StartTimer()
	}
}
