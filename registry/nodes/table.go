package nodes

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

const (
	// labelNodeRolePrefix labels name a role: node-role.kubernetes.io/<role>.
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	// labelNodeRole is the older form: kubernetes.io/role=<role>.
	labelNodeRole = "kubernetes.io/role"
)

// TableColumns are kube's node columns.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	info := v1.NodeSystemInfo{}.SwaggerDoc()
	addresses := v1.NodeStatus{}.SwaggerDoc()["addresses"]
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Status", "The status of the node"),
		registry.StringColumn("Roles", "The roles of the node"),
		registry.AgeColumn(),
		registry.StringColumn("Version", info["kubeletVersion"]),
		registry.WideColumn("Internal-IP", addresses),
		registry.WideColumn("External-IP", addresses),
		registry.WideColumn("OS-Image", info["osImage"]),
		registry.WideColumn("Kernel-Version", info["kernelVersion"]),
		registry.WideColumn("Container-Runtime", info["containerRuntimeVersion"]),
	}
}

// TableRow prints a node as kube's printNode does: STATUS is Ready,
// NotReady or Unknown (no Ready condition), plus ",SchedulingDisabled" when
// cordoned.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected a Node, got %T", obj)
	}
	status := "Unknown"
	for i := range node.Status.Conditions {
		// kube keeps the last condition of a type.
		if c := node.Status.Conditions[i]; c.Type == v1.NodeReady {
			status = "Not" + string(v1.NodeReady)
			if c.Status == v1.ConditionTrue {
				status = string(v1.NodeReady)
			}
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	roles := strings.Join(nodeRoles(node), ",")
	if roles == "" {
		roles = "<none>"
	}
	ni := node.Status.NodeInfo
	return metav1.TableRow{Cells: []any{
		node.Name, status, roles, registry.TableAge(node.CreationTimestamp, now), ni.KubeletVersion,
		nodeAddress(node, v1.NodeInternalIP), nodeAddress(node, v1.NodeExternalIP),
		orUnknown(ni.OSImage), orUnknown(ni.KernelVersion), orUnknown(ni.ContainerRuntimeVersion),
	}}, nil
}

// nodeRoles returns the sorted, distinct roles named by
// node-role.kubernetes.io/<role> and kubernetes.io/role=<role> labels.
func nodeRoles(node *v1.Node) []string {
	set := map[string]bool{}
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, labelNodeRolePrefix):
			if role := strings.TrimPrefix(k, labelNodeRolePrefix); role != "" {
				set[role] = true
			}
		case k == labelNodeRole && v != "":
			set[v] = true
		}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

// nodeAddress returns the node's first address of type t, or "<none>".
func nodeAddress(node *v1.Node, t v1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
