package quantity

import (
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestCmpAgreesWithQuantityCmp: on quantities Quantity.Cmp handles
// cheaply, Cmp answers the same.
func TestCmpAgreesWithQuantityCmp(t *testing.T) {
	values := []string{"0", "1", "-1", "1m", "999m", "1000m", "1.5", "2", "1Ki", "1024", "1k", "1e3", "0.001", "100n", "1e-9", "-1e-9",
		"128Mi", "134217728", "1G", "1Gi", "9223372036854775807", "-9223372036854775807", "1e18", "12e17", "1.2e18", "0.5Ki", "512"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		values = append(values, resource.NewScaledQuantity(r.Int64N(2_000_000)-1_000_000, resource.Scale(r.IntN(12)-6)).String())
	}
	for _, x := range values {
		for _, y := range values {
			a, b := resource.MustParse(x), resource.MustParse(y)
			if got, want := Cmp(a, b), a.Cmp(b); got != want {
				t.Errorf("Cmp(%s, %s) = %d, Quantity.Cmp %d", x, y, got, want)
			}
		}
	}
}

// TestCmpHugeIsCheap: quantities with exponents of a hundred million
// compare at once, and right.
func TestCmpHugeIsCheap(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1e100000000", "0", 1},
		{"-1e100000000", "0", -1},
		{"1e100000000", "1", 1},
		{"1", "1e100000000", -1},
		{"1e100000000", "1e100000000", 0},
		{"1e100000000", "10e99999999", 0},
		{"2e100000000", "1e100000000", 1},
		{"1e100000000", "1e100000001", -1},
		{"-1e100000000", "-1", -1},
		{"1e-100000", "1n", 0}, // parsed as kube does: rounded up to 1n
	}
	start := time.Now()
	for _, tc := range tests {
		if got := Cmp(resource.MustParse(tc.a), resource.MustParse(tc.b)); got != tc.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("comparisons took %v", d)
	}
}

func TestSumsEqual(t *testing.T) {
	q := func(ss ...string) []resource.Quantity {
		var out []resource.Quantity
		for _, s := range ss {
			out = append(out, resource.MustParse(s))
		}
		return out
	}
	tests := []struct {
		a, b []resource.Quantity
		want bool
	}{
		{q("1", "500m"), q("1500m"), true},
		{q("1", "500m"), q("1501m"), false},
		{q("1Gi"), q("512Mi", "512Mi"), true},
		{q("1e100000000", "1"), q("1", "1e100000000"), true},
		{q("1e100000000", "1"), q("2", "1e100000000"), false},
		{q("1e100000000"), q("10e99999999"), true},
		{q(), q(), true},
		{q("0"), q(), true},
	}
	start := time.Now()
	for _, tc := range tests {
		if got := SumsEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("SumsEqual(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("sums took %v", d)
	}
}

func TestCostly(t *testing.T) {
	for s, want := range map[string]bool{
		"1":                              false,
		"1e100000000":                    false, // an int64 and a scale: cheap
		"1.5e100000000":                  false,
		"123456789012345678e100000000":   false, // 18 digits
		"1234567890123456789e100000000":  true,  // 19 digits
		"12345678901234567890e1000":      true,
		"12345678901234567890e999":       false,
		"1e-100000000":                   true, // below a nano
		"1e-1000":                        true,
		"1e-999":                         false,
		"0.0000000001e100000":            false,
		"1E-100000":                      true,
		"-1e-100000":                     true,
		"1e2147483648":                   false, // out of int32: refused by the parser at once
		"100Mi":                          false,
		"not a quantity e-100000":        false,
		"e-12077":                        false, // no digits: not a quantity
		"1e-100000000000000000000000000": false,
	} {
		if got := Costly(s); got != want {
			t.Errorf("Costly(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCheckBytes(t *testing.T) {
	field := func(s string) []byte { return append([]byte{0x0a, byte(len(s))}, s...) }
	for _, tc := range []struct {
		data []byte
		bad  bool
	}{
		{field("1e-100000"), true},
		{append([]byte("k8s\x00\x12\x0b"), field("1e-100000")...), true},
		{field("name-1e-100000"), false},
		{field("t-test-12077gb"), false},
		{field("1e100000000"), false},
		{[]byte("1e-100000"), false}, // not a protobuf string field
	} {
		if err := CheckBytes(tc.data); (err != nil) != tc.bad {
			t.Errorf("CheckBytes(%q) = %v", tc.data, err)
		}
	}
}
