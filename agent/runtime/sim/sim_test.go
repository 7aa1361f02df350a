package sim

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/corekube/corekube/agent/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*Runtime, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	r := New(clk)
	ctx := context.Background()
	if err := r.RunPodSandbox(ctx, runtime.SandboxConfig{UID: "u1", Name: "p", Namespace: "default", IP: "10.244.0.2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PullImage(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	return r, clk
}

func start(t *testing.T, r *Runtime, argv []string, memLimit int64) string {
	t.Helper()
	id, err := r.StartContainer(context.Background(), "u1", runtime.ContainerConfig{Name: "c", Image: "busybox", Argv: argv, MemoryLimit: memLimit})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func status(t *testing.T, r *Runtime, id string) runtime.ContainerStatus {
	t.Helper()
	st, err := r.GetPodStatus(context.Background(), "u1")
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.ID == id {
			return cs
		}
	}
	t.Fatalf("container %s not found", id)
	return runtime.ContainerStatus{}
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		memLimit int64
		// stop, when set, stops the container at 1s with this grace period.
		stop    *time.Duration
		preStop []string
		at      time.Duration // when to look
		state   runtime.ContainerState
		code    int32
		reason  string
		finish  time.Duration
	}{
		{name: "runs", argv: []string{"sh", "-c", "sleep 5; exit 1"}, at: 4 * time.Second, state: runtime.ContainerStateRunning},
		{name: "fails", argv: []string{"sh", "-c", "sleep 5; exit 1"}, at: 5 * time.Second, state: runtime.ContainerStateExited, code: 1, reason: "Error", finish: 5 * time.Second},
		{name: "completes", argv: []string{"sleep", "2"}, at: time.Minute, state: runtime.ContainerStateExited, reason: "Completed", finish: 2 * time.Second},
		{name: "oom", argv: []string{"sh", "-c", "stress --vm 1 --vm-bytes 250M --vm-hang 1"}, memLimit: 100 << 20, at: 0, state: runtime.ContainerStateExited, code: 137, reason: "OOMKilled"},
		{name: "server runs forever", argv: nil, at: time.Hour, state: runtime.ContainerStateRunning},
		{name: "server stops on SIGTERM", argv: nil, stop: ptr(30 * time.Second), at: time.Hour, state: runtime.ContainerStateExited, reason: "Completed", finish: time.Second},
		{name: "sleep ignores SIGTERM", argv: []string{"sleep", "3600"}, stop: ptr(30 * time.Second), at: 30 * time.Second, state: runtime.ContainerStateRunning},
		{name: "sleep killed at grace end", argv: []string{"sleep", "3600"}, stop: ptr(30 * time.Second), at: 31 * time.Second, state: runtime.ContainerStateExited, code: 137, reason: "Error", finish: 31 * time.Second},
		{name: "exits before grace end", argv: []string{"sleep", "3"}, stop: ptr(30 * time.Second), at: time.Minute, state: runtime.ContainerStateExited, reason: "Completed", finish: 3 * time.Second},
		{name: "grace 0 kills at once", argv: []string{"sleep", "3600"}, stop: ptr(time.Duration(0)), at: time.Second, state: runtime.ContainerStateExited, code: 137, reason: "Error", finish: time.Second},
		{name: "preStop delays SIGTERM", argv: nil, stop: ptr(30 * time.Second), preStop: []string{"sh", "-c", "sleep 5"}, at: 5 * time.Second, state: runtime.ContainerStateRunning},
		{name: "preStop then SIGTERM", argv: nil, stop: ptr(30 * time.Second), preStop: []string{"sh", "-c", "sleep 5"}, at: 6 * time.Second, state: runtime.ContainerStateExited, reason: "Completed", finish: 6 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, clk := setup(t)
			id := start(t, r, tc.argv, tc.memLimit)
			if tc.stop != nil {
				clk.Step(time.Second)
				if err := r.StopContainer(context.Background(), id, runtime.StopOptions{Timeout: *tc.stop, PreStop: tc.preStop}); err != nil {
					t.Fatal(err)
				}
				clk.SetTime(t0.Add(tc.at))
			} else {
				clk.Step(tc.at)
			}
			cs := status(t, r, id)
			if cs.State != tc.state || cs.ExitCode != tc.code || cs.Reason != tc.reason {
				t.Fatalf("status = %s %d %q, want %s %d %q", cs.State, cs.ExitCode, cs.Reason, tc.state, tc.code, tc.reason)
			}
			if tc.state == runtime.ContainerStateExited {
				if got := cs.FinishedAt.Sub(t0); got != tc.finish {
					t.Errorf("finished after %v, want %v", got, tc.finish)
				}
			}
			if cs.Image != "docker.io/library/busybox:latest" || cs.ImageRef == "" || !cs.StartedAt.Equal(t0) {
				t.Errorf("image %q ref %q started %v", cs.Image, cs.ImageRef, cs.StartedAt)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestExecSeesContainerFiles(t *testing.T) {
	r, clk := setup(t)
	ctx := context.Background()
	id := start(t, r, []string{"/bin/sh", "-c", "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 600"}, 0)
	probe := []string{"cat", "/tmp/healthy"}
	if code, _, err := r.ExecSync(ctx, id, probe, time.Second); err != nil || code != 0 {
		t.Fatalf("exec at 0s: %d %v", code, err)
	}
	clk.Step(31 * time.Second)
	code, out, err := r.ExecSync(ctx, id, probe, time.Second)
	if err != nil || code != 1 || string(out) != "cat: can't open '/tmp/healthy': No such file or directory\n" {
		t.Fatalf("exec at 31s: %d %q %v", code, out, err)
	}
	if _, _, err := r.ExecSync(ctx, id, []string{"sleep", "5"}, time.Second); !errors.Is(err, runtime.ErrExecTimeout) {
		t.Fatalf("exec timeout: %v", err)
	}
	clk.Step(time.Hour)
	if _, _, err := r.ExecSync(ctx, id, probe, time.Second); !errors.Is(err, runtime.ErrNotRunning) {
		t.Fatalf("exec in exited container: %v", err)
	}
}

func TestListPodsAndRemove(t *testing.T) {
	r, clk := setup(t)
	ctx := context.Background()
	a := start(t, r, []string{"sh", "-c", "exit 0"}, 0)
	b := start(t, r, nil, 0)
	clk.Step(time.Second)
	pods, err := r.ListPods(ctx)
	if err != nil || len(pods) != 1 || len(pods[0].Containers) != 2 {
		t.Fatalf("ListPods = %+v, %v", pods, err)
	}
	states := map[string]runtime.ContainerState{}
	for _, c := range pods[0].Containers {
		states[c.ID] = c.State
	}
	if states[a] != runtime.ContainerStateExited || states[b] != runtime.ContainerStateRunning {
		t.Fatalf("states = %v", states)
	}
	if err := r.RemoveContainer(ctx, b); err == nil {
		t.Fatal("removed a running container")
	}
	if err := r.RemoveContainer(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.StopPodSandbox(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if cs := status(t, r, b); cs.State != runtime.ContainerStateExited || cs.ExitCode != 137 {
		t.Fatalf("after StopPodSandbox: %+v", cs)
	}
	if err := r.RemovePod(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if pods, _ := r.ListPods(ctx); len(pods) != 0 {
		t.Fatalf("pods after RemovePod: %v", pods)
	}
	r.SetDown(runtime.ErrRuntimeDown)
	if _, err := r.ListPods(ctx); !errors.Is(err, runtime.ErrRuntimeDown) {
		t.Fatalf("ListPods while down: %v", err)
	}
	_ = types.UID("")
}

func TestImages(t *testing.T) {
	tests := []struct {
		image, full string
		err         error
	}{
		{"busybox", "docker.io/library/busybox:latest", nil},
		{"nginx:1.27", "docker.io/library/nginx:1.27", nil},
		{"user/app", "docker.io/user/app:latest", nil},
		{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10", nil},
		{"localhost:5000/app", "localhost:5000/app:latest", nil},
		{"Busybox", "", runtime.ErrInvalidImage},
		{"bad image", "", runtime.ErrInvalidImage},
		{"busybox:doesnotexist", "", runtime.ErrImagePull},
	}
	r := New(nil)
	for _, tc := range tests {
		img, err := r.PullImage(context.Background(), tc.image)
		if !errors.Is(err, tc.err) {
			t.Errorf("PullImage(%q) error = %v, want %v", tc.image, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		full, _ := normalizeImage(tc.image)
		if full != tc.full || img.Ref == "" || img.Size == 0 || !r.HasImage(context.Background(), tc.image) {
			t.Errorf("%q: full %q image %+v", tc.image, full, img)
		}
	}
}

// TestImageSize: sizes are stable per reference, near the repository's
// typical size, and differ between tags.
func TestImageSize(t *testing.T) {
	r := New(nil)
	pull := func(image string) uint64 {
		t.Helper()
		img, err := r.PullImage(context.Background(), image)
		if err != nil {
			t.Fatal(err)
		}
		return img.Size
	}
	for _, tc := range []struct {
		image    string
		min, max uint64
	}{
		{"busybox:1.36", 4_000_000, 4_500_000},
		{"nginx:1.27", 68_000_000, 76_000_000},
		{"example.com/team/app:v1", 9_000_000, 95_000_000},
	} {
		if got := pull(tc.image); got < tc.min || got > tc.max {
			t.Errorf("size of %s = %d, want within [%d, %d]", tc.image, got, tc.min, tc.max)
		}
		if a, b := pull(tc.image), pull(tc.image); a != b {
			t.Errorf("size of %s not stable: %d, %d", tc.image, a, b)
		}
	}
	if pull("nginx:1.27") == pull("nginx:1.26") {
		t.Errorf("nginx:1.27 and nginx:1.26 have the same size")
	}
}

func TestTerminationMessages(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		path     string
		fallback bool
		code     int32
		message  string
	}{
		{name: "syntax error exits 2", argv: []string{"sh", "-c", "echo 'oops"}, code: 2, fallback: true,
			message: "sh: unterminated quoted string at 5\n"},
		{name: "termination-log", argv: []string{"sh", "-c", "echo bye > /dev/termination-log; exit 1"}, path: "/dev/termination-log", code: 1, message: "bye\n"},
		{name: "fallback to logs on error", argv: []string{"sh", "-c", "echo last words; exit 1"}, path: "/dev/termination-log", fallback: true, code: 1, message: "last words\n"},
		{name: "no fallback on success", argv: []string{"sh", "-c", "echo fine"}, path: "/dev/termination-log", fallback: true},
		{name: "no fallback without the policy", argv: []string{"sh", "-c", "echo x; exit 1"}, path: "/dev/termination-log", code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, clk := setup(t)
			id, err := r.StartContainer(context.Background(), "u1", runtime.ContainerConfig{
				Name: "c", Image: "busybox", Argv: tc.argv, TerminationMessagePath: tc.path, TerminationMessageFallbackToLogs: tc.fallback,
			})
			if err != nil {
				t.Fatal(err)
			}
			clk.Step(time.Second)
			cs := status(t, r, id)
			if cs.State != runtime.ContainerStateExited || cs.ExitCode != tc.code || cs.Message != tc.message {
				t.Fatalf("status %s %d %q, want exited %d %q", cs.State, cs.ExitCode, cs.Message, tc.code, tc.message)
			}
		})
	}
}

// TestVolumeFilesSeenAndReplaced: a container sees the files of the pod
// volumes it mounts, set before it started or after, and a new content
// replaces the old one (a refreshed token).
func TestVolumeFilesSeenAndReplaced(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if err := r.SetVolume(ctx, "u1", "kube-api-access-x", map[string]string{"token": "t1", "namespace": "default"}); err != nil {
		t.Fatal(err)
	}
	id, err := r.StartContainer(ctx, "u1", runtime.ContainerConfig{Name: "c", Image: "busybox", Argv: []string{"sleep", "600"},
		Mounts: []runtime.Mount{{Volume: "kube-api-access-x", Path: dir}}})
	if err != nil {
		t.Fatal(err)
	}
	other := start(t, r, []string{"sleep", "600"}, 0)
	cat := func(id, file string) (int, string) {
		code, out, err := r.ExecSync(ctx, id, []string{"cat", dir + "/" + file}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	if code, out := cat(id, "token"); code != 0 || out != "t1" {
		t.Errorf("token before refresh: %d %q", code, out)
	}
	if code, out := cat(id, "namespace"); code != 0 || out != "default" {
		t.Errorf("namespace: %d %q", code, out)
	}
	if err := r.SetVolume(ctx, "u1", "kube-api-access-x", map[string]string{"token": "t2", "namespace": "default"}); err != nil {
		t.Fatal(err)
	}
	if code, out := cat(id, "token"); code != 0 || out != "t2" {
		t.Errorf("token after refresh: %d %q", code, out)
	}
	if code, _ := cat(other, "token"); code == 0 {
		t.Error("a container without the mount sees the token")
	}
	if err := r.SetVolume(ctx, "nope", "v", nil); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("SetVolume of an unknown pod: %v", err)
	}
	// A second pod's container mounting the same paths: the file names
	// are shared strings, not a copy per container.
	if err := r.RunPodSandbox(ctx, runtime.SandboxConfig{UID: "u2", Name: "p2", Namespace: "default", IP: "10.244.0.3"}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetVolume(ctx, "u2", "kube-api-access-y", map[string]string{"token": "t3"}); err != nil {
		t.Fatal(err)
	}
	id2, err := r.StartContainer(ctx, "u2", runtime.ContainerConfig{Name: "c", Image: "busybox", Argv: []string{"sleep", "600"},
		Mounts: []runtime.Mount{{Volume: "kube-api-access-y", Path: dir}}})
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(id string) *byte {
		r.mu.Lock()
		defer r.mu.Unlock()
		for k := range r.byID[strings.TrimPrefix(id, Name+"://")].env.Files {
			if k == dir+"/token" {
				return unsafe.StringData(k)
			}
		}
		t.Fatalf("container %s has no %s/token", id, dir)
		return nil
	}
	if keyOf(id) != keyOf(id2) {
		t.Error("each container holds its own copy of the file's path")
	}
}

// TestNextChangeAfterIgnoredSIGTERM: once a program that ignores SIGTERM
// (sleep, a shell) got it, the container's next change is the SIGKILL at
// the end of the grace period, not the SIGTERM instant already past: the
// pod worker sleeps until then instead of waking at once, again and again
// (it spun a whole CPU for a deleted pod's 30 s).
func TestNextChangeAfterIgnoredSIGTERM(t *testing.T) {
	r, clk := setup(t)
	id := start(t, r, []string{"sleep", "3600"}, 0)
	clk.Step(time.Second)
	if err := r.StopContainer(context.Background(), id, runtime.StopOptions{Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{time.Second, 2 * time.Second, 20 * time.Second} {
		clk.SetTime(t0.Add(at))
		if cs := status(t, r, id); cs.State != runtime.ContainerStateRunning {
			t.Fatalf("at %v: %s, want running until the grace period ends", at, cs.State)
		}
		if next := r.NextChange("u1"); !next.Equal(t0.Add(31 * time.Second)) {
			t.Errorf("at %v: next change at %v, want the SIGKILL at %v", at, next.Sub(t0), 31*time.Second)
		}
	}
	clk.SetTime(t0.Add(31 * time.Second))
	if cs := status(t, r, id); cs.State != runtime.ContainerStateExited || cs.ExitCode != 137 {
		t.Errorf("after the grace period: %s %d, want exited 137", cs.State, cs.ExitCode)
	}
}

func TestMemoryStats(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	r := New(clk)
	start := func(uid types.UID, name string, env map[string]string, limit int64, argv ...string) {
		t.Helper()
		if err := r.RunPodSandbox(ctx, runtime.SandboxConfig{UID: uid, Name: string(uid), Namespace: "ns"}); err != nil && !strings.Contains(err.Error(), "exists") {
			t.Fatal(err)
		}
		if _, err := r.PullImage(ctx, "busybox"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.StartContainer(ctx, uid, runtime.ContainerConfig{Name: name, Image: "busybox", Argv: argv, Env: env, MemoryLimit: limit}); err != nil {
			t.Fatal(err)
		}
	}
	start("a", "stress", nil, 0, "stress", "--vm", "2", "--vm-bytes", "100M", "--timeout", "10s")
	start("a", "declared", map[string]string{MemoryUsageEnv: "300Mi"}, 0, "sleep", "3600")
	start("b", "default", nil, 0, "sleep", "3600")
	start("c", "oom", nil, 50<<20, "stress", "--vm-bytes", "100M")
	byPod := func() (map[types.UID]int64, int64) {
		stats, total, err := r.MemoryStats(nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[types.UID]int64{}
		for _, p := range stats {
			m[p.UID] = p.Bytes
		}
		return m, total
	}
	m, total := byPod()
	want := map[types.UID]int64{"a": 200<<20 + 300<<20, "b": DefaultContainerMemory}
	if !maps.Equal(m, want) || total != want["a"]+want["b"] {
		t.Errorf("memory %v total %d, want %v (the OOM-killed container uses none)", m, total, want)
	}
	clk.Step(11 * time.Second) // stress's --timeout: it ends and frees its memory
	m, _ = byPod()
	if m["a"] != 300<<20 {
		t.Errorf("after stress ended, pod a uses %d, want %d", m["a"], 300<<20)
	}
}

// TestServerEnvBuiltWhenNeeded: a server container (a command the shell
// does not run, as most images' entrypoints) gets no environment or file
// system of its own until something runs in it; then an exec sees what it
// would have seen had they been built at the start: HOSTNAME, the
// configured variables, the files of the volumes it mounts, set before or
// after it started. Its termination message is read from a mounted file
// without building them.
func TestServerEnvBuiltWhenNeeded(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if err := r.SetVolume(ctx, "u1", "token-vol", map[string]string{"token": "t1"}); err != nil {
		t.Fatal(err)
	}
	id, err := r.StartContainer(ctx, "u1", runtime.ContainerConfig{Name: "c", Image: "busybox", Env: map[string]string{"A": "1"},
		TerminationMessagePath: "/msg/termination-log",
		Mounts:                 []runtime.Mount{{Volume: "token-vol", Path: dir}, {Volume: "msg-vol", Path: "/msg"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetVolume(ctx, "u1", "msg-vol", map[string]string{"termination-log": "bye"}); err != nil {
		t.Fatal(err)
	}
	c := func() *container {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.byID[strings.TrimPrefix(id, Name+"://")]
	}
	if c().env != nil {
		t.Fatal("a server container's environment was built at its start")
	}
	if !strings.HasPrefix(id, Name+"://") || len(id) != len(Name)+3+64 || c().id != id[len(Name)+3:] {
		t.Errorf("container ID %q, short ID %q", id, c().id)
	}
	if err := r.SetVolume(ctx, "u1", "token-vol", map[string]string{"token": "t2"}); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{
		"echo $HOSTNAME $A":        "p 1\n",
		"cat " + dir + "/token":    "t2",
		"cat /msg/termination-log": "bye",
	} {
		code, out, err := r.ExecSync(ctx, id, []string{"sh", "-c", cmd}, time.Second)
		if err != nil || code != 0 || string(out) != want {
			t.Errorf("exec %q: %d %q %v, want %q", cmd, code, out, err, want)
		}
	}
	if c().env == nil {
		t.Error("no environment after an exec")
	}
	// Another server container, stopped without an exec: its termination
	// message comes from the mounted volume.
	id2, err := r.StartContainer(ctx, "u1", runtime.ContainerConfig{Name: "d", Image: "busybox", TerminationMessagePath: "/msg/termination-log",
		Mounts: []runtime.Mount{{Volume: "msg-vol", Path: "/msg"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StopContainer(ctx, id2, runtime.StopOptions{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if cs := status(t, r, id2); cs.State != runtime.ContainerStateExited || cs.Message != "bye" {
		t.Errorf("stopped server: %s %q, want exited with message %q", cs.State, cs.Message, "bye")
	}
}

// TestSetVolumeUnchanged: setting a volume to the files it has keeps the
// runtime's copy (the agent sets its volumes at every sync).
func TestSetVolumeUnchanged(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	first := map[string]string{"token": "t1"}
	for _, files := range []map[string]string{first, {"token": "t1"}} {
		if err := r.SetVolume(ctx, "u1", "v", files); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	p := r.pods["u1"]
	kept := p.volume("v")
	n := len(p.volumes)
	r.mu.Unlock()
	if n != 1 || !maps.Equal(kept, first) {
		t.Fatalf("volumes %d, files %v", n, kept)
	}
	kept["probe"] = "x" // the same map as first: not replaced by the equal one
	if first["probe"] != "x" {
		t.Error("an equal set of files replaced the runtime's")
	}
	if err := r.SetVolume(ctx, "u1", "v", map[string]string{"token": "t2"}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	got := r.pods["u1"].volume("v")["token"]
	r.mu.Unlock()
	if got != "t2" {
		t.Errorf("token %q after a change, want t2", got)
	}
}
