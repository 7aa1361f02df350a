package flowcontrol

import "time"

// maxRetryAfter caps the Retry-After a level answers, as kube's.
const maxRetryAfter = 32

// retryAfter is the Retry-After a level answers with, as kube's
// dropped-requests tracker computes it: 1 s at first; doubled (up to
// 32 s) when the rejections of the last Retry-After seconds reach three
// times it and it was not raised within that time; lowered by one second
// at a rejection when fewer than it were rejected in that window. Guarded
// by its level's mutex.
type retryAfter struct {
	seconds int64
	// raised is when (unix seconds) seconds was last doubled.
	raised int64
	// history counts rejections per second, oldest first, for the last
	// maxRetryAfter seconds.
	history []dropsAt
}

type dropsAt struct {
	unix  int64
	drops int64
}

// record counts a rejection at now and returns the Retry-After for it.
func (r *retryAfter) record(now time.Time) int64 {
	t := now.Unix()
	if r.seconds == 0 {
		r.seconds = 1
	}
	if n := len(r.history); n > 0 && r.history[n-1].unix == t {
		r.history[n-1].drops++
	} else {
		r.history = append(r.history, dropsAt{unix: t, drops: 1})
	}
	for len(r.history) > 0 && t-r.history[0].unix > maxRetryAfter {
		r.history = r.history[1:]
	}
	// The rejections of the last seconds seconds, this one excluded.
	var recent int64
	for i := len(r.history) - 1; i >= 0 && t-r.history[i].unix <= r.seconds; i-- {
		if r.history[i].unix < t {
			recent += r.history[i].drops
		}
	}
	switch {
	case t-r.raised >= r.seconds && recent >= 3*r.seconds:
		r.seconds, r.raised = min(2*r.seconds, maxRetryAfter), t
	case recent < r.seconds && r.seconds > 1:
		r.seconds--
	}
	return r.seconds
}
