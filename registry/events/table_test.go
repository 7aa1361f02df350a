package events

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventTableRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	micro := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(now.Add(-d)) }
	cases := []struct {
		name string
		ev   v1.Event
		want []any
	}{
		{"core/v1 event", v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web.1"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{c}"},
			Type:           "Normal", Reason: "Pulled", Message: "  pulled image\n",
			Source:         v1.EventSource{Component: "kubelet", Host: "node-1"},
			FirstTimestamp: at(time.Hour), LastTimestamp: at(2 * time.Minute), Count: 4,
		}, []any{"2m", "Normal", "Pulled", "pod/web", "spec.containers{c}", "kubelet, node-1", "pulled image", "60m", int64(4), "web.1"}},
		{"events.k8s.io singleton", v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "e"},
			InvolvedObject: v1.ObjectReference{Kind: "Node"},
			Type:           "Warning", Reason: "Rebooted",
			EventTime:           micro(30 * time.Second),
			ReportingController: "kubelet", ReportingInstance: "node-2",
		}, []any{"30s", "Warning", "Rebooted", "node", "", "kubelet, node-2", "", "30s", int64(1), "e"}},
		{"series", v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "s"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "p"},
			EventTime:      micro(10 * time.Minute), Source: v1.EventSource{Component: "scheduler"},
			Series: &v1.EventSeries{Count: 7, LastObservedTime: micro(5 * time.Second)},
		}, []any{"5s", "", "", "pod/p", "", "scheduler", "", "10m", int64(7), "s"}},
		{"no times", v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			[]any{"<unknown>", "", "", "", "", "", "", "<unknown>", int64(1), "x"}},
	}
	s := NewStrategy()
	cols := s.TableColumns()
	if len(cols) != len(cases[0].want) {
		t.Fatalf("%d columns, %d cells", len(cols), len(cases[0].want))
	}
	var wide []string
	for _, c := range cols {
		if c.Priority == 1 {
			wide = append(wide, c.Name)
		}
	}
	if want := []string{"Subobject", "Source", "First Seen", "Count", "Name"}; !reflect.DeepEqual(wide, want) {
		t.Errorf("wide columns %v, want %v", wide, want)
	}
	for _, c := range cases {
		row, err := s.TableRow(&c.ev, now)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(row.Cells, c.want) {
			t.Errorf("%s: cells %#v, want %#v", c.name, row.Cells, c.want)
		}
	}
}
