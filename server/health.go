package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/version"
)

// Version is the Kubernetes version corekube serves, with its own suffix.
var Version = version.Info{
	Major:        "1",
	Minor:        "32",
	GitVersion:   "v1.32.3-corekube",
	GitCommit:    "unknown",
	GitTreeState: "clean",
	BuildDate:    "1970-01-01T00:00:00Z",
	GoVersion:    runtime.Version(),
	Compiler:     runtime.Compiler,
	Platform:     runtime.GOOS + "/" + runtime.GOARCH,
}

// healthCheck is one named check of /healthz, /livez or /readyz.
type healthCheck struct {
	name  string
	check func(ctx context.Context) error
}

// healthHandler answers "ok", or the verbose per-check report kube gives
// with ?verbose; a failing check makes it a 500.
func healthHandler(kind string, checks []healthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		var report strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.check(ctx); err != nil {
				failed = true
				fmt.Fprintf(&report, "[-]%s failed: reason withheld\n", c.name)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", c.name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache, private")
		_, verbose := r.URL.Query()["verbose"]
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", report.String(), kind)
		case verbose:
			fmt.Fprintf(w, "%s%s check passed\n", report.String(), kind)
		default:
			fmt.Fprint(w, "ok")
		}
	}
}
