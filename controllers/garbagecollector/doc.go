// Package garbagecollector is kube-controller-manager's garbage collector
// ("garbage-collector-controller"): it deletes the objects whose owners
// (metadata.ownerReferences) are gone, and carries out the foreground and
// orphan deletions that the API server starts by setting the
// foregroundDeletion and orphan finalizers on the owner.
//
// It covers every served resource that can be listed, watched and deleted,
// as discovery tells (events excepted, as in kube), through metadata
// informers (PartialObjectMetadata: no per-resource code and only the
// metadata in memory). The informers feed one goroutine that keeps a graph
// of owners and dependents by uid (kube's GraphBuilder); owners referenced
// but not observed yet are virtual nodes, which a live lookup verifies.
// Workers then act on nodes queued for deletion (attemptToDelete) or
// orphaning (attemptToOrphan), always checking the live object first: the
// graph only says where to look.
//
// Differences from kube: resources appearing in discovery later are
// added at the next resync (30s), resources that disappear keep their
// informer until the process ends; the absent-owner cache is a bounded map
// rather than an LRU.
package garbagecollector
