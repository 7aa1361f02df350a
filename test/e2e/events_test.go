package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testEvents: events are served under core/v1 and events.k8s.io/v1 over
// one storage, as kube does; k9s's :events view reads the latter, kubectl
// events the former.
func testEvents(t *testing.T, k *kc) {
	const ns = "e2e-events"
	k.expect("namespace/"+ns+" created", "create", "namespace", ns)
	now := time.Now().UTC()
	old := k.file("old.yaml", `apiVersion: v1
kind: Event
metadata: {name: web-0.old, namespace: `+ns+`}
involvedObject: {kind: Pod, name: web-0, namespace: `+ns+`}
reason: BackOff
message: Back-off restarting failed container
type: Warning
source: {component: kubelet, host: node-1}
count: 3
firstTimestamp: "`+now.Add(-time.Minute).Format(time.RFC3339)+`"
lastTimestamp: "`+now.Format(time.RFC3339)+`"
`)
	k.expect("event/web-0.old created", "create", "-f", old)
	modern := k.file("new.yaml", `apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: web-0.new, namespace: `+ns+`}
regarding: {kind: Pod, name: web-0, namespace: `+ns+`}
reason: Scheduled
note: Successfully assigned web-0 to node-1
type: Normal
action: Binding
reportingController: default-scheduler
reportingInstance: default-scheduler-e2e
eventTime: "`+now.Format("2006-01-02T15:04:05.000000Z")+`"
`)
	k.expect("event.events.k8s.io/web-0.new created", "create", "-f", modern)

	// Each is read through the other group.
	k.expect("Successfully assigned web-0 to node-1 default-scheduler", "get", "events.v1.", "web-0.new", "-n", ns,
		"-o", "jsonpath={.message} {.reportingComponent}")
	k.expect("Back-off restarting failed container 3 kubelet", "get", "events.v1.events.k8s.io", "web-0.old", "-n", ns,
		"-o", "jsonpath={.note} {.deprecatedCount} {.deprecatedSource.component}")

	// kubectl get of the events.k8s.io group (k9s's :events): kube's
	// event columns.
	table := regexp.MustCompile(`^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE\n` +
		`\S+ +Normal +Scheduled +pod/web-0 +Successfully assigned web-0 to node-1\n` +
		`\S+ +Warning +BackOff +pod/web-0 +Back-off restarting failed container\n?$`)
	if out := k.ok("get", "events.v1.events.k8s.io", "-n", ns, "--sort-by=.metadata.name"); !table.MatchString(out) {
		t.Errorf("kubectl get events.v1.events.k8s.io:\n%q", out)
	}
	if out := k.ok("get", "events.v1.events.k8s.io", "-A"); !strings.HasPrefix(out, "NAMESPACE ") || !strings.Contains(out, ns) {
		t.Errorf("kubectl get events.v1.events.k8s.io -A:\n%s", out)
	}
	var list struct {
		Kind, APIVersion string
		Items            []struct {
			Metadata struct{ Name, Namespace string }
			Note     string
		}
	}
	if err := json.Unmarshal([]byte(k.ok("get", "--raw", "/apis/events.k8s.io/v1/events")), &list); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, it := range list.Items {
		if it.Metadata.Namespace == ns {
			found++
		}
	}
	if list.Kind != "EventList" || list.APIVersion != "events.k8s.io/v1" || found != 2 {
		t.Errorf("GET /apis/events.k8s.io/v1/events: %s %s, %d of %s", list.Kind, list.APIVersion, found, ns)
	}
	k.expect("event.events.k8s.io/web-0.new", "get", "events.v1.events.k8s.io", "-n", ns, "--field-selector", "regarding.name=web-0,type=Normal", "-o", "name")

	// kubectl events (core/v1) sees both.
	events := regexp.MustCompile(`^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE\n` +
		`(\S+( \(x3 over \S+\))? +(Warning +BackOff +Pod/web-0 +Back-off restarting failed container|Normal +Scheduled +Pod/web-0 +Successfully assigned web-0 to node-1)\n?){2}$`)
	if out := k.ok("events", "-n", ns); !events.MatchString(out) {
		t.Errorf("kubectl events:\n%q", out)
	}
	k.expect(`event.events.k8s.io "web-0.new" deleted`, "delete", "events.v1.events.k8s.io", "web-0.new", "-n", ns)
	k.expectFail(`Error from server (NotFound): events "web-0.new" not found`, "get", "event", "web-0.new", "-n", ns)
}
