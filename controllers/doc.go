// Package controllers holds corekube's control loops. Each is an ordinary
// API client (client-go over HTTP, never server internals) with a
// Start(ctx) error that blocks until ctx ends.
//
// Node lifecycle, pod GC, disruption and ServiceAccounts read from one
// informer factory per process (sharedinformers), as kube-controller-manager's controllers do:
// their constructors take it and register their handlers, the composer
// starts it once they all have, and shuts it down once. The scheduler keeps
// informers of its own (non-terminal pods only, scheduling fields).
package controllers
