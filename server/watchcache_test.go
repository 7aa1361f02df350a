package server

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNoWatchCache(t *testing.T) {
	events, pods, leases := schema.GroupResource{Resource: "events"}, schema.GroupResource{Resource: "pods"},
		schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	eventsV1 := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	for _, tc := range []struct {
		name    string
		cfg     Config
		off     []schema.GroupResource
		on      []schema.GroupResource
		wantErr string
	}{
		{name: "kube's default: events only, in both groups", off: []schema.GroupResource{events, eventsV1}, on: []schema.GroupResource{pods, leases}},
		{name: "events cached again", cfg: Config{WatchCacheSizes: []string{"events#100"}}, on: []schema.GroupResource{events, pods}, off: []schema.GroupResource{eventsV1}},
		{name: "a group resource", cfg: Config{WatchCacheSizes: []string{"leases.coordination.k8s.io#0"}}, off: []schema.GroupResource{events, leases}, on: []schema.GroupResource{pods}},
		{name: "--watch-cache=false", cfg: Config{DisableWatchCache: true, WatchCacheSizes: []string{"events#100"}}, off: []schema.GroupResource{events, pods, leases}},
		{name: "no size", cfg: Config{WatchCacheSizes: []string{"pods"}}, wantErr: "invalid value of watch cache size: pods"},
		{name: "not a number", cfg: Config{WatchCacheSizes: []string{"pods#x"}}, wantErr: "invalid size of watch cache size: pods#x"},
		{name: "negative", cfg: Config{WatchCacheSizes: []string{"pods#-1"}}, wantErr: "watch cache size cannot be negative: pods#-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, err := tc.cfg.noWatchCache()
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, gr := range tc.off {
				if !off(gr) {
					t.Errorf("%s keeps a watch cache, want none", gr)
				}
			}
			for _, gr := range tc.on {
				if off(gr) {
					t.Errorf("%s keeps no watch cache, want one", gr)
				}
			}
		})
	}
}
