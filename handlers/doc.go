// Package handlers serves the Kubernetes REST API: one generic resource
// handler (get, list, watch, create, update, patch, delete, deletecollection
// and subresources) mounted for every registered resource, discovery, and the
// single place where errors become Status responses.
package handlers
