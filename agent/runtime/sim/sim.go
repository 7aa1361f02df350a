// Package sim is a simulated container runtime: containers run the tiny
// shell of package shell in virtual time, so a node carries thousands of
// them without a goroutine or a timer each.
//
// What a container does is decided by its command and args (see
// shell.FromArgv): ["sh", "-c", "sleep 5; exit 1"] runs five seconds and
// fails; ["sleep", "5"] succeeds after five seconds; no command, or a
// command the shell does not know, runs until stopped. A container that
// goes over its memory limit (stress --vm-bytes) is OOMKilled (137).
//
// Memory: a running container uses (its working set, what MemoryStats
// reports and the agent's eviction manager sums per node) the memory its
// environment variable SIM_MEMORY_USAGE declares, as a Kubernetes
// quantity ("300Mi"; not checked against the limit); else what a running
// stress holds (--vm-bytes times --vm, until its --timeout); else
// DefaultContainerMemory. Exited containers use none.
//
// Stopping: SIGTERM ends a server at once (exit code 0); a shell or sleep as
// PID 1 ignores SIGTERM, as in a real container, and is killed (137) when
// the grace period ends unless it exits first.
//
// Images: every image can be pulled, except references whose tag or digest
// contains "doesnotexist" or "notfound" (ErrImagePull) and malformed ones
// (InvalidImageName). An image's size is stable for its reference: the
// typical size of well-known repositories (busybox about 4 MB, nginx about
// 72 MB), tens of MB for others, varied a little per tag.
//
// Logs: what a container writes is kept line by line with its virtual time
// (the newest 1,000 lines, 256 KiB at most) as long as the container is;
// ReadLogs reads it as the kubelet reads CRI log files, and follows it.
package sim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/corekube/corekube/agent/runtime"
	"github.com/corekube/corekube/agent/runtime/sim/shell"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Name and version of the runtime: nodes report "sim://<Version>" as their
// containerRuntimeVersion.
const (
	Name    = "sim"
	Version = "1.0.0"
)

// Runtime is the simulated runtime of one node.
type Runtime struct {
	clock clock.PassiveClock

	mu     sync.Mutex
	pods   map[types.UID]*pod
	byID   map[string]*container
	images map[string]runtime.Image // by full reference
	down   error

	// Change tracking for ListChanges (changes.go).
	tracking bool
	changed  []*pod // queued since the last ListChanges
	wakes    wakeHeap
}

var _ runtime.Runtime = (*Runtime)(nil)

type pod struct {
	uid          types.UID
	name, ns     string
	sandboxReady bool
	ip           string
	containers   []*container // in creation order
	// volumes are the pod's volumes' files (SetVolume); a pod has one or
	// a few, so a slice (a map of one entry costs a few hundred bytes).
	volumes []podVolume
	rt      *Runtime
	// queued: in rt.changed.
	queued bool
}

// podVolume is one volume's files.
type podVolume struct {
	name  string
	files map[string]string
}

// volume returns the files of the pod's volume named name (nil: none).
func (p *pod) volume(name string) map[string]string {
	for i := range p.volumes {
		if p.volumes[i].name == name {
			return p.volumes[i].files
		}
	}
	return nil
}

type container struct {
	// id is fullID without its "sim://" prefix (the same bytes).
	id, name string
	pod      *pod
	// wakeNs is its scheduled change in the wake heap (Unix nanoseconds;
	// 0: none), wakeIdx its place there (1-based; 0: not in it).
	wakeNs  int64
	wakeIdx int32
	// declaredMemory is SIM_MEMORY_USAGE in bytes (-1: not declared).
	declaredMemory int64
	fullID         string // sim://<id>
	image, ref     string
	hash           uint64
	attempt        int
	created        time.Time
	proc           *shell.Process
	// env is the container's environment and file system as its shell
	// sees them; nil until a shell needs them (a script's start, an exec,
	// a preStop hook): a server container that nothing runs in, most of
	// them, never builds its maps (envVars, memoryLimit and the pod's
	// volumes are what env is made of).
	env           *shell.Env
	envVars       map[string]string
	memoryLimit   int64
	stopRequested bool
	termAt        time.Time
	// termDelivered: SIGTERM reached a program that ignores it (a shell,
	// like PID 1 in a container); only killAt is still to come.
	termDelivered bool
	killAt        time.Time
	exited        bool
	finished      time.Time
	exitCode      int32
	reason        string
	message       string
	logs          logBuffer
	removed       bool
	msgPath       string
	msgFromLogs   bool
	mounts        []runtime.Mount
}

// mountVolume writes the files of the pod's volume named volume into the
// container's file system below each path that mounts it (once the
// container has one: shellEnv mounts every volume when it builds it).
func (c *container) mountVolume(volume string, files map[string]string) {
	if c.env == nil {
		return
	}
	for _, m := range c.mounts {
		if m.Volume != volume {
			continue
		}
		dir := strings.TrimSuffix(m.Path, "/") + "/"
		for name, content := range files {
			// Every pod's ServiceAccount files have the same few paths:
			// one copy of each for all the containers.
			c.env.Files[unique.Make(dir+name).Value()] = content
		}
	}
}

// shellEnv is the container's environment and file system, built at the
// first call: HOSTNAME and the configured variables, the pod's volumes
// mounted.
func (c *container) shellEnv() *shell.Env {
	if c.env != nil {
		return c.env
	}
	vars := make(map[string]string, len(c.envVars)+1)
	vars["HOSTNAME"] = c.pod.name
	for k, v := range c.envVars {
		vars[k] = v
	}
	c.env = &shell.Env{Files: map[string]string{}, Vars: vars, MemoryLimit: c.memoryLimit, Output: c.logs.write}
	for _, v := range c.pod.volumes {
		c.mountVolume(v.name, v.files)
	}
	return c.env
}

// file reads a file of the container's file system without building it
// (a container that has none sees only its mounted volumes).
func (c *container) file(path string) string {
	if c.env != nil {
		return c.env.Files[path]
	}
	for _, m := range c.mounts {
		if name, ok := strings.CutPrefix(path, strings.TrimSuffix(m.Path, "/")+"/"); ok {
			if content, ok := c.pod.volume(m.Volume)[name]; ok {
				return content
			}
		}
	}
	return ""
}

// New returns an empty runtime on the given clock (nil: the real clock).
func New(c clock.PassiveClock) *Runtime {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Runtime{clock: c, pods: map[types.UID]*pod{}, byID: map[string]*container{}, images: map[string]runtime.Image{}}
}

// Type is "sim".
func (r *Runtime) Type() string { return Name }

// Version is the runtime's version.
func (r *Runtime) Version() string { return Version }

// SetDown makes every call fail with err (nil: working again), to test
// how the agent copes with a broken runtime (the PLEG turns unhealthy).
func (r *Runtime) SetDown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = err
}

// newFullID is a new container's full ID, "sim://" and 64 hex digits, in
// one allocation (the short ID is its tail).
func newFullID() string {
	const prefix = Name + "://"
	var raw [32]byte
	for i := 0; i < len(raw); i += 8 {
		binary.BigEndian.PutUint64(raw[i:], rand.Uint64())
	}
	b := make([]byte, len(prefix)+hex.EncodedLen(len(raw)))
	copy(b, prefix)
	hex.Encode(b[len(prefix):], raw[:])
	return string(b)
}

// advance runs a container up to now: its program, then SIGTERM and
// SIGKILL if it is being stopped; then schedules its next change.
func (c *container) advance(now time.Time) {
	c.run(now)
	c.schedule()
}

func (c *container) run(now time.Time) {
	if c.exited {
		return
	}
	step := func(to time.Time) {
		c.proc.Advance(to)
		if c.proc.Exited() {
			c.exit(c.proc.ExitTime(), c.proc.ExitCode(), c.proc.OOMKilled())
		}
	}
	if c.stopRequested {
		if !c.termDelivered && !now.Before(c.termAt) {
			step(c.termAt)
			if c.exited {
				return
			}
			if c.proc.HandlesSIGTERM() {
				c.proc.Kill(c.termAt, 0)
				c.exit(c.termAt, 0, false)
				return
			}
			c.termDelivered = true
		}
		if !now.Before(c.killAt) {
			step(c.killAt)
			if !c.exited {
				c.proc.Kill(c.killAt, 137)
				c.exit(c.killAt, 137, false)
			}
			return
		}
	}
	step(now)
}

// Limits of a termination message, as the kubelet's.
const (
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

func (c *container) exit(at time.Time, code int, oom bool) {
	c.exited, c.finished, c.exitCode = true, at, int32(code)
	c.changed()
	switch {
	case oom:
		c.reason = "OOMKilled"
	case code == 0:
		c.reason = "Completed"
	default:
		c.reason = "Error"
	}
	if c.msgPath != "" {
		c.message = c.file(c.msgPath)
		if len(c.message) > maxTerminationMessage {
			c.message = c.message[:maxTerminationMessage]
		}
	}
	// Followers of the log drain it and end.
	defer c.logs.notify()
	if c.message == "" && c.msgFromLogs && code != 0 {
		var b strings.Builder
		logs := c.logs.kept()
		for _, l := range logs[max(0, len(logs)-fallbackLogLines):] {
			b.WriteString(l.Text)
		}
		m := b.String()
		if len(m) > fallbackLogBytes {
			m = m[len(m)-fallbackLogBytes:]
		}
		c.message = m
	}
}

func (c *container) state() runtime.ContainerState {
	if c.exited {
		return runtime.ContainerStateExited
	}
	return runtime.ContainerStateRunning
}

// ListPods lists every pod and container, advanced to now.
func (r *Runtime) ListPods(_ context.Context) ([]runtime.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return nil, r.down
	}
	now := r.clock.Now()
	out := make([]runtime.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		rp := runtime.Pod{ID: p.uid, Name: p.name, Namespace: p.ns, SandboxReady: p.sandboxReady, Containers: make([]runtime.Container, 0, len(p.containers))}
		for _, c := range p.containers {
			c.advance(now)
			rp.Containers = append(rp.Containers, runtime.Container{ID: c.fullID, Name: c.name, State: c.state()})
		}
		out = append(out, rp)
	}
	return out, nil
}

// GetPodStatus returns the pod's status, advanced to now.
func (r *Runtime) GetPodStatus(_ context.Context, uid types.UID) (*runtime.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return nil, r.down
	}
	p, ok := r.pods[uid]
	if !ok {
		return &runtime.PodStatus{ID: uid}, nil
	}
	now := r.clock.Now()
	st := &runtime.PodStatus{ID: uid, Name: p.name, Namespace: p.ns, SandboxReady: p.sandboxReady}
	if p.ip != "" {
		st.IPs = []string{p.ip}
	}
	for i := len(p.containers) - 1; i >= 0; i-- {
		c := p.containers[i]
		c.advance(now)
		cs := runtime.ContainerStatus{
			ID: c.fullID, Name: c.name, State: c.state(), Attempt: c.attempt,
			CreatedAt: c.created, StartedAt: c.created, Image: c.image, ImageRef: c.ref, Hash: c.hash,
		}
		if c.exited {
			cs.FinishedAt, cs.ExitCode, cs.Reason, cs.Message = c.finished, c.exitCode, c.reason, c.message
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st, nil
}

// NextChange is the earliest instant after which a container of the pod
// does something by itself (a sleep ends, a kill is due); zero when none
// is scheduled. The agent uses it to wake a pod's worker on time.
func (r *Runtime) NextChange(uid types.UID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return time.Time{}
	}
	var next time.Time
	for _, c := range p.containers {
		next = earliest(next, c.nextChange())
	}
	return next
}

// nextChange is the container's next scheduled change (zero: none).
func (c *container) nextChange() time.Time {
	if c.exited {
		return time.Time{}
	}
	next := c.proc.WakeAt()
	if c.stopRequested {
		if !c.termDelivered {
			next = earliest(next, c.termAt)
		}
		next = earliest(next, c.killAt)
	}
	return next
}

// earliest is the earlier of two instants, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// RunPodSandbox creates the pod's sandbox; running it again is a no-op
// unless the sandbox was stopped.
func (r *Runtime) RunPodSandbox(_ context.Context, cfg runtime.SandboxConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return r.down
	}
	p, ok := r.pods[cfg.UID]
	if !ok {
		p = &pod{uid: cfg.UID, name: cfg.Name, ns: cfg.Namespace, rt: r}
		r.pods[cfg.UID] = p
	}
	if !p.sandboxReady {
		r.markChanged(p)
	}
	p.sandboxReady, p.ip = true, cfg.IP
	return nil
}

// StopPodSandbox kills the pod's running containers and marks the sandbox
// not ready.
func (r *Runtime) StopPodSandbox(_ context.Context, uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return r.down
	}
	p, ok := r.pods[uid]
	if !ok {
		return nil
	}
	now := r.clock.Now()
	for _, c := range p.containers {
		c.advance(now)
		if !c.exited {
			c.proc.Kill(now, 137)
			c.exit(now, 137, false)
		}
	}
	if p.sandboxReady {
		r.markChanged(p)
	}
	p.sandboxReady = false
	return nil
}

// RemovePod removes the pod and its containers.
func (r *Runtime) RemovePod(_ context.Context, uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return r.down
	}
	if p, ok := r.pods[uid]; ok {
		for _, c := range p.containers {
			delete(r.byID, c.id)
			c.remove()
		}
		delete(r.pods, uid)
		r.markChanged(p)
	}
	return nil
}

// normalizeImage returns the full reference a runtime reports for image
// ("busybox" → "docker.io/library/busybox:latest").
func normalizeImage(image string) (string, error) {
	if image == "" || strings.ContainsAny(image, " \t\n") || image != strings.TrimSpace(image) || strings.HasSuffix(image, ":") ||
		strings.HasPrefix(image, "/") || strings.Contains(image, "//") {
		return "", runtime.ErrInvalidImage
	}
	for _, c := range image {
		if c >= 'A' && c <= 'Z' {
			// repository names are lower case (tags may not be checked).
			if i := strings.LastIndexAny(image, ":@"); i < 0 || !strings.ContainsRune(image[i:], c) {
				return "", runtime.ErrInvalidImage
			}
		}
	}
	name, rest := image, ""
	if i := strings.Index(image, "@"); i >= 0 {
		name, rest = image[:i], image[i:]
	} else if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		name, rest = image[:i], image[i:]
	}
	if rest == "" {
		rest = ":latest"
	}
	first, _, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	return name + rest, nil
}

func digestRef(full string) string {
	name := full
	if i := strings.Index(full, "@"); i >= 0 {
		return full
	}
	if i := strings.LastIndex(full, ":"); i > strings.LastIndex(full, "/") {
		name = full[:i]
	}
	sum := sha256.Sum256([]byte(full))
	return name + "@sha256:" + hex.EncodeToString(sum[:])
}

// HasImage reports whether the image was pulled on this node.
func (r *Runtime) HasImage(_ context.Context, image string) bool {
	full, err := normalizeImage(image)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.images[full]
	return ok
}

// PullImage "pulls" an image at once; its size is imageSize's.
func (r *Runtime) PullImage(_ context.Context, image string) (runtime.Image, error) {
	full, err := normalizeImage(image)
	if err != nil {
		return runtime.Image{}, err
	}
	tag := full[strings.LastIndexAny(full, ":@"):]
	if strings.Contains(tag, "doesnotexist") || strings.Contains(tag, "notfound") {
		return runtime.Image{}, fmt.Errorf("%w: failed to pull and unpack image %q: %s: not found", runtime.ErrImagePull, full, full)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return runtime.Image{}, r.down
	}
	img := runtime.Image{Ref: digestRef(full), Size: imageSize(full)}
	r.images[full] = img
	return img, nil
}

// repositorySizes are the typical sizes of well-known images (what
// containerd reports for linux/amd64), so that Pulled events read as they
// do on a real node.
var repositorySizes = map[string]uint64{
	"docker.io/library/busybox":  4_270_000,
	"docker.io/library/alpine":   3_650_000,
	"docker.io/library/nginx":    72_100_000,
	"docker.io/library/httpd":    58_000_000,
	"docker.io/library/redis":    45_000_000,
	"docker.io/library/postgres": 160_000_000,
	"docker.io/library/python":   380_000_000,
	"docker.io/library/ubuntu":   29_700_000,
	"docker.io/library/debian":   49_500_000,
	"registry.k8s.io/pause":      320_000,
	"registry.k8s.io/liveness":   2_400_000,
}

// imageSize is a stable pseudo-size for a full image reference: the
// repository's typical size (10 to 90 MB for unknown ones), varied by up to
// ±5% per tag or digest, so that different versions differ as they do.
func imageSize(full string) uint64 {
	name := full
	if i := strings.Index(full, "@"); i >= 0 {
		name = full[:i]
	} else if i := strings.LastIndex(full, ":"); i > strings.LastIndex(full, "/") {
		name = full[:i]
	}
	sum := sha256.Sum256([]byte(full))
	h := binary.BigEndian.Uint64(sum[:8])
	base, ok := repositorySizes[name]
	if !ok {
		nameSum := sha256.Sum256([]byte(name))
		base = 10_000_000 + binary.BigEndian.Uint64(nameSum[:8])%80_000_000
	}
	// ±5%, in bytes.
	spread := base / 10
	return base - base/20 + h%(spread+1)
}

// StartContainer creates and starts a container running cfg.Argv.
// SetVolume keeps the files of one of the pod's volumes and writes them
// into the containers that mount it; files no longer in the volume stay
// (a token volume only ever replaces its files' contents).
func (r *Runtime) SetVolume(_ context.Context, uid types.UID, volume string, files map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return r.down
	}
	p, ok := r.pods[uid]
	if !ok {
		return fmt.Errorf("pod sandbox of %s: %w", uid, runtime.ErrNotFound)
	}
	i := slices.IndexFunc(p.volumes, func(v podVolume) bool { return v.name == volume })
	switch {
	case i < 0:
		p.volumes = append(p.volumes, podVolume{volume, files})
	case maps.Equal(p.volumes[i].files, files):
		return nil // as it is: nothing to write
	default:
		p.volumes[i].files = files
	}
	for _, c := range p.containers {
		if !c.exited {
			c.mountVolume(volume, files)
		}
	}
	return nil
}

func (r *Runtime) StartContainer(_ context.Context, uid types.UID, cfg runtime.ContainerConfig) (string, error) {
	prog, err := shell.FromArgv(cfg.Argv)
	if err != nil {
		// As sh does: start, report the syntax error, exit 2.
		prog = shell.Failing("sh: "+err.Error(), 2)
	}
	full, err := normalizeImage(cfg.Image)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return "", r.down
	}
	p, ok := r.pods[uid]
	if !ok || !p.sandboxReady {
		return "", fmt.Errorf("pod sandbox of %s: %w", uid, runtime.ErrNotFound)
	}
	img, ok := r.images[full]
	if !ok {
		return "", fmt.Errorf("image %q: %w", full, runtime.ErrNotFound)
	}
	now := r.clock.Now()
	fullID := newFullID()
	c := &container{
		id: fullID[len(Name)+3:], fullID: fullID, name: cfg.Name, pod: p, image: full, ref: img.Ref, hash: cfg.Hash, attempt: cfg.Attempt, created: now,
		msgPath: cfg.TerminationMessagePath, msgFromLogs: cfg.TerminationMessageFallbackToLogs,
		mounts: cfg.Mounts, declaredMemory: declaredMemory(cfg.Env), memoryLimit: cfg.MemoryLimit,
	}
	if len(cfg.Env) > 0 {
		c.envVars = cfg.Env
	}
	var env *shell.Env
	if prog != nil {
		env = c.shellEnv() // a script runs in it from the start
	}
	c.proc = prog.Start(now, env)
	c.advance(now)
	p.containers = append(p.containers, c)
	r.byID[c.id] = c
	r.markChanged(p)
	return c.fullID, nil
}

func (r *Runtime) lookup(id string) (*container, error) {
	if r.down != nil {
		return nil, r.down
	}
	c, ok := r.byID[strings.TrimPrefix(id, Name+"://")]
	if !ok {
		return nil, fmt.Errorf("container %q: %w", id, runtime.ErrNotFound)
	}
	return c, nil
}

// minimumGrace is the kubelet's extension of a grace period that a preStop
// hook used up.
const minimumGrace = 2 * time.Second

// StopContainer runs the preStop hook, then sends SIGTERM, then SIGKILL
// after the timeout; it returns at once.
func (r *Runtime) StopContainer(_ context.Context, id string, opts runtime.StopOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.lookup(id)
	if err != nil {
		return err
	}
	now := r.clock.Now()
	c.advance(now)
	if c.exited {
		return nil
	}
	if c.stopRequested {
		// A second stop can only shorten the grace period.
		if kill := now.Add(opts.Timeout); kill.Before(c.killAt) {
			c.killAt = kill
			if c.termAt.After(kill) {
				c.termAt = kill
			}
		}
		c.advance(now)
		return nil
	}
	c.stopRequested = true
	c.termAt, c.killAt = now, now.Add(opts.Timeout)
	var hookErr error
	if len(opts.PreStop) > 0 {
		prog, err := shell.FromArgv(opts.PreStop)
		switch {
		case err != nil:
			// As an exec of a command line sh cannot parse: 126.
			hookErr = fmt.Errorf("%w: command '%s' exited with 126: %v", runtime.ErrPreStopHook, strings.Join(opts.PreStop, " "), err)
		case prog != nil:
			code, out, took, timedOut := shell.Run(prog, now, *c.shellEnv(), opts.Timeout)
			if timedOut {
				// Still running when SIGTERM is due: not a failure (yet).
				took = opts.Timeout
			} else if code != 0 {
				hookErr = fmt.Errorf("%w: command '%s' exited with %d: %s", runtime.ErrPreStopHook, strings.Join(opts.PreStop, " "), code, out)
			}
			c.termAt = now.Add(took)
			if !c.termAt.Before(c.killAt) {
				c.killAt = c.termAt.Add(minimumGrace)
			}
		}
	}
	c.advance(now)
	return hookErr
}

// RemoveContainer removes an exited container.
func (r *Runtime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.lookup(id)
	if err != nil {
		return err
	}
	c.advance(r.clock.Now())
	if !c.exited {
		return fmt.Errorf("remove %s: container is running", id)
	}
	delete(r.byID, c.id)
	c.remove()
	for _, p := range r.pods {
		for i, pc := range p.containers {
			if pc == c {
				p.containers = append(p.containers[:i], p.containers[i+1:]...)
				r.markChanged(p)
				return nil
			}
		}
	}
	return nil
}

// ExecSync runs cmd in the container's file system through the shell;
// commands the shell does not know succeed.
func (r *Runtime) ExecSync(_ context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	prog, err := shell.FromArgv(cmd)
	if err != nil {
		return 126, []byte(err.Error()), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.lookup(id)
	if err != nil {
		return 0, nil, err
	}
	now := r.clock.Now()
	c.advance(now)
	if c.exited {
		return 0, nil, fmt.Errorf("exec in %s: %w", id, runtime.ErrNotRunning)
	}
	code, out, _, timedOut := shell.Run(prog, now, *c.shellEnv(), timeout)
	if timedOut {
		return code, []byte(out), fmt.Errorf("command %q: %w after %v", strings.Join(cmd, " "), runtime.ErrExecTimeout, timeout)
	}
	return code, []byte(out), nil
}

// remove marks a container removed from the runtime: its log's followers
// end.
func (c *container) remove() {
	c.removed = true
	c.unschedule()
	c.logs.notify()
}

// Logs returns the log the runtime keeps of the container, line by line.
func (r *Runtime) Logs(id string) ([]LogLine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.lookup(id)
	if err != nil {
		return nil, err
	}
	c.advance(r.clock.Now())
	return append([]LogLine(nil), c.logs.kept()...), nil
}

// NormalizeImage returns the full reference the runtime reports for an
// image ("busybox" → "docker.io/library/busybox:latest"), as a container
// status's image shows it.
func NormalizeImage(image string) (string, error) { return normalizeImage(image) }

// AdoptedContainer is a container the node ran before its agent restarted,
// as the agent last reported it in the pod's status.
type AdoptedContainer struct {
	// Config is what the container runs (its argv, environment, mounts),
	// with its Attempt and Hash as they were; Config.Image is the full
	// reference the status reports.
	Config runtime.ContainerConfig
	// ID is the container's ID as reported ("sim://<id>"); ImageRef its
	// image's digest reference.
	ID, ImageRef string
	StartedAt    time.Time
	// Exited: the container had ended at FinishedAt with ExitCode, Reason
	// and Message.
	Exited          bool
	FinishedAt      time.Time
	ExitCode        int32
	Reason, Message string
}

// Adopt puts a pod back into the runtime as the node last reported it: a
// real runtime outlives its kubelet and the kubelet finds its containers
// by listing them; the simulated one lives in the agent's process, so a
// restarted agent rebuilds it from what it wrote. The sandbox is ready
// with the given IP; containers are given oldest first. A running
// container's program is replayed from its start to now (its log and
// state are what they would be had it kept running: it may have exited
// meanwhile); an exited one is replayed to its end for its log and keeps
// its recorded exit. IDs are kept, so the pod's status does not change.
// The containers' images count as present.
func (r *Runtime) Adopt(sandbox runtime.SandboxConfig, containers []AdoptedContainer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return r.down
	}
	if _, ok := r.pods[sandbox.UID]; ok {
		return fmt.Errorf("adopt pod %s: the runtime has it already", sandbox.UID)
	}
	p := &pod{uid: sandbox.UID, name: sandbox.Name, ns: sandbox.Namespace, sandboxReady: true, ip: sandbox.IP, rt: r}
	now := r.clock.Now()
	for _, ac := range containers {
		id, ok := strings.CutPrefix(ac.ID, Name+"://")
		if !ok || id == "" {
			return fmt.Errorf("adopt pod %s: container %s: ID %q is not this runtime's", sandbox.UID, ac.Config.Name, ac.ID)
		}
		if _, dup := r.byID[id]; dup {
			return fmt.Errorf("adopt pod %s: container ID %q in use", sandbox.UID, ac.ID)
		}
		prog, err := shell.FromArgv(ac.Config.Argv)
		if err != nil {
			prog = shell.Failing("sh: "+err.Error(), 2)
		}
		if _, ok := r.images[ac.Config.Image]; !ok {
			r.images[ac.Config.Image] = runtime.Image{Ref: ac.ImageRef, Size: imageSize(ac.Config.Image)}
		}
		c := &container{
			id: id, fullID: ac.ID, name: ac.Config.Name, pod: p, image: ac.Config.Image, ref: ac.ImageRef, hash: ac.Config.Hash,
			attempt: ac.Config.Attempt, created: ac.StartedAt,
			msgPath: ac.Config.TerminationMessagePath, msgFromLogs: ac.Config.TerminationMessageFallbackToLogs,
			mounts: ac.Config.Mounts, declaredMemory: declaredMemory(ac.Config.Env), memoryLimit: ac.Config.MemoryLimit,
		}
		if len(ac.Config.Env) > 0 {
			c.envVars = ac.Config.Env
		}
		var env *shell.Env
		if prog != nil {
			env = c.shellEnv()
		}
		c.proc = prog.Start(ac.StartedAt, env)
		if ac.Exited {
			// Replayed for its log only: its end is the recorded one.
			c.proc.Advance(ac.FinishedAt)
			c.proc.Kill(ac.FinishedAt, int(ac.ExitCode))
			c.exited, c.finished, c.exitCode, c.reason, c.message = true, ac.FinishedAt, ac.ExitCode, ac.Reason, ac.Message
		} else {
			c.advance(now)
		}
		p.containers = append(p.containers, c)
		r.byID[id] = c
	}
	r.pods[sandbox.UID] = p
	r.markChanged(p)
	return nil
}

// MemoryUsageEnv is the environment variable through which a container
// declares the memory it uses (a Kubernetes quantity).
const MemoryUsageEnv = "SIM_MEMORY_USAGE"

// DefaultContainerMemory is what a running container uses when it neither
// declares its usage nor runs stress: about what a small process holds.
const DefaultContainerMemory int64 = 1 << 20

// declaredMemory reads MemoryUsageEnv from env (-1 when absent or not a
// non-negative quantity).
func declaredMemory(env map[string]string) int64 {
	v, ok := env[MemoryUsageEnv]
	if !ok {
		return -1
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(v))
	if err != nil || q.Sign() < 0 {
		return -1
	}
	return q.Value()
}

// memoryUsage is the container's working set now (0 once exited).
func (c *container) memoryUsage() int64 {
	switch {
	case c.exited:
		return 0
	case c.declaredMemory >= 0:
		return c.declaredMemory
	}
	if m := c.proc.MemoryUsage(); m > 0 {
		return m
	}
	return DefaultContainerMemory
}

// PodMemory is one pod's memory use: its running containers' working sets.
type PodMemory struct {
	UID        types.UID
	Containers []ContainerMemory
	// Bytes is the sum over the containers.
	Bytes int64
}

// ContainerMemory is one running container's working set.
type ContainerMemory struct {
	Name  string
	Bytes int64
}

// MemoryStats advances every container to now and reports the memory of
// the pods that have a running container, and the node's total (the
// summary API's node working set, as far as the runtime is concerned).
// It allocates only the slice it returns (reused when buf has room).
func (r *Runtime) MemoryStats(buf []PodMemory) ([]PodMemory, int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down != nil {
		return buf[:0], 0, r.down
	}
	now := r.clock.Now()
	out := buf[:0]
	var total int64
	for _, p := range r.pods {
		var pm PodMemory
		if len(out) < cap(out) {
			// Reuse the container slice of the slot we are about to fill.
			pm.Containers = out[:len(out)+1][len(out)].Containers[:0]
		}
		pm.UID = p.uid
		for _, c := range p.containers {
			c.advance(now)
			if c.exited {
				continue
			}
			m := c.memoryUsage()
			pm.Containers = append(pm.Containers, ContainerMemory{Name: c.name, Bytes: m})
			pm.Bytes += m
		}
		if len(pm.Containers) == 0 {
			continue
		}
		total += pm.Bytes
		out = append(out, pm)
	}
	return out, total, nil
}
