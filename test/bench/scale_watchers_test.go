package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// watcherCloses is how many watchers of one client and cache the API
// server closed for falling behind, and when the first and the last were
// (the log's times), so that a run's report can say in which phase.
type watcherCloses struct {
	N     int    `json:"n"`
	First string `json:"first"`
	Last  string `json:"last"`
}

// The API server's log lines for a watcher that fell behind its buffer
// and went on from the watch cache's window, and for one closed for
// falling behind (its window no longer held its events).
const (
	laggedWatcherMsg = `msg="a watcher fell behind its buffer; it goes on from the window"`
	closedWatcherMsg = `msg="closing a watcher that fell behind"`
)

// closedWatchers reads the API server's log for the watchers it closed for
// falling behind and counts them by client (the watcher's user) and cache:
// "kubernetes-admin /pods/" -> 2, from 06:12:52 to 06:13:01.
func closedWatchers(logPath string) (map[string]watcherCloses, error) {
	return watchersLogged(logPath, closedWatcherMsg)
}

// laggedWatchers counts, the same way, the watchers that fell behind
// their buffer (the first time for each watcher) and went on from the
// window.
func laggedWatchers(logPath string) (map[string]watcherCloses, error) {
	return watchersLogged(logPath, laggedWatcherMsg)
}

// watcherLines are the counts of closedWatchers or laggedWatchers, one
// "client cache: n (first to last UTC)" each, in order.
func watcherLines(byClient map[string]watcherCloses) []string {
	lines := make([]string, 0, len(byClient))
	for k, c := range byClient {
		lines = append(lines, watcherLine(k, c))
	}
	sort.Strings(lines)
	return lines
}

// watcherLine is one client's and cache's count: "client cache: n (first
// to last UTC)".
func watcherLine(key string, c watcherCloses) string {
	return fmt.Sprintf("%s: %d (%s to %s UTC)", key, c.N, c.First, c.Last)
}

func watchersLogged(logPath, msg string) (map[string]watcherCloses, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, fmt.Errorf("apiserver log: %w", err)
	}
	defer f.Close()
	out := map[string]watcherCloses{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, msg) {
			continue
		}
		k := logValue(line, "client") + " " + logValue(line, "cache")
		c := out[k]
		c.N++
		at := logTime(line)
		if c.First == "" {
			c.First = at
		}
		c.Last = at
		out[k] = c
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("apiserver log: %w", err)
	}
	return out, nil
}

// logTime is the time of day (UTC, to the second) of a slog text line,
// which starts with its time.
func logTime(line string) string {
	v, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC().Format(time.TimeOnly)
	}
	return "?"
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
// bench) from the cluster's components', each as "client cache: n (from
// first to last)" lines.
func splitClosedWatchers(byClient map[string]watcherCloses, bench string) (own, cluster []string) {
	for k, c := range byClient {
		line := watcherLine(k, c)
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
