// Package runtime is the container runtime interface the node agent drives:
// a small slice of the kubelet's view of the CRI (pod sandboxes, containers,
// images, exec), so that a real runtime could take the simulated one's place
// (agent/runtime/sim).
//
// Calls never block for long: StopContainer sends the stop and returns; the
// container's exit is observed by listing (the PLEG's relist), as with a
// real runtime.
package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ContainerState is a container's state as the runtime reports it.
type ContainerState string

// The states of a container.
const (
	ContainerStateCreated ContainerState = "created"
	ContainerStateRunning ContainerState = "running"
	ContainerStateExited  ContainerState = "exited"
	ContainerStateUnknown ContainerState = "unknown"
)

// Container is a container as ListPods reports it: identity and state.
type Container struct {
	// ID is "<runtime type>://<id>", the form of status.containerStatuses[].containerID.
	ID    string
	Name  string
	State ContainerState
}

// Pod is a pod as ListPods reports it, exited containers included.
type Pod struct {
	ID         types.UID
	Name       string
	Namespace  string
	Containers []Container
	// SandboxReady: the pod's sandbox runs (the kubelet counts these pods
	// as running, kubelet_running_pods).
	SandboxReady bool
}

// ContainerStatus is the detailed status of one container.
type ContainerStatus struct {
	ID    string
	Name  string
	State ContainerState
	// Attempt is the container's restart count: 0 for the first container of
	// that name in the pod, one more for each restart.
	Attempt    int
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// Reason is Completed, Error or OOMKilled once exited.
	Reason  string
	Message string
	// Image is the image reference as the runtime resolved it
	// (docker.io/library/busybox:latest); ImageRef its digest reference.
	Image    string
	ImageRef string
	// Hash is ContainerConfig.Hash of the container.
	Hash uint64
}

// PodStatus is the detailed status of one pod.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// SandboxReady reports a sandbox with its network set up.
	SandboxReady bool
	IPs          []string
	// ContainerStatuses lists every container the runtime still has, the
	// newest first.
	ContainerStatuses []ContainerStatus
}

// SandboxConfig describes a pod sandbox.
type SandboxConfig struct {
	UID       types.UID
	Name      string
	Namespace string
	Hostname  string
	// IP is the pod IP (the simulated runtime has no network plugin; the
	// agent allocates the address).
	IP string
}

// ContainerConfig describes a container to create and start.
type ContainerConfig struct {
	Name  string
	Image string
	// Argv is the command followed by the args, after the kubelet's
	// $(VAR) expansion.
	Argv        []string
	Env         map[string]string
	MemoryLimit int64
	// Attempt is the restart count of the new container.
	Attempt int
	// Hash is the agent's hash of the container's definition, kept with the
	// container (a CRI runtime keeps it in the container's annotations) and
	// reported back by GetPodStatus, so that a changed definition shows.
	Hash uint64
	// TerminationMessagePath is the file whose content becomes the
	// terminated state's message; TerminationMessageFallbackToLogs uses the
	// end of the log instead when that file is empty and the container
	// failed.
	TerminationMessagePath           string
	TerminationMessageFallbackToLogs bool
	// Mounts are the pod volumes (SetVolume) the container sees, each at
	// its path.
	Mounts []Mount
}

// Mount puts a pod volume's files below Path in a container's file system.
type Mount struct {
	// Volume is the volume's name in the pod.
	Volume string
	// Path is the absolute directory the files appear in.
	Path string
}

// Image is an image present on the node.
type Image struct {
	// Ref is the image's digest reference (a container status's imageID).
	Ref string
	// Size is the image's size in bytes, as the CRI's ImageStatus reports
	// it.
	Size uint64
}

// StopOptions says how to stop a container.
type StopOptions struct {
	// Timeout is the grace period: SIGKILL follows SIGTERM after it.
	Timeout time.Duration
	// PreStop is an exec preStop hook, run before SIGTERM within Timeout.
	PreStop []string
}

// LogOptions says which part of a container's log ReadLogs writes, as the
// kubelet's PodLogOptions do once resolved against the current time.
type LogOptions struct {
	// TailLines, when set, keeps only the last that many lines (0: none;
	// with Follow, only what is written from now on).
	TailLines *int64
	// Since drops the lines written before it (zero: keep all).
	Since time.Time
	// LimitBytes stops the output after that many bytes, cutting the last
	// line (0: no limit).
	LimitBytes int64
	// Timestamps prefixes each line with the time it was written, in UTC,
	// formatted as TimestampFormat, and a space.
	Timestamps bool
	// Follow keeps writing what the container writes until it exits.
	Follow bool
}

// TimestampFormat is the format of the time ReadLogs prefixes lines with
// (the kubelet's timeFormatOut): RFC 3339 with nanoseconds, never trimmed.
const TimestampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Errors the runtime returns.
var (
	ErrNotFound     = errors.New("not found")
	ErrNotRunning   = errors.New("container is not running")
	ErrExecTimeout  = errors.New("command timed out")
	ErrRuntimeDown  = errors.New("container runtime is down")
	ErrImagePull    = errors.New("ErrImagePull")
	ErrInvalidImage = errors.New("InvalidImageName")
	// ErrPreStopHook: the preStop hook StopContainer ran failed; the
	// container is being stopped all the same.
	ErrPreStopHook = errors.New("preStop hook failed")
)

// Runtime is a container runtime.
type Runtime interface {
	// Type is the runtime's name, the scheme of container IDs ("sim").
	Type() string
	// Version is the runtime's version.
	Version() string
	// ListPods lists all pods with all their containers, exited ones
	// included.
	ListPods(ctx context.Context) ([]Pod, error)
	// GetPodStatus returns the status of a pod's sandbox and containers;
	// a pod the runtime does not know has an empty status.
	GetPodStatus(ctx context.Context, uid types.UID) (*PodStatus, error)
	// RunPodSandbox creates a pod's sandbox (its network namespace).
	RunPodSandbox(ctx context.Context, cfg SandboxConfig) error
	// StopPodSandbox kills what still runs in the pod and tears its
	// network down.
	StopPodSandbox(ctx context.Context, uid types.UID) error
	// RemovePod removes the sandbox and every container of the pod.
	RemovePod(ctx context.Context, uid types.UID) error
	// HasImage reports whether the image is present on the node.
	HasImage(ctx context.Context, image string) bool
	// PullImage pulls an image and returns what was pulled: its digest
	// reference and size (what the kubelet reports in its Pulled event).
	PullImage(ctx context.Context, image string) (Image, error)
	// SetVolume sets the files of a pod volume (name relative to the
	// volume → content), as the kubelet's atomic writer replaces a
	// projected volume's content: containers that mount it, running or
	// started later, see the new files.
	SetVolume(ctx context.Context, uid types.UID, volume string, files map[string]string) error
	// StartContainer creates and starts a container in the pod's sandbox;
	// it returns the container's ID.
	StartContainer(ctx context.Context, uid types.UID, cfg ContainerConfig) (string, error)
	// StopContainer stops a container (preStop hook, SIGTERM, SIGKILL after
	// the timeout) and returns at once; the exit shows in later listings.
	// When the preStop hook fails the stop goes on and the error wraps
	// ErrPreStopHook.
	StopContainer(ctx context.Context, id string, opts StopOptions) error
	// RemoveContainer removes an exited container.
	RemoveContainer(ctx context.Context, id string) error
	// ExecSync runs a command in a running container and returns its exit
	// code and output; ErrExecTimeout when it runs longer than timeout.
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error)
	// ReadLogs writes the log of a container, running or exited, to w, as
	// the kubelet's GetContainerLogs: the part opts selects, then, when
	// following, what the container writes until it exits, is removed, or
	// ctx ends (ctx's error). Once the container is found it writes to w
	// at once, zero bytes if there is nothing to write yet, so that a
	// streaming caller can commit its response before the first line;
	// an unknown container is ErrNotFound before any write.
	ReadLogs(ctx context.Context, id string, opts LogOptions, w io.Writer) error
}
