package pods

import "github.com/corekube/corekube/registry"

var _ registry.WatchIndexStrategy = (*Strategy)(nil)

// WatchIndexField: every node agent watches the pods bound to its node
// (fieldSelector spec.nodeName=<node>), so the watch cache indexes pod
// watchers by it.
func (*Strategy) WatchIndexField() string { return "spec.nodeName" }
