package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strings"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// startContainer does what the kubelet's startContainer does: the image
// (per the pull policy, with its own back-off), create, start, the
// postStart hook, and the events of each step. It returns whether the
// container's waiting reason changed.
func (a *Agent) startContainer(ctx context.Context, w *podWorker, pod *v1.Pod, c *v1.Container, attempt int) bool {
	n := w.node
	fp := containerFieldPath(pod, c.Name)
	now := a.clock.Now()
	event := func(typ, reason, msg string) { a.events.podEvent(pod, fp, n, typ, reason, msg) }
	setReason := func(reason, msg string) bool {
		r := waitingReason{reason, msg}
		changed := w.reasons[c.Name] != r
		setIn(&w.reasons, c.Name, r)
		return changed
	}

	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
		if i := strings.LastIndex(c.Image, ":"); i < 0 || strings.Contains(c.Image[i:], "/") || c.Image[i+1:] == "latest" {
			policy = v1.PullAlways
		}
	}
	present := n.runtime.HasImage(ctx, c.Image)
	switch {
	case policy == v1.PullNever && !present:
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		event(v1.EventTypeWarning, "ErrImageNeverPull", msg)
		return setReason("ErrImageNeverPull", msg)
	case policy == v1.PullAlways || !present:
		if e, ok := w.imageBackoff[c.Image]; ok && now.Sub(e.lastUpdate) < e.backoff {
			msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
			event(v1.EventTypeNormal, "BackOff", msg)
			event(v1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
			return setReason("ImagePullBackOff", msg)
		}
		event(v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
		img, err := n.runtime.PullImage(ctx, c.Image)
		if errors.Is(err, runtime.ErrInvalidImage) {
			msg := fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: invalid reference format", c.Image, c.Image)
			event(v1.EventTypeWarning, "InspectFailed", msg)
			event(v1.EventTypeWarning, "Failed", "Error: InvalidImageName")
			return setReason("InvalidImageName", msg)
		}
		if err != nil {
			msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
			event(v1.EventTypeWarning, "Failed", msg)
			event(v1.EventTypeWarning, "Failed", "Error: ErrImagePull")
			e, ok := w.imageBackoff[c.Image]
			switch {
			case !ok:
				setIn(&w.imageBackoff, c.Image, &backoffEntry{backoff: a.cfg.BackoffBase, lastUpdate: now})
			default:
				e.backoff = min(e.backoff*2, a.cfg.BackoffMax)
				e.lastUpdate = now
			}
			return setReason("ErrImagePull", msg)
		}
		delete(w.imageBackoff, c.Image)
		pulled := a.clock.Now()
		w.recordPull(now, pulled)
		// The pull itself and the pull with its wait in the puller's queue
		// (the agent pulls at once: the same), truncated as the kubelet's.
		took := pulled.Sub(now).Truncate(time.Millisecond)
		event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", c.Image, took, took, img.Size))
	default:
		event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
	}

	// Counted before the attempt, as the kubelet does.
	n.metrics.startedContainers[containerTypeOf(pod, c)].get().Inc()
	id, err := n.runtime.StartContainer(ctx, w.uid, a.containerConfig(pod, c, w, attempt))
	if err != nil {
		event(v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return setReason("CreateContainerError", err.Error())
	}
	event(v1.EventTypeNormal, "Created", fmt.Sprintf("Created container %s", c.Name))
	event(v1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.Name))
	_, had := w.reasons[c.Name]
	delete(w.reasons, c.Name)

	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg := a.runHook(ctx, n, pod, c, id, c.Lifecycle.PostStart); msg != "" {
			// As the kubelet: the event leaves the message out (it could
			// carry secrets); the waiting reason has it. The container is
			// killed as any other, preStop hook included, and restarts per
			// the restart policy, with back-off.
			event(v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed")
			if err := a.stopContainer(ctx, w, pod, c, id, podGracePeriod(pod), "FailedPostStartHook"); err != nil {
				a.log.Warn("container not stopped after its postStart hook failed", "pod", w.key(), "container", c.Name, "err", err)
			}
			setIn(&w.reasons, c.Name, waitingReason{"PostStartHookError", msg})
			return true
		}
	}
	return had
}

// containerConfig is what the runtime runs for container c of the pod:
// its command and args after $(VAR) expansion, its environment, memory
// limit, mounts and the hash of its definition.
func (a *Agent) containerConfig(pod *v1.Pod, c *v1.Container, w *podWorker, attempt int) runtime.ContainerConfig {
	env := a.containerEnv(pod, c, w)
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, s := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expandVars(s, env))
	}
	var memLimit int64
	if q, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		memLimit = q.Value()
	}
	return runtime.ContainerConfig{
		Name: c.Name, Image: c.Image, Argv: argv, Env: env, MemoryLimit: memLimit, Attempt: attempt, Hash: containerHash(c),
		TerminationMessagePath:           c.TerminationMessagePath,
		TerminationMessageFallbackToLogs: c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError,
		Mounts:                           containerMounts(pod, c),
	}
}

// runHook runs a lifecycle handler as the kubelet's handler runner does
// and returns why it failed, in the kubelet's words ("" when it succeeded).
// Exec handlers run through the simulated shell in the container; HTTP
// handlers succeed while the container runs (there is no network to reach
// it through), as the agent's HTTP probes; sleep handlers succeed at once
// (a postStart sleep does not hold the sync up); TCP handlers fail, as the
// kubelet does not run them (the API keeps the field for compatibility
// only).
func (a *Agent) runHook(ctx context.Context, n *node, pod *v1.Pod, c *v1.Container, id string, h *v1.LifecycleHandler) string {
	switch {
	case h.Exec != nil:
		// The kubelet gives hooks no timeout of their own; the grace
		// period bounds the simulated run.
		code, out, err := n.runtime.ExecSync(ctx, id, h.Exec.Command, podGracePeriod(pod))
		if err == nil && code != 0 {
			// The CRI client's error for a non-zero exit.
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), code, out)
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q", h.Exec.Command, c.Name, podFormat(pod), err, string(out))
		}
	case h.HTTPGet != nil:
		if err := a.reachable(ctx, n, pod, c, id, h.HTTPGet.Host, h.HTTPGet.Port.String(), h.HTTPGet.Path, h.HTTPGet.Scheme); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, podFormat(pod), err)
		}
	case h.Sleep != nil:
	default:
		return fmt.Sprintf("Cannot run handler: %v", fmt.Errorf("invalid handler: %v", h))
	}
	return ""
}

// reachable is the outcome of an HTTP GET against a container: it answers
// while it runs; otherwise the connection is refused, worded as Go's HTTP
// client words it.
func (a *Agent) reachable(ctx context.Context, n *node, pod *v1.Pod, c *v1.Container, id, host, port, path string, scheme v1.URIScheme) error {
	rs, err := n.runtime.GetPodStatus(ctx, pod.UID)
	if err != nil {
		return err
	}
	for _, cs := range rs.ContainerStatuses {
		if cs.ID == id && cs.State == runtime.ContainerStateRunning {
			return nil
		}
	}
	if host == "" {
		host = n.ip
		if len(rs.IPs) > 0 && !pod.Spec.HostNetwork {
			host = rs.IPs[0]
		}
	}
	for _, p := range c.Ports {
		if p.Name == port {
			port = fmt.Sprint(p.ContainerPort)
		}
	}
	if scheme == "" {
		scheme = v1.URISchemeHTTP
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	addr := net.JoinHostPort(host, port)
	return fmt.Errorf("Get %q: dial tcp %s: connect: connection refused", strings.ToLower(string(scheme))+"://"+addr+path, addr)
}

// containerHash is the kubelet's HashContainer: a hash of the container
// fields whose change restarts a running container. Since v1.31 those are
// its name and image, the only ones that may change and matter.
func containerHash(c *v1.Container) uint64 {
	h := fnv.New32a()
	b, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h.Write(b)
	return uint64(h.Sum32())
}

// containerEnv resolves a container's environment: literal values (with
// $(VAR) references to earlier ones) and the downward API's fieldRef and
// resourceFieldRef. ConfigMap and Secret references are not served by
// corekube and are left out.
func (a *Agent) containerEnv(pod *v1.Pod, c *v1.Container, w *podWorker) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandVars(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = a.podField(pod, e.ValueFrom.FieldRef.FieldPath, w)
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = resourceField(pod, c, e.ValueFrom.ResourceFieldRef)
		}
	}
	return env
}

func (a *Agent) podField(pod *v1.Pod, path string, w *podWorker) string {
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "status.hostIP", "status.hostIPs":
		return w.node.ip
	case "status.podIP", "status.podIPs":
		if pod.Spec.HostNetwork {
			return w.node.ip
		}
		ip, _ := w.node.addresses().allocate(w.uid)
		return ip
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			return m[strings.TrimSuffix(key, "']")]
		}
	}
	return ""
}

// resourceField is the downward API's resourceFieldRef: the container's
// limit (or request), in units of the divisor, rounded up.
func resourceField(pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector) string {
	if ref.ContainerName != "" {
		if s := containerSpec(pod, ref.ContainerName); s != nil {
			c = s
		}
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[v1.ResourceName(name)]
	if !ok {
		return "0"
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		v := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
		return fmt.Sprint(v)
	}
	v := (q.Value() + divisor.Value() - 1) / divisor.Value()
	return fmt.Sprint(v)
}

// expandVars is the kubelet's $(VAR) expansion of env values, command and
// args: $(NAME) becomes the variable's value when it is defined (else it
// stays as written); $$ is a literal $.
func expandVars(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
