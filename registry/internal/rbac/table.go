package rbac

import (
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/registry"
)

// BindingColumns are kube's binding columns; noun ("roleBinding" or
// "clusterRoleBinding") is in the descriptions of the wide ones. kube
// describes Role with the v1beta1 roleRef doc, so does this.
func BindingColumns(noun string) []metav1.TableColumnDefinition {
	roleDoc := rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]
	if noun == "clusterRoleBinding" {
		roleDoc = rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]
	}
	return []metav1.TableColumnDefinition{
		registry.NameColumn(),
		registry.StringColumn("Role", roleDoc),
		registry.AgeColumn(),
		registry.WideColumn("Users", "Users in the "+noun),
		registry.WideColumn("Groups", "Groups in the "+noun),
		registry.WideColumn("ServiceAccounts", "ServiceAccounts in the "+noun),
	}
}

// BindingRow is kube's printRoleBinding / printClusterRoleBinding row:
// ROLE as Kind/name, then the subjects by kind.
func BindingRow(name string, created metav1.Time, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) metav1.TableRow {
	users, groups, sas := SubjectStrings(subjects)
	return metav1.TableRow{Cells: []any{name, ref.Kind + "/" + ref.Name, registry.TableAge(created, now), users, groups, sas}}
}
