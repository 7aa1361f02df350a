package bench

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The writes every node makes at steady state, by 16 concurrent clients
// over client-go with protobuf as the agents and the kubelet: a lease
// renewal (PUT of the Lease with a new renewTime, every 10 s per node),
// a pod status write (PUT pods/status, a condition's time changes) and a
// pod's bound ServiceAccount token (TokenRequest, once per pod and at 80%
// of its life). The server signs with an RSA-2048 key (RS256, what every
// data dir had before) or an ECDSA P-256 key (ES256, what `up` creates
// now). cpu-us/op is this process's CPU per op (server, etcd and the
// clients are in it: compare runs, not absolute figures).
const nodeWritesNamespace = "bench-nodewrites"

// nodeWritesObjects is how many leases and pods the writes cycle over.
const nodeWritesObjects = 64

func startKeyServer(alg string) func(tb *procTB) (*server.Server, error) {
	return func(tb *procTB) (*server.Server, error) {
		dir, err := os.MkdirTemp("", "corekube-bench-keys-")
		if err != nil {
			return nil, err
		}
		tb.Cleanup(func() { os.RemoveAll(dir) })
		keyFile := filepath.Join(dir, "sa.key")
		if alg == "RS256" {
			key, err := serviceaccount.GenerateKey()
			if err != nil {
				return nil, err
			}
			data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
			if err := os.WriteFile(keyFile, data, 0o600); err != nil {
				return nil, err
			}
		} else if _, err := serviceaccount.LoadOrCreateKey(keyFile); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg, err := testserver.NewConfig(filepath.Join(dir, "etcd"))
		if err != nil {
			return nil, err
		}
		cfg.ServiceAccountSigningKeyFile = keyFile
		cfg.ServiceAccountKeyFiles = []string{keyFile}
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		srv, err := server.Start(ctx, cfg)
		if err != nil {
			return nil, err
		}
		tb.Cleanup(func() {
			if err := srv.Shutdown(context.Background()); err != nil {
				tb.Errorf("shutdown: %v", err)
			}
		})
		tb.Cleanup(testserver.StartControllers(srv))
		return srv, nil
	}
}

func setupNodeWrites(srv *server.Server) error {
	c := clientFor(srv.URL())
	defer c.CloseIdleConnections()
	return createNamespace(c, srv.URL(), nodeWritesNamespace)
}

var nodeWritesServers = map[string]*lazyServer{
	"RS256": {start: startKeyServer("RS256"), setup: setupNodeWrites},
	"ES256": {start: startKeyServer("ES256"), setup: setupNodeWrites},
}

// BenchmarkNodeWrites: one op is one lease renewal, pod status write or
// token request.
func BenchmarkNodeWrites(b *testing.B) {
	skipShort(b)
	for _, alg := range []string{"RS256", "ES256"} {
		ls := nodeWritesServers[alg]
		b.Run("token-"+alg, func(b *testing.B) {
			cs, pods := nodeWritesFixture(b, ls.get(b))
			ctx := context.Background()
			seconds := int64(3607)
			runNodeWrites(b, func(i int) error {
				pod := pods[i%len(pods)]
				_, err := cs.CoreV1().ServiceAccounts(nodeWritesNamespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
					ExpirationSeconds: &seconds,
					BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
				}}, metav1.CreateOptions{})
				return err
			})
		})
	}
	ls := nodeWritesServers["ES256"]
	b.Run("lease-renew", func(b *testing.B) {
		srv := ls.get(b)
		cs, _ := nodeWritesFixture(b, srv)
		ctx := context.Background()
		leases := make([]*coordinationv1.Lease, nodeWritesObjects)
		for i := range leases {
			name := fmt.Sprintf("node-%d-%d", i, time.Now().UnixNano())
			holder, dur := name, int32(40)
			l, err := cs.CoordinationV1().Leases(nodeWritesNamespace).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &metav1.MicroTime{Time: time.Now()}},
			}, metav1.CreateOptions{FieldManager: "kubelet"})
			if err != nil {
				b.Fatal(err)
			}
			leases[i] = l
		}
		// Each of the 16 clients owns every 16th lease: a lease is
		// renewed by one writer at a time, from the object it last wrote.
		runNodeWrites(b, func(i int) error {
			j := i % len(leases)
			l := leases[j].DeepCopy()
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			out, err := cs.CoordinationV1().Leases(nodeWritesNamespace).Update(ctx, l, metav1.UpdateOptions{FieldManager: "kubelet"})
			if err == nil {
				leases[j] = out
			}
			return err
		})
	})
	b.Run("pod-status", func(b *testing.B) {
		cs, pods := nodeWritesFixture(b, ls.get(b))
		ctx := context.Background()
		runNodeWrites(b, func(i int) error {
			j := i % len(pods)
			p := pods[j].DeepCopy()
			now := metav1.Now()
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			}
			out, err := cs.CoreV1().Pods(nodeWritesNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "kubelet"})
			if err == nil {
				pods[j] = out
			}
			return err
		})
	})
}

// nodeWritesFixture returns a protobuf client-go client of srv and
// nodeWritesObjects new pods.
func nodeWritesFixture(b *testing.B, srv *server.Server) (*kubernetes.Clientset, []*v1.Pod) {
	b.Helper()
	rc := testserver.ClientConfig(srv.URL())
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.QPS, rc.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pods := make([]*v1.Pod, nodeWritesObjects)
	for i := range pods {
		p, err := cs.CoreV1().Pods(nodeWritesNamespace).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "writer-"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx:1.27"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pods[i] = p
	}
	return cs, pods
}

// runNodeWrites runs b.N ops on concurrency workers, op i on object
// i%nodeWritesObjects (a worker's objects are its own: 64 is a multiple
// of 16), and reports ops/s, latencies and CPU per op.
func runNodeWrites(b *testing.B, op func(i int) error) {
	b.Helper()
	cpu0 := selfCPU()
	b.ResetTimer()
	lat, wall, err := runStriped(concurrency, b.N, op)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/wall.Seconds(), "ops/s")
	b.ReportMetric(float64((selfCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
}

// runStriped is runPool where worker w runs the ops i with i%workers == w,
// so that one object is never written by two workers at once.
func runStriped(workers, n int, fn func(i int) error) ([]time.Duration, time.Duration, error) {
	type result struct {
		lat []time.Duration
		err error
	}
	results := make(chan result, workers)
	start := time.Now()
	for w := range workers {
		go func() {
			var r result
			for i := w; i < n; i += workers {
				t0 := time.Now()
				if r.err = fn(i); r.err != nil {
					break
				}
				r.lat = append(r.lat, time.Since(t0))
			}
			results <- r
		}()
	}
	var lat []time.Duration
	var firstErr error
	for range workers {
		r := <-results
		lat = append(lat, r.lat...)
		if firstErr == nil {
			firstErr = r.err
		}
	}
	wall := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, wall, firstErr
}
