// Package integration drives a real corekube API server (embedded etcd,
// HTTP on 127.0.0.1:0) through client-go and raw HTTP, and checks that it
// answers as kube-apiserver v1.32 does. One server is shared by the whole
// package (TestMain); tests isolate themselves by namespace (or, for
// cluster-scoped objects, by unique names and labels). Tests that need a
// server of their own (restart, etcd outage) start one with testserver.
package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var (
	// srv is the server shared by the package.
	srv *server.Server
	// cfg is a client-go config for srv.
	cfg *rest.Config
	// cs is a typed clientset for srv.
	cs kubernetes.Interface
)

func TestMain(m *testing.M) {
	if testserver.ShortMain("test/integration") {
		os.Exit(0) // the shared server is not started
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The server runs the controllers it needs (the ServiceAccounts
	// controller: no pod is admitted in a namespace without its default
	// ServiceAccount).
	s, stop, err := testserver.StartMain(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	srv, cfg, cs = s.Server, s.Config, s.Client
	return m.Run()
}

var uniqueCounter atomic.Int64

// uniqueName returns a DNS-1123 label derived from the test's name, unique
// in the package run, at most 63 characters long.
func uniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(prefix + "-" + t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 45 {
		base = strings.Trim(base[:45], "-")
	}
	return fmt.Sprintf("%s-%d%s", base, uniqueCounter.Add(1), utilrand.String(4))
}

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	name := uniqueName(t, "t")
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// eventually polls cond every 50ms until it returns true, failing the test
// when timeout passes first.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func ptr[T any](v T) *T { return &v }
