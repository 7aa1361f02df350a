package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// closedWatchers reads the API server's log for the watchers it closed for
// falling behind and counts them by client (the watcher's user) and cache:
// "kubernetes-admin /pods/" -> 2.
func closedWatchers(logPath string) (map[string]int, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, fmt.Errorf("apiserver log: %w", err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="closing a watcher that fell behind"`) {
			continue
		}
		out[logValue(line, "client")+" "+logValue(line, "cache")]++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("apiserver log: %w", err)
	}
	return out, nil
}

// logValue is the value of key in a slog text line ("" if absent).
func logValue(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if q, err := strconv.QuotedPrefix(v); err == nil {
			s, _ := strconv.Unquote(q)
			return s
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// benchUser is the user the bench's own clients are (SelfSubjectReview).
func benchUser(ctx context.Context, client kubernetes.Interface) (string, error) {
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("self subject review: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// splitClosedWatchers separates the bench's own closed watchers (user
// bench) from the cluster's components', each as "client cache: n" lines.
func splitClosedWatchers(byClient map[string]int, bench string) (own, cluster []string) {
	for k, n := range byClient {
		line := fmt.Sprintf("%s: %d", k, n)
		if strings.HasPrefix(k, bench+" ") {
			own = append(own, line)
		} else {
			cluster = append(cluster, line)
		}
	}
	sort.Strings(own)
	sort.Strings(cluster)
	return own, cluster
}
