// Package server is corekube's composition root for the API server: it
// starts (or connects to) etcd, builds one registry Store per resource,
// mounts the generic handlers on a chi router behind the filters, and runs
// the HTTP server until its context ends.
package server
