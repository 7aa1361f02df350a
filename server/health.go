package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corekube/corekube/handlers"
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
// with ?verbose; a failing check makes it a 500 with the report. Checks
// named by ?exclude= (repeatable) are skipped as kube skips them, and the
// names that match no check are listed in a warning line.
func healthHandler(kind string, checks []healthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		query := r.URL.Query()
		excluded := map[string]bool{}
		for _, name := range query["exclude"] {
			excluded[name] = true
		}
		var report strings.Builder
		failed := false
		for _, c := range checks {
			if excluded[c.name] {
				delete(excluded, c.name)
				fmt.Fprintf(&report, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if err := c.check(ctx); err != nil {
				failed = true
				// The reason stays out of this public report, as in kube;
				// /<kind>/<check> (which needs authorization) tells it.
				fmt.Fprintf(&report, "[-]%s failed: reason withheld\n", c.name)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", c.name)
			}
		}
		if len(excluded) > 0 {
			names := make([]string, 0, len(excluded))
			for name := range excluded {
				names = append(names, strconv.Quote(name))
			}
			slices.Sort(names)
			fmt.Fprintf(&report, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		healthHeaders(w)
		_, verbose := query["verbose"]
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

// checkHandler serves one check alone (/readyz/etcd): "ok", or a 500
// that says why, as kube's per-check paths.
func checkHandler(c healthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		healthHeaders(w)
		if err := c.check(ctx); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "internal server error: %v\n", err)
			return
		}
		fmt.Fprint(w, "ok")
	}
}

func healthHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache, private")
}

// healthRoutes serves /<kind> with checks and /<kind>/<check> for each.
func healthRoutes(r interface {
	Get(pattern string, h http.HandlerFunc)
}, kind string, checks []healthCheck) {
	r.Get("/"+kind, healthHandler(kind, checks))
	for _, c := range checks {
		r.Get("/"+kind+"/"+c.name, checkHandler(c))
	}
}

// cachesReady fails while a resource's watch cache is not serving (its
// first list, or a relist after etcd was lost).
func cachesReady(api *handlers.API) error {
	var waiting []string
	for _, r := range api.Resources() {
		if r.Store != nil && !r.Store.CacheReady() {
			waiting = append(waiting, r.Store.Info().GroupResource().String())
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("watch caches not ready: %s", strings.Join(waiting, ", "))
	}
	return nil
}
