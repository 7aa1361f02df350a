// Package metricstest reads Prometheus metrics in tests: a collector's
// exposition as text, and a scraped /metrics parsed with Prometheus' own
// text parser (which refuses malformed or duplicate series) into values
// that tests look up by name and labels.
package metricstest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Text is the text exposition of the collectors, gathered through a
// fresh registry (so their descriptions are checked as at registration).
func Text(t testing.TB, collectors ...prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatalf("encode %s: %v", f.GetName(), err)
		}
	}
	return b.String()
}

// Families are parsed metric families by name.
type Families map[string]*dto.MetricFamily

// Parse parses a text exposition; it fails on anything Prometheus would
// refuse to ingest, a series repeated included.
func Parse(r io.Reader) (Families, error) {
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the exposition: %w", err)
	}
	for name, f := range families {
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			key := labelKey(m.GetLabel())
			if seen[key] {
				return nil, fmt.Errorf("%s{%s} appears twice", name, key)
			}
			seen[key] = true
		}
	}
	return families, nil
}

// Scrape GETs url (a /metrics endpoint) with client and parses it.
func Scrape(t testing.TB, client *http.Client, url string) Families {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, b)
	}
	families, err := Parse(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return families
}

// Value is the value of the series of name whose labels include labels
// (pairs: name, value, ...): a counter's or gauge's value, a histogram's
// or summary's sample count. ok is false when no series matches; more
// than one match is summed.
func (fs Families) Value(name string, labels ...string) (value float64, ok bool) {
	f := fs[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m.GetLabel(), labels) {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			value += m.Counter.GetValue()
		case m.Gauge != nil:
			value += m.Gauge.GetValue()
		case m.Histogram != nil:
			value += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			value += float64(m.Summary.GetSampleCount())
		case m.Untyped != nil:
			value += m.Untyped.GetValue()
		}
	}
	return value, ok
}

// Series lists the label sets of name's series, each as "k=v,k=v"
// sorted, for error messages.
func (fs Families) Series(name string) []string {
	var out []string
	if f := fs[name]; f != nil {
		for _, m := range f.GetMetric() {
			out = append(out, labelKey(m.GetLabel()))
		}
	}
	sort.Strings(out)
	return out
}

func hasLabels(have []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range have {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func labelKey(labels []*dto.LabelPair) string {
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Gather renders what g (a registry) gathers as a text exposition and
// parses it back, as a scrape of g would see it.
func Gather(t testing.TB, g prometheus.Gatherer) Families {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatalf("encode %s: %v", f.GetName(), err)
		}
	}
	fs, err := Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
