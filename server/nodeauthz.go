package server

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/corekube/corekube/auth/authorizer/node"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/registry"
)

// podStore finds the pods' Store among api's.
func podStore(api *handlers.API) *registry.Store {
	for _, r := range api.Resources() {
		if info := r.Store.Info(); info.Group == "" && info.Resource == "pods" {
			return r.Store
		}
	}
	return nil
}

// startNodeGraph keeps graph current with the pods through the server's
// own watch cache (no etcd read per decision), as kube's node authorizer
// graph is fed by informers: the initial state as one Replace, then each
// change; a cut watch starts over.
func (s *Server) startNodeGraph(ctx context.Context, st *registry.Store, graph *node.Graph) {
	s.caches.Add(1)
	go func() {
		defer s.caches.Done()
		for ctx.Err() == nil {
			s.feedNodeGraph(ctx, st, graph)
		}
	}()
}

func (s *Server) feedNodeGraph(ctx context.Context, st *registry.Store, graph *node.Graph) {
	w, err := st.Watch(ctx, "", &metainternalversion.ListOptions{AllowWatchBookmarks: true})
	if err != nil {
		s.log.Error("watch pods for the node authorizer", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return
	}
	defer w.Stop()
	initial := map[string]*v1.Pod{}
	synced := false
	for {
		ev, ok := w.Next()
		if !ok {
			return
		}
		switch ev.Type {
		case apiwatch.Bookmark:
			if m, err := metaOf(ev.Object); err == nil && !synced && m.GetAnnotations()["k8s.io/initial-events-end"] == "true" {
				pods := make([]*v1.Pod, 0, len(initial))
				for _, p := range initial {
					pods = append(pods, p)
				}
				graph.Replace(pods)
				synced, initial = true, nil
			}
			continue
		case apiwatch.Error:
			return
		}
		var p *v1.Pod
		var err error
		if data, ok := graphJSON(ev); ok {
			p, err = node.DecodePod(data) // what the graph reads, not the whole pod
		} else if obj, derr := ev.Decoded(); derr != nil {
			err = derr
		} else if p, ok = obj.(*v1.Pod); !ok {
			continue
		}
		if err != nil {
			s.log.Error("decode a pod for the node authorizer", "err", err)
			continue
		}
		switch {
		case !synced && ev.Type == apiwatch.Deleted:
			delete(initial, p.Namespace+"/"+p.Name)
		case !synced:
			initial[p.Namespace+"/"+p.Name] = p
		case ev.Type == apiwatch.Deleted:
			graph.Delete(p.Namespace, p.Name)
		default:
			graph.Upsert(p)
		}
	}
}

// graphJSON is the JSON the node graph decodes a pod from: the event's
// when JSON is how the cache keeps it; none for a pod kept as protobuf,
// whose message Decoded decodes (its JSON would be made for this alone).
func graphJSON(ev registry.WatchEvent) ([]byte, bool) {
	if ev.DecodesFromMessage() {
		return nil, false
	}
	return ev.JSON()
}
