package agent

import (
	"context"
	"errors"
	"fmt"
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
		w.reasons[c.Name] = r
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
		_, err := n.runtime.PullImage(ctx, c.Image)
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
				w.imageBackoff[c.Image] = &backoffEntry{backoff: a.cfg.BackoffBase, lastUpdate: now}
			default:
				e.backoff = min(e.backoff*2, a.cfg.BackoffMax)
				e.lastUpdate = now
			}
			return setReason("ErrImagePull", msg)
		}
		delete(w.imageBackoff, c.Image)
		took := a.clock.Since(now).Round(time.Millisecond)
		event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: 0 bytes.", c.Image, took, took))
	default:
		event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
	}

	env := a.containerEnv(pod, c, w)
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, s := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expandVars(s, env))
	}
	var memLimit int64
	if q, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		memLimit = q.Value()
	}
	id, err := n.runtime.StartContainer(ctx, w.uid, runtime.ContainerConfig{
		Name: c.Name, Image: c.Image, Argv: argv, Env: env, MemoryLimit: memLimit, Attempt: attempt,
		TerminationMessagePath:           c.TerminationMessagePath,
		TerminationMessageFallbackToLogs: c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError,
	})
	if err != nil {
		event(v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return setReason("CreateContainerError", err.Error())
	}
	event(v1.EventTypeNormal, "Created", fmt.Sprintf("Created container %s", c.Name))
	event(v1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.Name))
	_, had := w.reasons[c.Name]
	delete(w.reasons, c.Name)

	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil && c.Lifecycle.PostStart.Exec != nil {
		cmd := c.Lifecycle.PostStart.Exec.Command
		code, out, err := n.runtime.ExecSync(ctx, id, cmd, podGracePeriod(pod))
		if err == nil && code != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, out)
		}
		if err != nil {
			event(v1.EventTypeWarning, "FailedPostStartHook",
				fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q", cmd, c.Name, podFormat(pod), err, string(out)))
			event(v1.EventTypeNormal, "Killing", "FailedPostStartHook")
			grace := podGracePeriod(pod)
			if err := n.runtime.StopContainer(ctx, id, runtime.StopOptions{Timeout: grace}); err == nil {
				w.stopping[id] = grace
			}
		}
	}
	return had
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
