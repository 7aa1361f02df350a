// Package controllers holds corekube's control loops. Each is an ordinary
// API client (client-go over HTTP, never server internals) with a
// Start(ctx) error that blocks until ctx ends.
package controllers
