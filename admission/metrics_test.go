package admission

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gather parses reg's exposition as a scrape would.
func gather(t testing.TB, reg *prometheus.Registry) (metricstest.Families, string) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := metricstest.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return fs, b.String()
}

// refuser refuses every write.
type refuser struct{}

func (refuser) Validate(context.Context, *Attributes) error { return errors.New("refused") }

// TestChainMetrics: a known sequence of admissions gives kube's step and
// controller series, with kube's help, buckets and label values; a
// plugin is neither called nor timed for an operation kube's does not
// handle; a nil Metrics records nothing.
func TestChainMetrics(t *testing.T) {
	var log []string
	p := testPlugins(&log)
	p.Register(PluginPodSecurity, func([]byte) (any, error) { return refuser{}, nil })
	chain, _, err := p.NewChain(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	chain.Instrument(m)
	ctx := context.Background()
	create := &Attributes{Operation: Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ns", Name: "p"}
	if err := chain.Mutate(ctx, create); err != nil {
		t.Fatal(err)
	}
	if err := chain.Validate(ctx, create); err == nil {
		t.Fatal("the refuser admitted the create")
	}
	del := &Attributes{Operation: Delete, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ns", Name: "p"}
	log = nil
	if err := chain.Mutate(ctx, del); err != nil {
		t.Fatal(err)
	}
	// ServiceAccount (CREATE only in kube) and DefaultTolerationSeconds
	// (CREATE, UPDATE) are skipped; NamespaceLifecycle handles DELETE.
	if strings.Join(log, ",") != "admit lifecycle" {
		t.Errorf("a DELETE called %q", log)
	}

	fs, text := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"apiserver_admission_step_admission_duration_seconds", []string{"type", "admit", "operation", "CREATE", "rejected", "false"}, 1},
		{"apiserver_admission_step_admission_duration_seconds", []string{"type", "validate", "operation", "CREATE", "rejected", "true"}, 1},
		{"apiserver_admission_step_admission_duration_seconds", []string{"type", "admit", "operation", "DELETE", "rejected", "false"}, 1},
		{"apiserver_admission_step_admission_duration_seconds_summary", []string{"type", "validate", "operation", "CREATE", "rejected", "true"}, 1},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "NamespaceLifecycle", "type", "admit", "operation", "CREATE", "rejected", "false"}, 1},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "ServiceAccount", "type", "admit", "operation", "CREATE", "rejected", "false"}, 1},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "DefaultTolerationSeconds", "type", "admit", "operation", "CREATE"}, 1},
		// ServiceAccount validated, then PodSecurity refused: the chain stops.
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "ServiceAccount", "type", "validate", "operation", "CREATE", "rejected", "false"}, 1},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "PodSecurity", "type", "validate", "operation", "CREATE", "rejected", "true"}, 1},
		{"apiserver_admission_controller_admission_duration_seconds", []string{"name", "NamespaceLifecycle", "operation", "DELETE"}, 1},
	} {
		if got, ok := fs.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v; series %q", c.name, c.labels, got, ok, c.want, fs.Series(c.name))
		}
	}
	if _, ok := fs.Value("apiserver_admission_controller_admission_duration_seconds", "name", "ServiceAccount", "operation", "DELETE"); ok {
		t.Errorf("ServiceAccount timed on a DELETE: %q", fs.Series("apiserver_admission_controller_admission_duration_seconds"))
	}
	if n := len(fs.Series("apiserver_admission_controller_admission_duration_seconds")); n != 6 {
		t.Errorf("%d controller series, want 6: %q", n, fs.Series("apiserver_admission_controller_admission_duration_seconds"))
	}
	for _, want := range []string{
		"# HELP apiserver_admission_step_admission_duration_seconds [STABLE] Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).\n",
		"# TYPE apiserver_admission_step_admission_duration_seconds histogram\n",
		`apiserver_admission_step_admission_duration_seconds_bucket{operation="CREATE",rejected="false",type="admit",le="0.005"}`,
		`apiserver_admission_step_admission_duration_seconds_bucket{operation="CREATE",rejected="false",type="admit",le="2.5"}`,
		"# TYPE apiserver_admission_step_admission_duration_seconds_summary summary\n",
		"# HELP apiserver_admission_controller_admission_duration_seconds [STABLE] ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}

	// Without metrics: the same answers.
	chain.Instrument(nil)
	if err := chain.Mutate(ctx, create); err != nil {
		t.Fatal(err)
	}
	if err := chain.Validate(ctx, create); err == nil {
		t.Fatal("the refuser admitted the create")
	}
	if m, err := NewMetrics(nil); m != nil || err != nil {
		t.Errorf("NewMetrics(nil) = %v, %v", m, err)
	}
}

// BenchmarkChain is the admission of a pod create through a chain of
// plugins that do nothing: the chain's own cost, with and without
// metrics.
func BenchmarkChain(b *testing.B) {
	noop := func(string) Factory {
		return func([]byte) (any, error) { return &nopPlugin{}, nil }
	}
	var p Plugins
	for _, name := range DefaultOnPlugins {
		p.Register(name, noop(name))
	}
	a := &Attributes{Operation: Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ns", Name: "p",
		Object: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}}
	for _, withMetrics := range []bool{false, true} {
		name := "metrics=off"
		if withMetrics {
			name = "metrics=on"
		}
		b.Run(name, func(b *testing.B) {
			chain, _, err := p.NewChain(nil, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if withMetrics {
				m, err := NewMetrics(prometheus.NewRegistry())
				if err != nil {
					b.Fatal(err)
				}
				chain.Instrument(m)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := chain.Mutate(ctx, a); err != nil {
					b.Fatal(err)
				}
				if err := chain.Validate(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nopPlugin admits and validates everything.
type nopPlugin struct{}

func (*nopPlugin) Admit(context.Context, *Attributes) error    { return nil }
func (*nopPlugin) Validate(context.Context, *Attributes) error { return nil }
