package registry

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// objectMetaDoc holds the ObjectMeta field descriptions kube's printers use
// for the Name and Age columns.
var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

// NameColumn is the Name column every printer starts with.
func NameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
}

// AgeColumn is the Age column of kube's printers.
func AgeColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
}

// StringColumn is a priority-0 string column.
func StringColumn(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// WideColumn is a string column that only `kubectl get -o wide` shows.
func WideColumn(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Priority: 1, Description: description}
}

// TableAge is kube's translateTimestampSince: the human-readable time from
// t to now, "<unknown>" for an unset t.
func TableAge(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// TableMicroAge is TableAge for a MicroTime.
func TableMicroAge(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
