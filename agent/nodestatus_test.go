package agent

import (
	"testing"
	"time"
)

// TestReportDelaySpreads: the delay after a status change is uniform over
// [-period/2, period/2), as the kubelet's, so that the periodic reports
// of nodes registered together spread over a whole period.
func TestReportDelaySpreads(t *testing.T) {
	const period = 5 * time.Minute
	var below, above int
	for range 1000 {
		d := reportDelay(period)
		if d < -period/2 || d >= period/2 {
			t.Fatalf("reportDelay(%v) = %v, outside [-%v, %v)", period, d, period/2, period/2)
		}
		switch {
		case d < -period/4:
			below++
		case d >= period/4:
			above++
		}
	}
	// Each quarter at the ends holds a quarter of the draws: 250 ± 5σ.
	if below < 180 || below > 320 || above < 180 || above > 320 {
		t.Errorf("of 1,000 delays, %d in the lowest quarter of the range and %d in the highest, want ~250 each", below, above)
	}
}
