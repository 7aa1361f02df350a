package flowcontrol

import "time"

// maxRetryAfter caps the Retry-After a level answers, as kube's.
const maxRetryAfter = 60

// retryAfter is the Retry-After a level answers with, in the spirit of
// kube's dropped-requests tracker: one second while rejections are rare,
// doubling (up to a minute) while they go on window after window, halving
// for each window without any. Guarded by its level's mutex.
type retryAfter struct {
	seconds     int64
	windowStart time.Time
	drops       int
	// prevDrops is whether the previous window had rejections.
	prevDrops bool
}

// record counts a rejection at now and returns the Retry-After for it.
func (r *retryAfter) record(now time.Time) int64 {
	if r.seconds == 0 {
		r.seconds, r.windowStart = 1, now
	}
	window := time.Duration(r.seconds) * time.Second
	if elapsed := now.Sub(r.windowStart); elapsed >= window {
		switch {
		case r.drops > 0 && elapsed < 2*window:
			// Rejections in consecutive windows: clients come back too
			// soon.
			r.seconds = min(2*r.seconds, maxRetryAfter)
		case r.drops == 0 || elapsed >= 2*window:
			// Quiet windows passed: come back sooner.
			for quiet := elapsed / window; quiet > 0 && r.seconds > 1; quiet-- {
				r.seconds = max(r.seconds/2, 1)
			}
		}
		r.windowStart, r.drops = now, 0
	}
	r.drops++
	return r.seconds
}
