package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	v1 "k8s.io/api/core/v1"
)

// KubeletEndpointAnnotation is the Node annotation earlier agents
// recorded their kubelet API's URL in. The API server no longer reads it
// (anyone who may patch a Node could point it anywhere): an agent removes
// it from the Nodes it adopts.
const KubeletEndpointAnnotation = "node.corekube.io/kubelet-endpoint"

// kubeletServer is the kubelet API of one agent process, for all its
// nodes, over HTTPS behind the kubelet's authentication and authorization
// (kubeletauth.go): GET /containerLogs/{namespace}/{pod}/{container}, /healthz,
// /metrics (the kubelet metrics of all the nodes, see metrics.go) and Go's
// profiles at /debug/pprof/ (unless Config.DisableProfiling).
// Agent.Run owns it: it listens before the nodes register (they advertise
// its URL and port) and shuts down when Run's context ends.
type kubeletServer struct {
	ln   net.Listener
	srv  *http.Server
	url  string // the base URL it is reached at: https://<advertised host>:<port>
	port int32  // the port it listens on
	log  *slog.Logger
}

// listenKubelet binds the kubelet API's address.
func (a *Agent) listenKubelet(ctx context.Context) (*kubeletServer, error) {
	ln, err := net.Listen("tcp", a.cfg.KubeletListen)
	if err != nil {
		return nil, fmt.Errorf("agent: kubelet API: %w", err)
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("agent: kubelet API listens on %v, not TCP", ln.Addr())
	}
	tlsConfig, err := a.kubeletTLS()
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &kubeletServer{ln: ln, port: int32(tcp.Port), log: a.log}
	s.url = "https://" + net.JoinHostPort(a.cfg.KubeletAdvertiseHost, strconv.Itoa(tcp.Port))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.serveContainerLogs)
	mux.Handle("GET /metrics", a.metrics.metricsHandler(a))
	if !a.cfg.DisableProfiling {
		// The kubelet's profiling handler, behind authentication and
		// authorization (nodes/proxy): heap and CPU profiles of the
		// process that carries the nodes (go tool pprof with a client
		// certificate, URL/debug/pprof/heap).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.srv = &http.Server{
		Handler:           a.metrics.instrumentKubeletAPI(a.withKubeletAuth(mux)),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		// Requests live in Run's context: when it ends, log streams being
		// followed end too, so that shutting down does not wait for them.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	return s, nil
}

// run serves until ctx ends, then shuts the server down.
func (s *kubeletServer) run(ctx context.Context) {
	served := make(chan error, 1)
	go func() { served <- s.srv.ServeTLS(s.ln, "", "") }()
	select {
	case err := <-served:
		s.log.Error("kubelet API server failed", "err", err)
		return
	case <-ctx.Done():
	}
	// Handlers see ctx end too, so this is quick; the timeout only bounds a
	// handler stuck writing to a client that does not read.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		s.srv.Close()
	}
	<-served
}

// writeText writes a plain text response. Unlike http.Error it adds no
// newline: the body is the kubelet's error text, which the API server turns
// into a Status message as it is.
func writeText(w http.ResponseWriter, code int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, text)
}

// serveContainerLogs is the kubelet's getContainerLogs: the log of a
// container of a pod on one of the process's nodes.
func (a *Agent) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, podName, containerName := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q, err := parseLogQuery(r)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, n := a.podByName(ns, podName)
	if pod == nil {
		// The kubelet's texts, trailing newline included.
		writeText(w, http.StatusNotFound, fmt.Sprintf("pod %q does not exist\n", podName))
		return
	}
	if !hasContainer(pod, containerName) {
		writeText(w, http.StatusNotFound, fmt.Sprintf("container %q not found in pod %q\n", containerName, podName))
		return
	}
	id, err := validateContainerLogStatus(pod.Name, &pod.Status, containerName, q.previous)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	opts := q.options(a.clock.Now())
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	err = n.runtime.ReadLogs(r.Context(), id, opts, fw)
	switch {
	case err == nil:
	case !fw.started:
		// The container went between the status and the read (removed by
		// garbage collection): as the kubelet's runtime says it.
		writeText(w, http.StatusBadRequest, fmt.Sprintf("unable to retrieve container logs for %s", id))
	case r.Context().Err() == nil:
		// The response is committed: the stream ends short.
		a.log.Debug("container log stream ended", "pod", ns+"/"+podName, "container", containerName, "err", err)
	}
}

// flushWriter commits a 200 text/plain response at the first write (of
// zero bytes, too) and flushes after every write, so that a followed log
// reaches the client line by line.
type flushWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.started {
		f.started = true
		h := f.w.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("X-Content-Type-Options", "nosniff")
		f.w.WriteHeader(http.StatusOK)
	}
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

// podByName finds a pod bound to one of the process's nodes, as the agent
// last knew it (its own status writes included), and its node.
func (a *Agent) podByName(namespace, name string) (*v1.Pod, *node) {
	a.workersMu.Lock()
	defer a.workersMu.Unlock()
	for _, w := range a.workers {
		pod, removed := w.statusView()
		if pod != nil && !removed && pod.Name == name && pod.Namespace == namespace {
			return pod, w.node
		}
	}
	return nil, nil
}

// hasContainer reports whether the pod's spec has the container (init,
// regular or ephemeral), as the kubelet's GetContainerSpec.
func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// validateContainerLogStatus is the kubelet's: which container's log to
// read (its ID), from the pod's status, or why there is none.
func validateContainerLogStatus(podName string, st *v1.PodStatus, containerName string, previous bool) (string, error) {
	cs, found := findStatus(st.ContainerStatuses, containerName)
	if !found {
		cs, found = findStatus(st.InitContainerStatuses, containerName)
	}
	if !found {
		cs, found = findStatus(st.EphemeralContainerStatuses, containerName)
	}
	if !found {
		return "", fmt.Errorf("container %q in pod %q is not available", containerName, podName)
	}
	last := cs.LastTerminationState.Terminated
	waiting, running, terminated := cs.State.Waiting, cs.State.Running, cs.State.Terminated
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", containerName, podName)
		}
		return last.ContainerID, nil
	case running != nil:
		return cs.ContainerID, nil
	case terminated != nil:
		// The next container may not have started: its ID is empty.
		if terminated.ContainerID != "" {
			return terminated.ContainerID, nil
		}
		if last != nil && last.ContainerID != "" {
			return last.ContainerID, nil
		}
		return "", fmt.Errorf("container %q in pod %q is terminated", containerName, podName)
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", containerName, podName)
		}
		return last.ContainerID, nil
	case waiting != nil:
		switch waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", containerName, podName)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", containerName, podName)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", containerName, podName, waiting.Reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", containerName, podName)
	}
}

func findStatus(list []v1.ContainerStatus, name string) (*v1.ContainerStatus, bool) {
	for i := range list {
		if list[i].Name == name {
			return &list[i], true
		}
	}
	return nil, false
}

// logQuery is the query of a container log request: the v1.PodLogOptions
// the API server forwards.
type logQuery struct {
	follow, previous, timestamps bool
	tailLines                    *int64
	sinceSeconds                 *int64
	sinceTime                    *time.Time
	limitBytes                   *int64
}

// parseLogQuery reads and validates the query as the kubelet does
// (ValidatePodLogOptions), every failure a 400 here.
func parseLogQuery(r *http.Request) (logQuery, error) {
	var q logQuery
	values := r.URL.Query()
	boolParam := func(name string, dst *bool) error {
		s := values.Get(name)
		if s == "" {
			return nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid %s %q: must be true or false", name, s)
		}
		*dst = b
		return nil
	}
	intParam := func(name string, minimum int64) (*int64, error) {
		s := values.Get(name)
		if s == "" {
			return nil, nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid %s %q: must be an integer", name, s)
		}
		if v < minimum {
			return nil, fmt.Errorf("invalid %s %d: must be greater than or equal to %d", name, v, minimum)
		}
		return &v, nil
	}
	var err error
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"follow", &q.follow}, {"previous", &q.previous}, {"timestamps", &q.timestamps}} {
		if err := boolParam(p.name, p.dst); err != nil {
			return q, err
		}
	}
	if q.tailLines, err = intParam("tailLines", 0); err != nil {
		return q, err
	}
	if q.sinceSeconds, err = intParam("sinceSeconds", 1); err != nil {
		return q, err
	}
	if q.limitBytes, err = intParam("limitBytes", 1); err != nil {
		return q, err
	}
	if s := values.Get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, fmt.Errorf("invalid sinceTime %q: must be an RFC 3339 time", s)
		}
		q.sinceTime = &t
	}
	if q.sinceSeconds != nil && q.sinceTime != nil {
		return q, errors.New("at most one of sinceTime or sinceSeconds may be specified")
	}
	return q, nil
}

// options resolves the query against now, as the kubelet's NewLogOptions.
func (q logQuery) options(now time.Time) runtime.LogOptions {
	opts := runtime.LogOptions{Follow: q.follow, Timestamps: q.timestamps, TailLines: q.tailLines}
	if q.limitBytes != nil {
		opts.LimitBytes = *q.limitBytes
	}
	if q.sinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*q.sinceSeconds) * time.Second)
	}
	if q.sinceTime != nil && q.sinceTime.After(opts.Since) {
		opts.Since = *q.sinceTime
	}
	return opts
}
