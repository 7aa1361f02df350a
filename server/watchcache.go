package server

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultWatchCacheSizes are kube-apiserver's: events (in both groups) keep no watch cache
// (there are several per pod, each written a few times and read rarely:
// LISTs and watches of events read etcd).
var DefaultWatchCacheSizes = []string{"events#0", "events.events.k8s.io#0"}

// parseWatchCacheSizes reads --watch-cache-sizes values, as kube's
// ParseWatchCacheSizes does (the same errors).
func parseWatchCacheSizes(values []string) (map[schema.GroupResource]int, error) {
	sizes := map[schema.GroupResource]int{}
	for _, v := range values {
		resource, size, ok := strings.Cut(v, "#")
		if !ok || strings.Contains(size, "#") {
			return nil, fmt.Errorf("invalid value of watch cache size: %s", v)
		}
		n, err := strconv.Atoi(size)
		if err != nil {
			return nil, fmt.Errorf("invalid size of watch cache size: %s", v)
		}
		if n < 0 {
			return nil, fmt.Errorf("watch cache size cannot be negative: %s", v)
		}
		sizes[schema.ParseGroupResource(resource)] = n
	}
	return sizes, nil
}

// noWatchCache says which resources keep no watch cache: every one with
// DisableWatchCache, else those sized 0 by DefaultWatchCacheSizes and then
// WatchCacheSizes (a later value for a resource wins).
func (c *Config) noWatchCache() (func(schema.GroupResource) bool, error) {
	if c.DisableWatchCache {
		return func(schema.GroupResource) bool { return true }, nil
	}
	sizes, err := parseWatchCacheSizes(append(append([]string{}, DefaultWatchCacheSizes...), c.WatchCacheSizes...))
	if err != nil {
		return nil, err
	}
	return func(gr schema.GroupResource) bool {
		size, ok := sizes[gr]
		return ok && size == 0
	}, nil
}
