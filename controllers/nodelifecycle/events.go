package nodelifecycle

// Event sources, as kube-controller-manager names them.
const (
	sourceNodeController     = "node-controller"
	sourceEvictionController = "taint-eviction-controller"
)
