package bench

// The agents' heap profiles beside the apiserver's: each agent process
// serves Go's profiles at /debug/pprof/ on its kubelet API, as the
// kubelet does (--enable-debugging-handlers), behind the kubelet's
// authentication and authorization; the bench's admin client certificate
// passes both.

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeletURL is the kubelet API's base URL an agent logged at its start
// ("kubelet API listening" url=...).
func kubeletURL(logPath string) (string, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return "", fmt.Errorf("agent log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="kubelet API listening"`) {
			continue
		}
		for _, field := range strings.Fields(line) {
			if u, ok := strings.CutPrefix(field, "url="); ok {
				return strings.Trim(u, `"`), nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("agent log %s: %w", logPath, err)
	}
	return "", fmt.Errorf("agent log %s: no kubelet API URL", logPath)
}

// kubeletClient is an HTTPS client with the kubeconfig's client
// certificate that does not verify the kubelets' serving certificates (the
// agents' are self-signed, and kube-apiserver does not verify kubelets by
// default either).
func kubeletClient(kubeconfig string) (*http.Client, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	tc, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	if tc == nil {
		tc = &tls.Config{}
	}
	tc.InsecureSkipVerify, tc.RootCAs = true, nil //nolint:gosec // the agents' self-signed kubelet certificates
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 2 * time.Minute}, nil
}

// saveAgentProfiles writes each agent's heap profile (after a GC, so that
// it shows the live heap) to dir as <agent>-<phase>-heap.pb.gz.
func saveAgentProfiles(ctx context.Context, kubeconfig string, agents []*proc, dir, phase string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent profiles: %w", err)
	}
	hc, err := kubeletClient(kubeconfig)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	for _, p := range agents {
		base, err := kubeletURL(p.log)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/heap?gc=1", nil)
		if err != nil {
			return fmt.Errorf("%s heap profile: %w", p.name, err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("%s heap profile: %w", p.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("%s heap profile: %w", p.name, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s heap profile: %s: %.200s", p.name, resp.Status, body)
		}
		if err := os.WriteFile(filepath.Join(dir, p.name+"-"+phase+"-heap.pb.gz"), body, 0o644); err != nil {
			return fmt.Errorf("%s heap profile: %w", p.name, err)
		}
	}
	return nil
}
