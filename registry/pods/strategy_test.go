package pods

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods/internal/podtest"
)

func TestInfo(t *testing.T) {
	s := NewStrategy()
	want := registry.ResourceInfo{
		Group: "", Version: "v1", Resource: "pods", Singular: "pod", Kind: "Pod", ListKind: "PodList",
		Namespaced: true, ShortNames: []string{"po"}, Categories: []string{"all"}, CustomFieldSelectors: true,
	}
	if got := s.Info(); !reflect.DeepEqual(got, want) {
		t.Errorf("Info = %+v", got)
	}
	if _, ok := s.New().(*v1.Pod); !ok {
		t.Errorf("New = %T", s.New())
	}
	if _, ok := s.NewList().(*v1.PodList); !ok {
		t.Errorf("NewList = %T", s.NewList())
	}
	if s.AllowCreateOnUpdate() {
		t.Errorf("AllowCreateOnUpdate = true")
	}
}

// updated returns a copy of old changed by mut and run through
// PrepareForUpdate, as the Store does before ValidateUpdate.
func updated(old *v1.Pod, mut func(*v1.Pod)) *v1.Pod {
	p := old.DeepCopy()
	mut(p)
	NewStrategy().PrepareForUpdate(ctx, p, old)
	return p
}

func TestValidateUpdate(t *testing.T) {
	base := func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1"}}
		p.Spec.Tolerations = []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: podtest.Int64(300)}}
	}
	old := createdPod(base)
	forbidden := "FieldValueForbidden spec"
	tests := []struct {
		name string
		old  *v1.Pod
		mut  func(*v1.Pod)
		want []string
	}{
		{"no change", old, func(p *v1.Pod) {}, nil},
		{"metadata only", old, func(p *v1.Pod) { p.Labels = map[string]string{"new": "label"} }, nil},
		{"container image", old, func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox:1.37" }, nil},
		{"init container image", old, func(p *v1.Pod) { p.Spec.InitContainers[0].Image = "busybox:2" }, nil},
		{"image cleared", old, func(p *v1.Pod) { p.Spec.Containers[0].Image = "" },
			[]string{"FieldValueRequired spec.containers[0].image", "FieldValueRequired spec.containers[0].image"}},
		{"image with whitespace", old, func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox " },
			[]string{"FieldValueInvalid spec.containers[0].image", "FieldValueInvalid spec.containers[0].image"}},
		{"activeDeadlineSeconds set", old, func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(60) }, nil},
		{"activeDeadlineSeconds lowered", createdPod(base, func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(60) }),
			func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(30) }, nil},
		{"activeDeadlineSeconds raised", createdPod(base, func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(60) }),
			func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(61) }, []string{"FieldValueInvalid spec.activeDeadlineSeconds"}},
		{"activeDeadlineSeconds unset", createdPod(base, func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(60) }),
			func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, []string{"FieldValueInvalid spec.activeDeadlineSeconds"}},
		{"activeDeadlineSeconds negative", old, func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = podtest.Int64(-1) },
			[]string{"FieldValueInvalid spec.activeDeadlineSeconds", "FieldValueInvalid spec.activeDeadlineSeconds"}},
		{"toleration added", old, func(p *v1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "k", Operator: v1.TolerationOpEqual, Value: "v", Effect: v1.TaintEffectNoSchedule})
		}, nil},
		{"tolerationSeconds changed", old, func(p *v1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = podtest.Int64(10) }, nil},
		{"toleration removed", old, func(p *v1.Pod) { p.Spec.Tolerations = nil },
			[]string{"FieldValueForbidden spec.tolerations"}},
		{"toleration modified", old, func(p *v1.Pod) {
			p.Spec.Tolerations[0].Effect = v1.TaintEffectNoSchedule
			p.Spec.Tolerations[0].TolerationSeconds = nil
		},
			[]string{"FieldValueForbidden spec.tolerations"}},
		{"invalid toleration added", old, func(p *v1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "k", Operator: "Bad"})
		}, []string{"FieldValueNotSupported spec.tolerations[1].operator", "FieldValueNotSupported spec.tolerations[1].operator"}},
		{"restartPolicy changed", old, func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever }, []string{forbidden}},
		{"nodeName changed", old, func(p *v1.Pod) { p.Spec.NodeName = "node-1" }, []string{forbidden}},
		{"container env changed", old, func(p *v1.Pod) { p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "b"}} }, []string{forbidden}},
		{"container resources changed", old, func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = podtest.Resources("cpu", "1") }, []string{forbidden}},
		{"terminationGracePeriodSeconds changed", old, func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = podtest.Int64(10) }, []string{forbidden}},
		{"negative terminationGracePeriodSeconds set to 1", createdPod(base, func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = podtest.Int64(-1) }),
			func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = podtest.Int64(1) }, nil},
		{"negative terminationGracePeriodSeconds set to 2", createdPod(base, func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = podtest.Int64(-1) }),
			func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = podtest.Int64(2) }, []string{forbidden}},
		{"container added", old, func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x"}) },
			[]string{"FieldValueForbidden spec.containers"}},
		{"init container removed", old, func(p *v1.Pod) { p.Spec.InitContainers = nil },
			[]string{"FieldValueForbidden spec.initContainers"}},
		{"container renamed", old, func(p *v1.Pod) { p.Spec.Containers[0].Name = "renamed" }, []string{forbidden}},
		{"ephemeral container added via main resource", old, func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		}, []string{forbidden}},
		{"new spec validated too", old, func(p *v1.Pod) { p.Spec.Containers[0].Image = "x"; p.Spec.DNSPolicy = "Bad" },
			[]string{"FieldValueNotSupported spec.dnsPolicy", forbidden}},
		{"scheduling gate removed", createdPod(base, func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}, {Name: "b"}} }),
			func(p *v1.Pod) { p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:] }, nil},
		{"scheduling gate added", createdPod(base, func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}} }),
			func(p *v1.Pod) {
				p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: "b"})
			},
			[]string{"FieldValueForbidden spec.schedulingGates[1].name"}},
		{"gated pod: nodeSelector addition", createdPod(base, func(p *v1.Pod) {
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}}
			p.Spec.NodeSelector = map[string]string{"a": "1"}
		}), func(p *v1.Pod) { p.Spec.NodeSelector["b"] = "2" }, nil},
		{"gated pod: nodeSelector mutation", createdPod(base, func(p *v1.Pod) {
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}}
			p.Spec.NodeSelector = map[string]string{"a": "1"}
		}), func(p *v1.Pod) { p.Spec.NodeSelector["a"] = "2" }, []string{"FieldValueInvalid spec.nodeSelector"}},
		{"ungated pod: nodeSelector addition", createdPod(base, func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"a": "1"} }),
			func(p *v1.Pod) { p.Spec.NodeSelector["b"] = "2" }, []string{forbidden}},
		{"omitted defaulted fields are re-defaulted", old, func(p *v1.Pod) {
			p.Spec.RestartPolicy = ""
			p.Spec.SchedulerName = ""
			p.Spec.TerminationGracePeriodSeconds = nil
			p.Spec.Containers[0].ImagePullPolicy = ""
		}, nil},
		{"omitted priority is preserved", old, func(p *v1.Pod) { p.Spec.Priority = nil; p.Spec.PreemptionPolicy = nil }, nil},
		{"priority changed", old, func(p *v1.Pod) { p.Spec.Priority = podtest.Int32(5) }, []string{forbidden}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := updated(tc.old, tc.mut)
			podtest.ExpectErrs(t, NewStrategy().ValidateUpdate(ctx, p, tc.old), tc.want...)
		})
	}
}

func TestValidateUpdateForbiddenMessage(t *testing.T) {
	old := createdPod()
	p := updated(old, func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure })
	errs := NewStrategy().ValidateUpdate(ctx, p, old)
	if len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	const prefix = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
	d := errs[0].Detail
	if !strings.HasPrefix(d, prefix) {
		t.Fatalf("detail does not start with kube's text:\n%s", d)
	}
	diff := strings.TrimPrefix(d, prefix)
	if !strings.Contains(diff, "v1.PodSpec{") || !strings.Contains(diff, `"Always"`) || !strings.Contains(diff, `"OnFailure"`) {
		t.Errorf("diff does not show the change:\n%s", diff)
	}
	if errs[0].Field != "spec" || errs[0].Type != field.ErrorTypeForbidden {
		t.Errorf("error = %#v", errs[0])
	}
	if !strings.HasPrefix(errs[0].Error(), "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`") {
		t.Errorf("Error() = %s", errs[0].Error())
	}

	errs = NewStrategy().ValidateUpdate(ctx, updated(old, func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x"}) }), old)
	if len(errs) != 1 || errs[0].Error() != "spec.containers: Forbidden: pod updates may not add or remove containers" {
		t.Errorf("errors = %v", errs)
	}
	errs = NewStrategy().ValidateUpdate(ctx, updated(old, func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}} }),
		createdPod(func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists}} }))
	if len(errs) != 1 || errs[0].Error() != "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds" {
		t.Errorf("errors = %v", errs)
	}
}

func TestPrepareForUpdate(t *testing.T) {
	old := createdPod(func(p *v1.Pod) { p.Spec.Priority = podtest.Int32(3) })
	old.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}, QOSClass: v1.PodQOSBestEffort}
	p := old.DeepCopy()
	p.Status = v1.PodStatus{Phase: v1.PodFailed}
	p.Spec.Priority = nil
	p.Spec.PreemptionPolicy = nil
	p.Spec.DNSPolicy = ""
	p.Spec.Containers[0].Image = "busybox:1"
	p.Spec.Containers[0].ImagePullPolicy = ""
	NewStrategy().PrepareForUpdate(ctx, p, old)
	if !reflect.DeepEqual(p.Status, old.Status) {
		t.Errorf("status not preserved: %+v", p.Status)
	}
	if *p.Spec.Priority != 3 || *p.Spec.PreemptionPolicy != v1.PreemptLowerPriority {
		t.Errorf("priority not preserved")
	}
	if p.Spec.DNSPolicy != v1.DNSClusterFirst {
		t.Errorf("not defaulted: dnsPolicy %q", p.Spec.DNSPolicy)
	}
	if p.Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent {
		t.Errorf("pull policy %q", p.Spec.Containers[0].ImagePullPolicy)
	}
	// Alpha fields stay dropped on update unless the stored pod has them.
	p = old.DeepCopy()
	p.Spec.Resources = &v1.ResourceRequirements{Limits: podtest.Resources("cpu", "1")}
	NewStrategy().PrepareForUpdate(ctx, p, old)
	if p.Spec.Resources != nil {
		t.Errorf("spec.resources not dropped")
	}
}

func TestCheckGracefulDelete(t *testing.T) {
	tests := []struct {
		name     string
		nodeName string
		phase    v1.PodPhase
		tgps     *int64
		options  *metav1.DeleteOptions
		want     bool
		period   int64
	}{
		{"nil options", "n1", v1.PodRunning, podtest.Int64(30), nil, false, 0},
		{"pod default", "n1", v1.PodRunning, podtest.Int64(30), &metav1.DeleteOptions{}, true, 30},
		{"pod custom", "n1", v1.PodRunning, podtest.Int64(5), &metav1.DeleteOptions{}, true, 5},
		{"pod without period", "n1", v1.PodRunning, nil, &metav1.DeleteOptions{}, true, 0},
		{"options override", "n1", v1.PodRunning, podtest.Int64(30), &metav1.DeleteOptions{GracePeriodSeconds: podtest.Int64(10)}, true, 10},
		{"options zero", "n1", v1.PodRunning, podtest.Int64(30), &metav1.DeleteOptions{GracePeriodSeconds: podtest.Int64(0)}, true, 0},
		{"unscheduled pod", "", v1.PodPending, podtest.Int64(30), &metav1.DeleteOptions{}, true, 0},
		{"unscheduled pod with options", "", v1.PodPending, podtest.Int64(30), &metav1.DeleteOptions{GracePeriodSeconds: podtest.Int64(10)}, true, 0},
		{"succeeded pod", "n1", v1.PodSucceeded, podtest.Int64(30), &metav1.DeleteOptions{}, true, 0},
		{"failed pod", "n1", v1.PodFailed, podtest.Int64(30), &metav1.DeleteOptions{GracePeriodSeconds: podtest.Int64(10)}, true, 0},
		{"negative options period", "n1", v1.PodRunning, podtest.Int64(30), &metav1.DeleteOptions{GracePeriodSeconds: podtest.Int64(-5)}, true, 1},
		{"negative pod period", "n1", v1.PodRunning, podtest.Int64(-1), &metav1.DeleteOptions{}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := createdPod()
			p.Spec.NodeName = tc.nodeName
			p.Spec.TerminationGracePeriodSeconds = tc.tgps
			p.Status.Phase = tc.phase
			got := NewStrategy().CheckGracefulDelete(ctx, p, tc.options)
			if got != tc.want {
				t.Fatalf("graceful = %v, want %v", got, tc.want)
			}
			if tc.options != nil && (tc.options.GracePeriodSeconds == nil || *tc.options.GracePeriodSeconds != tc.period) {
				t.Errorf("period = %v, want %d", tc.options.GracePeriodSeconds, tc.period)
			}
		})
	}
}

func TestGetAttrs(t *testing.T) {
	p := createdPod(func(p *v1.Pod) {
		p.Spec.NodeName = "n1"
		p.Spec.ServiceAccountName = "sa"
		p.Spec.HostNetwork = true
	})
	p.Status.Phase = v1.PodRunning
	p.Status.PodIP = "10.0.0.1"
	p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	p.Status.NominatedNodeName = "n2"
	ls, fs, err := NewStrategy().GetAttrs(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(map[string]string(ls), map[string]string{"app": "x"}) {
		t.Errorf("labels = %v", ls)
	}
	want := fields.Set{
		"metadata.name":            "p1",
		"metadata.namespace":       "default",
		"spec.nodeName":            "n1",
		"spec.host":                "n1",
		"spec.restartPolicy":       "Always",
		"spec.schedulerName":       "default-scheduler",
		"spec.serviceAccountName":  "sa",
		"spec.hostNetwork":         "true",
		"status.phase":             "Running",
		"status.podIP":             "10.0.0.1",
		"status.podIPs":            "",
		"status.nominatedNodeName": "n2",
	}
	if !reflect.DeepEqual(fs, want) {
		t.Errorf("fields = %v", fs)
	}

	// The accepted field selector labels of kube v1.32 (fieldselectors.txt)
	// plus kube's legacy spec.host alias.
	keys := make([]string, 0, len(fs))
	for k := range fs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	accepted := []string{"metadata.name", "metadata.namespace", "spec.host", "spec.hostNetwork", "spec.nodeName", "spec.restartPolicy",
		"spec.schedulerName", "spec.serviceAccountName", "status.nominatedNodeName", "status.phase", "status.podIP", "status.podIPs"}
	if !reflect.DeepEqual(keys, accepted) {
		t.Errorf("keys = %v", keys)
	}

	// Selector semantics.
	for sel, match := range map[string]bool{
		"spec.hostNetwork=true":             true,
		"spec.hostNetwork=false":            false,
		"status.podIPs=10.0.0.1":            false, // kube never populates status.podIPs
		"status.podIPs!=10.0.0.1":           true,
		"spec.host=n1":                      true,
		"status.podIP=10.0.0.1":             true,
		"metadata.name=p1,spec.nodeName=n1": true,
	} {
		s, err := fields.ParseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Matches(fs); got != match {
			t.Errorf("%s matches = %v, want %v", sel, got, match)
		}
	}

	// podIP falls back to podIPs[0]; unset hostNetwork is "false".
	q := createdPod()
	q.Status.PodIP = ""
	q.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.9"}}
	_, fs, _ = NewStrategy().GetAttrs(q)
	if fs["status.podIP"] != "10.0.0.9" || fs["spec.hostNetwork"] != "false" || fs["spec.nodeName"] != "" {
		t.Errorf("fields = %v", fs)
	}
	if _, _, err := NewStrategy().GetAttrs(&v1.Node{}); err == nil {
		t.Errorf("GetAttrs(node) did not fail")
	}
}

func statusUpdated(old *v1.Pod, mut func(*v1.Pod)) *v1.Pod {
	p := old.DeepCopy()
	mut(p)
	NewStatusStrategy().PrepareForUpdate(ctx, p, old)
	return p
}

func TestStatusPrepareForUpdate(t *testing.T) {
	old := createdPod(func(p *v1.Pod) { p.Spec.NodeName = "n1" })
	old.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", UID: "u"}}
	p := statusUpdated(old, func(p *v1.Pod) {
		p.Spec.NodeName = "other"
		p.Spec.Containers[0].Image = "changed"
		p.OwnerReferences = nil
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Status.Phase = v1.PodRunning
		p.Status.QOSClass = ""
		p.Status.PodIP = "10.0.0.5"
	})
	if !reflect.DeepEqual(p.Spec, old.Spec) {
		t.Errorf("spec not kept")
	}
	if !reflect.DeepEqual(p.OwnerReferences, old.OwnerReferences) || p.DeletionTimestamp != nil {
		t.Errorf("ownerReferences / deletionTimestamp not kept: %v %v", p.OwnerReferences, p.DeletionTimestamp)
	}
	if p.Status.Phase != v1.PodRunning || p.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("status = %+v", p.Status)
	}
	if len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != "10.0.0.5" {
		t.Errorf("podIPs not derived from podIP: %+v", p.Status.PodIPs)
	}
	// podIPs only: podIP derived.
	p = statusUpdated(old, func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.6"}, {IP: "fd00::6"}} })
	if p.Status.PodIP != "10.0.0.6" {
		t.Errorf("podIP = %q", p.Status.PodIP)
	}
	// both set and different: podIP wins (kube's conversion).
	p = statusUpdated(old, func(p *v1.Pod) { p.Status.PodIP = "10.0.0.7"; p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.8"}} })
	if p.Status.PodIP != "10.0.0.7" || len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != "10.0.0.7" {
		t.Errorf("podIP %q podIPs %+v", p.Status.PodIP, p.Status.PodIPs)
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	never := createdPod(func(p *v1.Pod) { p.Spec.NodeName = "n1"; p.Spec.RestartPolicy = v1.RestartPolicyNever })
	never.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}}
	old := createdPod(func(p *v1.Pod) { p.Spec.NodeName = "n1" })
	tests := []struct {
		name string
		old  *v1.Pod
		mut  func(*v1.Pod)
		want []string
	}{
		{"running", old, func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.HostIP = "192.168.0.1"
			p.Status.HostIPs = []v1.HostIP{{IP: "192.168.0.1"}}
			p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: "example.com/custom", Status: v1.ConditionTrue}}
		}, nil},
		{"phase is not validated (like kube)", old, func(p *v1.Pod) { p.Status.Phase = "Whatever" }, nil},
		{"qosClass is immutable", old, func(p *v1.Pod) { p.Status.QOSClass = v1.PodQOSGuaranteed },
			[]string{"FieldValueInvalid status.qosClass"}},
		{"invalid pod IP", old, func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "not-an-ip"}} },
			[]string{"FieldValueInvalid status.podIPs[0]"}},
		{"two IPv4 pod IPs", old, func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}} },
			[]string{"FieldValueInvalid status.podIPs"}},
		{"duplicate pod IPs", old, func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.1"}} },
			[]string{"FieldValueInvalid status.podIPs", "FieldValueDuplicate status.podIPs[1]"}},
		{"hostIPs[0] must equal hostIP", old, func(p *v1.Pod) { p.Status.HostIP = "1.1.1.1"; p.Status.HostIPs = []v1.HostIP{{IP: "2.2.2.2"}} },
			[]string{"FieldValueInvalid status.hostIPs[0].ip"}},
		{"custom condition type", old, func(p *v1.Pod) { p.Status.Conditions = []v1.PodCondition{{Type: "not valid!"}} },
			[]string{"FieldValueInvalid metadata.conditions[0].Type"}},
		{"nominatedNodeName", old, func(p *v1.Pod) { p.Status.NominatedNodeName = "Bad_Node" },
			[]string{"FieldValueInvalid status.nominatedNodeName"}},
		{"terminated container restarted with restartPolicy Never", never, func(p *v1.Pod) {
			p.Status.ContainerStatuses[0].State = v1.ContainerState{Running: &v1.ContainerStateRunning{}}
		}, []string{"FieldValueForbidden status.containerStatuses[0].state"}},
		{"terminated container restarted with restartPolicy Always", old, func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		}, nil},
		{"spec changes are ignored", old, func(p *v1.Pod) { p.Spec.NodeName = "elsewhere"; p.Spec.RestartPolicy = "bad" }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := statusUpdated(tc.old, tc.mut)
			podtest.ExpectErrs(t, NewStatusStrategy().ValidateUpdate(ctx, p, tc.old), tc.want...)
		})
	}
}
