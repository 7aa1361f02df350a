package e2e

import (
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/metricstest"
)

// TestUpWithNodes: `corekube up --nodes 2` is a working cluster for
// kubectl: nodes register and become Ready, the scheduler places pods,
// the agents run them to Running or Completed, and a graceful delete ends
// when the agent has stopped the pod.
func TestUpWithNodes(t *testing.T) {
	kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "2")
	p.mustKubectl("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "--timeout=30s")

	p.mustKubectl("run", "web", "--image=nginx:1.27")
	p.mustKubectl("run", "once", "--image=busybox", "--restart=Never", "--", "sh", "-c", "exit 0")
	p.mustKubectl("wait", "--for=condition=Ready", "pod/web", "--timeout=30s")
	p.mustKubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/once", "--timeout=30s")

	node := p.mustKubectl("get", "pod", "web", "-o", "jsonpath={.spec.nodeName}")
	if node != "node-1" && node != "node-2" {
		t.Errorf("web scheduled to %q", node)
	}
	out := p.mustKubectl("get", "pods", "--no-headers")
	for _, want := range []string{"web    1/1   Running", "once   0/1   Completed"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("kubectl get pods:\n%s\nwant a line like %q", out, want)
		}
	}
	events := p.mustKubectl("get", "events", "--field-selector", "involvedObject.name=web", "-o", "custom-columns=REASON:.reason", "--no-headers")
	for _, reason := range []string{"Scheduled", "Pulled", "Created", "Started"} {
		if !strings.Contains(events, reason) {
			t.Errorf("events of pod web lack %s:\n%s", reason, events)
		}
	}

	// The one /metrics of `up` has the scheduler's and the controllers'
	// metrics beside the API server's.
	fs, err := metricstest.Parse(strings.NewReader(p.mustKubectl("get", "--raw", "/metrics") + "\n"))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	if v, _ := fs.Value("scheduler_schedule_attempts_total", "result", "scheduled", "profile", "default-scheduler"); v < 2 {
		t.Errorf("scheduler_schedule_attempts_total{result=scheduled} = %v, want at least 2: %v", v, fs.Series("scheduler_schedule_attempts_total"))
	}
	if v, _ := fs.Value("workqueue_adds_total", "name", "serviceaccount"); v < 1 {
		t.Errorf("workqueue_adds_total{name=serviceaccount} = %v: %v", v, fs.Series("workqueue_adds_total"))
	}
	for _, name := range []string{"scheduler_pending_pods", "scheduler_pod_scheduling_sli_duration_seconds", "workqueue_depth", "workqueue_work_duration_seconds"} {
		if fs[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	t.Run("kubelet metrics", func(t *testing.T) { checkUpKubeletMetrics(t, p) })

	start := time.Now()
	p.mustKubectl("delete", "pod", "web", "--wait=true", "--timeout=60s")
	if out, err := p.kubectl("get", "pod", "web"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("pod web still there after delete --wait: %s", out)
	}
	t.Logf("graceful delete took %v", time.Since(start))
	p.stop()
}

// checkUpKubeletMetrics: the in-process agents' kubelet metrics are on the
// API server's /metrics, one series per node, counting the two pods the
// agents started; the kubelet port (the node's Hostname address and
// kubelet port, over HTTPS) serves the kubelet metrics, not the API
// server's, and only to callers who authenticate.
func checkUpKubeletMetrics(t *testing.T, p *process) {
	api := metricstest.Scrape(t, p.http, p.url+"/metrics")
	for _, node := range []string{"node-1", "node-2"} {
		if v, ok := api.Value("kubelet_node_name", "node", node); !ok || v != 1 {
			t.Errorf("kubelet_node_name{node=%s} = %v (found: %v); series %v", node, v, ok, api.Series("kubelet_node_name"))
		}
		for _, name := range []string{"kubelet_running_pods", "kubelet_pleg_relist_duration_seconds", "kubelet_pod_start_sli_duration_seconds"} {
			if _, ok := api.Value(name, "node", node); !ok {
				t.Errorf("no %s{node=%s} on /metrics", name, node)
			}
		}
	}
	// web and once, wherever the scheduler put them.
	if v, _ := api.Value("kubelet_started_pods_total"); v != 2 {
		t.Errorf("kubelet_started_pods_total summed over the nodes = %v, want 2; series %v", v, api.Series("kubelet_started_pods_total"))
	}
	if v, _ := api.Value("kubelet_started_containers_total", "container_type", "container"); v != 2 {
		t.Errorf("kubelet_started_containers_total{container_type=container} = %v, want 2", v)
	}

	host := p.mustKubectl("get", "node", "node-1", "-o", `jsonpath={.status.addresses[?(@.type=="Hostname")].address}`)
	port := p.mustKubectl("get", "node", "node-1", "-o", `jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}`)
	endpoint := "https://" + net.JoinHostPort(host, port)
	client, err := kubeletHTTPClient(filepath.Join(p.dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		resp, err := anonymous.Get(endpoint + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s%s: %d, want 401", endpoint, path, resp.StatusCode)
		}
	}
	kubelet := metricstest.Scrape(t, client, endpoint+"/metrics")
	for name := range api {
		if strings.HasPrefix(name, "kubelet_") && kubelet[name] == nil {
			t.Errorf("%s on the API server's /metrics, not on the kubelet port's", name)
		}
	}
	for name := range kubelet {
		if strings.HasPrefix(name, "apiserver_") || strings.HasPrefix(name, "scheduler_") {
			t.Errorf("the kubelet port (%s) serves the control plane's %s to anyone", endpoint, name)
		}
	}
}
