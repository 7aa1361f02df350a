package nodes

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

var ctx = context.Background()

// errKeys renders an ErrorList as "Type field" strings for comparison.
func node(tweaks ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	for _, t := range tweaks {
		t(n)
	}
	return n
}

func withCIDRs(cidrs ...string) func(*v1.Node) {
	return func(n *v1.Node) { n.Spec.PodCIDRs = cidrs }
}

func withTaints(taints ...v1.Taint) func(*v1.Node) {
	return func(n *v1.Node) { n.Spec.Taints = taints }
}

func withAnnotation(k, v string) func(*v1.Node) {
	return func(n *v1.Node) { n.Annotations = map[string]string{k: v} }
}

func withCapacity(name, q string) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Status.Capacity = v1.ResourceList{v1.ResourceName(name): resource.MustParse(q)}
	}
}

const (
	invalid      = "FieldValueInvalid"
	required     = "FieldValueRequired"
	notSupported = "FieldValueNotSupported"
	duplicate    = "FieldValueDuplicate"
	forbidden    = "FieldValueForbidden"
	internal     = "InternalError"
)

func TestValidate(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		name string
		node *v1.Node
		want []string
	}{
		{"minimal", node(), nil},
		{"single cidr", node(withCIDRs("10.244.0.0/24")), nil},
		{"dual stack", node(withCIDRs("10.244.0.0/24", "fd00::/64")), nil},
		{"bad cidr", node(withCIDRs("10.244.0.0")), []string{invalid + " spec.podCIDRs[0]"}},
		{"two ipv4", node(withCIDRs("10.0.0.0/24", "10.1.0.0/24")), []string{invalid + " spec.podCIDRs"}},
		{"three cidrs", node(withCIDRs("10.0.0.0/24", "fd00::/64", "10.1.0.0/24")), []string{invalid + " spec.podCIDRs"}},
		{"duplicate cidr", node(withCIDRs("10.0.0.0/24", "10.0.0.0/24")), []string{invalid + " spec.podCIDRs", duplicate + " spec.podCIDRs[1]"}},
		{"bad cidr among two", node(withCIDRs("nope", "fd00::/64")), []string{invalid + " spec.podCIDRs[0]", internal + " spec.podCIDRs", invalid + " spec.podCIDRs"}},
		{"valid taints", node(withTaints(
			v1.Taint{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoSchedule},
			v1.Taint{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoExecute},
			v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectPreferNoSchedule},
		)), nil},
		{"taint key", node(withTaints(v1.Taint{Key: "bad key", Effect: v1.TaintEffectNoSchedule})), []string{invalid + " metadata.taints[0].key"}},
		{"taint empty key", node(withTaints(v1.Taint{Effect: v1.TaintEffectNoSchedule})), []string{invalid + " metadata.taints[0].key", invalid + " metadata.taints[0].key"}},
		{"taint value", node(withTaints(v1.Taint{Key: "k", Value: "bad value", Effect: v1.TaintEffectNoSchedule})), []string{invalid + " metadata.taints[0].value"}},
		{"taint no effect", node(withTaints(v1.Taint{Key: "k"})), []string{required + " metadata.taints[0].effect"}},
		{"taint bad effect", node(withTaints(v1.Taint{Key: "k", Effect: "NoScheduleNoAdmit"})), []string{notSupported + " metadata.taints[0].effect"}},
		{"duplicate taint", node(withTaints(
			v1.Taint{Key: "k", Value: "a", Effect: v1.TaintEffectNoSchedule},
			v1.Taint{Key: "k", Value: "b", Effect: v1.TaintEffectNoSchedule},
		)), []string{duplicate + " metadata.taints[1]"}},
		{"taints annotation json", node(withAnnotation(v1.TaintsAnnotationKey, "{")), []string{invalid + " metadata.annotations"}},
		{"taints annotation content", node(withAnnotation(v1.TaintsAnnotationKey, `[{"key":"k"}]`)), []string{required + " metadata.annotations.scheduler.alpha.kubernetes.io/taints[0].effect"}},
		{"avoid pods json", node(withAnnotation(v1.PreferAvoidPodsAnnotationKey, "x")), []string{invalid + " metadata.annotations.AvoidPods"}},
		{"avoid pods no controller", node(withAnnotation(v1.PreferAvoidPodsAnnotationKey, `{"preferAvoidPods":[{"podSignature":{}}]}`)),
			[]string{required + " metadata.annotations.scheduler.alpha.kubernetes.io/preferAvoidPods[0].PodSignature"}},
		{"avoid pods not controller", node(withAnnotation(v1.PreferAvoidPodsAnnotationKey, `{"preferAvoidPods":[{"podSignature":{"podController":{"kind":"ReplicaSet","name":"x","uid":"u","apiVersion":"apps/v1","controller":false}}}]}`)),
			[]string{invalid + " metadata.annotations.scheduler.alpha.kubernetes.io/preferAvoidPods[0].PodSignature.PodController.Controller"}},
		{"capacity ok", node(withCapacity("cpu", "500m")), nil},
		{"capacity negative", node(withCapacity("memory", "-1")), []string{invalid + " status.capacity.memory"}},
		{"pods fractional", node(withCapacity("pods", "1500m")), []string{invalid + " status.capacity.pods"}},
		{"extended fractional", node(withCapacity("example.com/gpu", "500m")), []string{invalid + " status.capacity.example.com/gpu"}},
		{"prefixed native fractional", node(withCapacity("kubernetes.io/foo", "500m")), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strategytest.ErrKeys(s.Validate(ctx, tc.node))
			if tc.want == nil {
				tc.want = []string{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateMessages(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		name string
		node *v1.Node
		want string
	}{
		{"bad cidr", node(withCIDRs("10.244.0.0")),
			`spec.podCIDRs[0]: Invalid value: "10.244.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`},
		{"two ipv4", node(withCIDRs("10.0.0.0/24", "10.1.0.0/24")),
			`spec.podCIDRs: Invalid value: []string{"10.0.0.0/24", "10.1.0.0/24"}: may specify no more than one CIDR for each IP family`},
		{"bad effect", node(withTaints(v1.Taint{Key: "k", Effect: "Foo"})),
			`metadata.taints[0].effect: Unsupported value: "Foo": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
		{"duplicate taint", node(withTaints(v1.Taint{Key: "k", Effect: "NoSchedule"}, v1.Taint{Key: "k", Effect: "NoSchedule"})),
			`metadata.taints[1]: Duplicate value: core.Taint{Key:"k", Value:"", Effect:"NoSchedule", TimeAdded:<nil>}: taints must be unique by key and effect pair`},
		{"negative", node(withCapacity("cpu", "-1")),
			`status.capacity.cpu: Invalid value: "-1": must be greater than or equal to 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := s.Validate(ctx, tc.node)
			if len(errs) == 0 || errs[0].Error() != tc.want {
				t.Errorf("got %v, want %s", errs, tc.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		name     string
		old, new *v1.Node
		want     []string
	}{
		{"unchanged", node(withCIDRs("10.0.0.0/24")), node(withCIDRs("10.0.0.0/24")), nil},
		{"cidr set once", node(), node(withCIDRs("10.0.0.0/24")), nil},
		{"cidr changed", node(withCIDRs("10.0.0.0/24")), node(withCIDRs("10.1.0.0/24")), []string{forbidden + " spec.podCIDRs"}},
		{"cidr removed", node(withCIDRs("10.0.0.0/24")), node(), []string{forbidden + " spec.podCIDRs"}},
		{"cidr added", node(withCIDRs("10.0.0.0/24")), node(withCIDRs("10.0.0.0/24", "fd00::/64")), []string{forbidden + " spec.podCIDRs"}},
		{"unschedulable", node(), node(func(n *v1.Node) { n.Spec.Unschedulable = true }), nil},
		{"providerID set", node(), node(func(n *v1.Node) { n.Spec.ProviderID = "aws://x" }), nil},
		{"providerID changed", node(func(n *v1.Node) { n.Spec.ProviderID = "aws://x" }), node(func(n *v1.Node) { n.Spec.ProviderID = "aws://y" }),
			[]string{forbidden + " spec.providerID"}},
		{"externalID changed", node(), node(func(n *v1.Node) { n.Spec.DoNotUseExternalID = "x" }), []string{forbidden + " spec.externalID"}},
		// kube runs validateNodeTaints in both ValidateNode and ValidateNodeUpdate.
		{"bad taint reported twice", node(), node(withTaints(v1.Taint{Key: "k"})),
			[]string{required + " metadata.taints[0].effect", required + " metadata.taints[0].effect"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strategytest.ErrKeys(s.ValidateUpdate(ctx, tc.new, tc.old))
			if tc.want == nil {
				tc.want = []string{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStatusValidateUpdate(t *testing.T) {
	s := NewStatusStrategy()
	addr := v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.1"}
	n := node(func(n *v1.Node) { n.Status.Addresses = []v1.NodeAddress{addr, addr} })
	errs := s.ValidateUpdate(ctx, n, node())
	want := `status.addresses[1]: Duplicate value: core.NodeAddress{Type:"InternalIP", Address:"10.0.0.1"}`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v, want %s", errs, want)
	}
	// Status validation does not re-run create checks on the (old) spec.
	if errs := s.ValidateUpdate(ctx, node(withCIDRs("bad")), node(withCIDRs("bad"))); len(errs) != 0 {
		t.Errorf("unexpected %v", errs)
	}
}

func TestPrepareForCreate(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		name                string
		podCIDR             string
		podCIDRs            []string
		wantCIDR            string
		wantCIDRs           []string
		capacity, allocated v1.ResourceList
		wantAllocatable     v1.ResourceList
	}{
		{name: "none"},
		{name: "podCIDR only", podCIDR: "10.244.0.0/24", wantCIDR: "10.244.0.0/24", wantCIDRs: []string{"10.244.0.0/24"}},
		{name: "podCIDRs only", podCIDRs: []string{"10.244.0.0/24", "fd00::/64"}, wantCIDR: "10.244.0.0/24", wantCIDRs: []string{"10.244.0.0/24", "fd00::/64"}},
		{name: "podCIDR wins", podCIDR: "10.1.0.0/24", podCIDRs: []string{"10.2.0.0/24", "fd00::/64"}, wantCIDR: "10.1.0.0/24", wantCIDRs: []string{"10.1.0.0/24"}},
		{name: "agree", podCIDR: "10.2.0.0/24", podCIDRs: []string{"10.2.0.0/24", "fd00::/64"}, wantCIDR: "10.2.0.0/24", wantCIDRs: []string{"10.2.0.0/24", "fd00::/64"}},
		{name: "allocatable defaulted", capacity: v1.ResourceList{"cpu": resource.MustParse("2")}, wantAllocatable: v1.ResourceList{"cpu": resource.MustParse("2")}},
		{name: "allocatable kept", capacity: v1.ResourceList{"cpu": resource.MustParse("2")}, allocated: v1.ResourceList{"cpu": resource.MustParse("1")},
			wantAllocatable: v1.ResourceList{"cpu": resource.MustParse("1")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := node(func(n *v1.Node) {
				n.Spec.PodCIDR, n.Spec.PodCIDRs = tc.podCIDR, tc.podCIDRs
				n.Spec.ConfigSource = &v1.NodeConfigSource{}
				n.Status.Config = &v1.NodeConfigStatus{}
				n.Status.Phase = v1.NodeRunning
				n.Status.Capacity, n.Status.Allocatable = tc.capacity, tc.allocated
			})
			s.PrepareForCreate(ctx, n)
			if n.Spec.PodCIDR != tc.wantCIDR || !reflect.DeepEqual(n.Spec.PodCIDRs, tc.wantCIDRs) {
				t.Errorf("podCIDR %q podCIDRs %v, want %q %v", n.Spec.PodCIDR, n.Spec.PodCIDRs, tc.wantCIDR, tc.wantCIDRs)
			}
			if n.Spec.ConfigSource != nil || n.Status.Config != nil {
				t.Error("configSource/config not dropped")
			}
			if n.Status.Phase != v1.NodeRunning {
				t.Error("status must be kept on create")
			}
			for k, want := range tc.wantAllocatable {
				if got := n.Status.Allocatable[k]; got.Cmp(want) != 0 {
					t.Errorf("allocatable[%s] = %s, want %s", k, got.String(), want.String())
				}
			}
		})
	}
}

func TestPrepareForCreateRoundsQuantities(t *testing.T) {
	n := node(withCapacity("cpu", "100u"))
	NewStrategy().PrepareForCreate(ctx, n)
	if got := n.Status.Capacity["cpu"]; got.String() != "1m" {
		t.Errorf("capacity cpu = %s, want 1m", got.String())
	}
}

func TestPrepareForUpdate(t *testing.T) {
	s := NewStrategy()
	old := node(withCIDRs("10.0.0.0/24"), func(n *v1.Node) { n.Status.Phase = v1.NodeRunning })
	n := node(func(n *v1.Node) {
		n.Spec.PodCIDR = "10.0.0.0/24"
		n.Spec.Unschedulable = true
		n.Spec.ConfigSource = &v1.NodeConfigSource{}
		n.Status.Phase = v1.NodeTerminated
	})
	s.PrepareForUpdate(ctx, n, old)
	if n.Status.Phase != v1.NodeRunning {
		t.Error("status not kept")
	}
	if !n.Spec.Unschedulable || !reflect.DeepEqual(n.Spec.PodCIDRs, []string{"10.0.0.0/24"}) {
		t.Errorf("spec not taken from new object: %+v", n.Spec)
	}
	if n.Spec.ConfigSource != nil {
		t.Error("configSource must be dropped when not already in use")
	}

	old.Spec.ConfigSource = &v1.NodeConfigSource{}
	n.Spec.ConfigSource = &v1.NodeConfigSource{}
	s.PrepareForUpdate(ctx, n, old)
	if n.Spec.ConfigSource == nil {
		t.Error("configSource in use must be kept")
	}
}

func TestStatusPrepareForUpdate(t *testing.T) {
	s := NewStatusStrategy()
	old := node(withCIDRs("10.0.0.0/24"), withTaints(v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}))
	n := node(func(n *v1.Node) {
		n.Spec.Unschedulable = true
		n.Status.Phase = v1.NodeRunning
		n.Status.Config = &v1.NodeConfigStatus{}
		n.Status.Capacity = v1.ResourceList{"cpu": resource.MustParse("4")}
	})
	s.PrepareForUpdate(ctx, n, old)
	if !reflect.DeepEqual(n.Spec, old.Spec) {
		t.Errorf("spec not kept: %+v", n.Spec)
	}
	if n.Status.Phase != v1.NodeRunning || n.Status.Config != nil {
		t.Errorf("status wrong: %+v", n.Status)
	}
	if q := n.Status.Allocatable["cpu"]; q.String() != "4" {
		t.Errorf("allocatable not defaulted: %v", n.Status.Allocatable)
	}
}

func TestGetAttrs(t *testing.T) {
	s := NewStrategy()
	n := node(func(n *v1.Node) { n.Labels = map[string]string{"a": "b"}; n.Spec.Unschedulable = true })
	l, f, err := s.GetAttrs(n)
	if err != nil {
		t.Fatal(err)
	}
	if l["a"] != "b" {
		t.Errorf("labels %v", l)
	}
	want := fields.Set{"metadata.name": "node-1", "spec.unschedulable": "true"}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("fields %v, want %v", f, want)
	}
	if _, f, _ := s.GetAttrs(node()); f["spec.unschedulable"] != "false" {
		t.Errorf("unschedulable %q", f["spec.unschedulable"])
	}
	if _, _, err := s.GetAttrs(&v1.Pod{}); err == nil {
		t.Error("expected error for non-node")
	}
}

func TestInfo(t *testing.T) {
	s := NewStrategy()
	info := s.Info()
	if info.APIVersion() != "v1" || info.Resource != "nodes" || info.Singular != "node" || info.Kind != "Node" ||
		info.ListKind != "NodeList" || info.Namespaced || !reflect.DeepEqual(info.ShortNames, []string{"no"}) ||
		info.Categories != nil || !info.CustomFieldSelectors || s.AllowCreateOnUpdate() {
		t.Errorf("info %+v", info)
	}
	if _, ok := s.New().(*v1.Node); !ok {
		t.Error("New")
	}
	if _, ok := s.NewList().(*v1.NodeList); !ok {
		t.Error("NewList")
	}
	keys := []string{}
	_, f, _ := s.GetAttrs(node())
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, []string{"metadata.name", "spec.unschedulable"}) {
		t.Errorf("field keys %v", keys)
	}
}

// TestCreateMatchesReference replays the body of the kube v1.32 reference
// request 201-create-node (minus the NodeTaint admission taint).
func TestCreateMatchesReference(t *testing.T) {
	n := &v1.Node{}
	body := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","labels":{"kubernetes.io/hostname":"node-1"}},"spec":{"podCIDR":"10.244.0.0/24"}}`
	if err := json.Unmarshal([]byte(body), n); err != nil {
		t.Fatal(err)
	}
	s := NewStrategy()
	s.PrepareForCreate(ctx, n)
	if errs := s.Validate(ctx, n); len(errs) != 0 {
		t.Fatal(errs)
	}
	spec, _ := json.Marshal(n.Spec)
	if want := `{"podCIDR":"10.244.0.0/24","podCIDRs":["10.244.0.0/24"]}`; string(spec) != want {
		t.Errorf("spec %s, want %s", spec, want)
	}
}
