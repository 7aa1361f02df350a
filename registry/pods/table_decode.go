package pods

import (
	"encoding/json"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/watch/rawjson"
)

var _ registry.TableDecoder = (*Strategy)(nil)

// DecodeForTable decodes a pod for printing: the whole ObjectMeta (a Table
// row's PartialObjectMetadata), and of spec and status only what TableRow
// reads. It walks the JSON itself and skips the rest with a byte scan:
// most of a pod is what no column shows (containers' images, env,
// resources, volumes; the status's times, images and IDs), and
// json.Unmarshal into a v1.Pod costs ~4× as much, most of it reflection
// and allocation for those.
func (*Strategy) DecodeForTable(data []byte) (runtime.Object, error) {
	pod := &v1.Pod{}
	it := rawjson.NewObject(data)
	for it.Next() {
		var err error
		switch string(it.Key()) {
		case "metadata":
			err = registry.DecodeObjectMeta(it.Value(), &pod.ObjectMeta)
		case "spec":
			err = decodeSpecForTable(it.Value(), &pod.Spec)
		case "status":
			err = decodeStatusForTable(it.Value(), &pod.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("decode pod for a table: %s: %w", it.Key(), err)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("decode pod for a table: %w", err)
	}
	return pod, nil
}

// tableStrings are values that recur in every pod's status; str returns
// them shared instead of allocating a copy per pod.
var tableStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		string(v1.PodPending), string(v1.PodRunning), string(v1.PodSucceeded), string(v1.PodFailed), string(v1.PodUnknown),
		string(v1.PodReadyToStartContainers), string(v1.PodInitialized), string(v1.ContainersReady), string(v1.PodReady),
		string(v1.PodScheduled), string(v1.DisruptionTarget),
		string(v1.ConditionTrue), string(v1.ConditionFalse), string(v1.ConditionUnknown),
		v1.PodReasonUnschedulable, v1.PodReasonSchedulingGated, "ContainersNotReady", "PodCompleted",
		"ContainerCreating", "PodInitializing", "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
	} {
		m[s] = s
	}
	return m
}()

// str is rawjson.String, sharing the strings of tableStrings.
func str(value []byte) (string, error) {
	if len(value) >= 2 {
		if s, ok := tableStrings[string(value[1:len(value)-1])]; ok {
			return s, nil
		}
	}
	return rawjson.String(value)
}

// decodeSpecForTable fills what the printer reads of a pod's spec: the
// node, the number of containers (with their names), the init containers'
// names and restart policies (sidecars), and the readiness gates.
func decodeSpecForTable(data []byte, spec *v1.PodSpec) error {
	it := rawjson.NewObject(data)
	for it.Next() {
		var err error
		switch string(it.Key()) {
		case "nodeName":
			spec.NodeName, err = rawjson.String(it.Value())
		case "containers":
			spec.Containers, err = containerNames(it.Value())
		case "initContainers":
			var cs []struct {
				Name          string                     `json:"name"`
				RestartPolicy *v1.ContainerRestartPolicy `json:"restartPolicy"`
			}
			if err = json.Unmarshal(it.Value(), &cs); err == nil {
				spec.InitContainers = make([]v1.Container, len(cs))
				for i, c := range cs {
					spec.InitContainers[i] = v1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
				}
			}
		case "readinessGates":
			err = json.Unmarshal(it.Value(), &spec.ReadinessGates)
		}
		if err != nil {
			return err
		}
	}
	return it.Err()
}

// containerNames returns containers holding only their names. The names
// are collected first so that the (large) containers are allocated once.
func containerNames(data []byte) ([]v1.Container, error) {
	names := make([]string, 0, 8)
	it := rawjson.NewArray(data)
	for it.Next() {
		raw, err := rawjson.Member(it.Value(), "name")
		if err != nil {
			return nil, err
		}
		name, err := rawjson.String(raw)
		if err != nil && raw != nil {
			return nil, err
		}
		names = append(names, name)
	}
	if err := it.Err(); err != nil || string(data) == "null" {
		return nil, err
	}
	out := make([]v1.Container, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	return out, nil
}

// decodeStatusForTable fills what the printer reads of a pod's status:
// phase, reason, nominated node, pod IPs, the conditions' types, statuses
// and reasons, and of each container status its name, readiness, restart
// count, started flag, state and last state.
func decodeStatusForTable(data []byte, st *v1.PodStatus) error {
	it := rawjson.NewObject(data)
	for it.Next() {
		var err error
		value := it.Value()
		switch string(it.Key()) {
		case "phase":
			var s string
			s, err = str(value)
			st.Phase = v1.PodPhase(s)
		case "reason":
			st.Reason, err = str(value)
		case "nominatedNodeName":
			st.NominatedNodeName, err = rawjson.String(value)
		case "podIPs":
			st.PodIPs, err = podIPs(value)
		case "conditions":
			st.Conditions, err = conditions(value)
		case "initContainerStatuses":
			st.InitContainerStatuses, err = containerStatuses(value)
		case "containerStatuses":
			st.ContainerStatuses, err = containerStatuses(value)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", it.Key(), err)
		}
	}
	return it.Err()
}

func podIPs(data []byte) ([]v1.PodIP, error) {
	var out []v1.PodIP
	for it := rawjson.NewArray(data); ; {
		if !it.Next() {
			return out, it.Err()
		}
		ip, err := rawjson.Member(it.Value(), "ip")
		if err != nil {
			return nil, err
		}
		var p v1.PodIP
		if ip != nil {
			if p.IP, err = rawjson.String(ip); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
}

// conditions decodes the conditions' types, statuses and reasons.
func conditions(data []byte) ([]v1.PodCondition, error) {
	if string(data) == "null" {
		return nil, nil
	}
	// A pod has five or six conditions; one allocation for them all.
	out := make([]v1.PodCondition, 0, 6)
	for arr := rawjson.NewArray(data); ; {
		if !arr.Next() {
			return out, arr.Err()
		}
		var c v1.PodCondition
		it := rawjson.NewObject(arr.Value())
		for it.Next() {
			var s string
			var err error
			switch string(it.Key()) {
			case "type":
				s, err = str(it.Value())
				c.Type = v1.PodConditionType(s)
			case "status":
				s, err = str(it.Value())
				c.Status = v1.ConditionStatus(s)
			case "reason":
				c.Reason, err = str(it.Value())
			}
			if err != nil {
				return nil, err
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// containerStatuses decodes what the printer reads of container statuses.
func containerStatuses(data []byte) ([]v1.ContainerStatus, error) {
	var out []v1.ContainerStatus
	for arr := rawjson.NewArray(data); ; {
		if !arr.Next() {
			return out, arr.Err()
		}
		var cs v1.ContainerStatus
		it := rawjson.NewObject(arr.Value())
		for it.Next() {
			var err error
			value := it.Value()
			switch string(it.Key()) {
			case "name":
				cs.Name, err = rawjson.String(value)
			case "ready":
				cs.Ready, err = rawjson.Bool(value)
			case "restartCount":
				var n int64
				n, err = strconv.ParseInt(string(value), 10, 32)
				cs.RestartCount = int32(n)
			case "started":
				if string(value) != "null" {
					cs.Started = new(bool)
					*cs.Started, err = rawjson.Bool(value)
				}
			case "state":
				err = containerState(value, &cs.State)
			case "lastState":
				err = containerState(value, &cs.LastTerminationState)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
}

// containerState decodes which state a container is in: of a waiting
// container only the reason, of a running one nothing more.
func containerState(data []byte, state *v1.ContainerState) error {
	it := rawjson.NewObject(data)
	for it.Next() {
		var err error
		switch string(it.Key()) {
		case "waiting":
			state.Waiting = &v1.ContainerStateWaiting{}
			var reason []byte
			if reason, err = rawjson.Member(it.Value(), "reason"); err == nil && reason != nil {
				state.Waiting.Reason, err = str(reason)
			}
		case "running":
			state.Running = &v1.ContainerStateRunning{}
		case "terminated":
			state.Terminated, err = terminatedState(it.Value())
		}
		if err != nil {
			return err
		}
	}
	return it.Err()
}

// terminatedState decodes the exit code, signal, reason and finish time of a
// terminated container.
func terminatedState(data []byte) (*v1.ContainerStateTerminated, error) {
	if string(data) == "null" {
		return nil, nil
	}
	t := &v1.ContainerStateTerminated{}
	it := rawjson.NewObject(data)
	for it.Next() {
		var err error
		var n int64
		switch string(it.Key()) {
		case "exitCode":
			n, err = strconv.ParseInt(string(it.Value()), 10, 32)
			t.ExitCode = int32(n)
		case "signal":
			n, err = strconv.ParseInt(string(it.Value()), 10, 32)
			t.Signal = int32(n)
		case "reason":
			t.Reason, err = str(it.Value())
		case "finishedAt":
			t.FinishedAt, err = registry.DecodeTime(it.Value())
		}
		if err != nil {
			return nil, err
		}
	}
	return t, it.Err()
}
