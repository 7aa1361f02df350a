package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// authzUser is the benchmarks' user: not in system:masters, so that every
// request is decided by the configured mode (RBAC or AlwaysAllow).
const (
	authzUser      = "bench-user"
	authzNamespace = "bench-authz"
	authzListItems = 100
)

var (
	// authzRBACServer runs the default modes (Node,RBAC) with authzUser
	// bound to the ClusterRole edit in authzNamespace.
	authzRBACServer = &lazyServer{setup: func(srv *server.Server) error { return setupAuthz(srv, true) }}
	// authzAllowServer runs --authorization-mode=AlwaysAllow.
	authzAllowServer = &lazyServer{
		start: func(tb *procTB) (srv *server.Server, err error) {
			defer recoverFatal(&err)
			return testserver.StartWith(tb, tb.TempDir(), func(c *server.Config) { c.AuthorizationModes = []string{"AlwaysAllow"} }).Server, nil
		},
		setup: func(srv *server.Server) error { return setupAuthz(srv, false) },
	}
)

// setupAuthz creates the namespace and its pods to list (as the admin) and,
// for RBAC, binds authzUser to edit there and waits until it may list.
func setupAuthz(srv *server.Server, bind bool) error {
	admin := newClient()
	defer admin.CloseIdleConnections()
	ctx := context.Background()
	if err := createNamespace(admin, srv.URL(), authzNamespace); err != nil {
		return err
	}
	_, bodies := podBodies("list", authzListItems, func(int) string { return "web" })
	for _, body := range bodies {
		if err := post(ctx, admin, srv.URL()+"/api/v1/namespaces/"+authzNamespace+"/pods", body, http.StatusCreated); err != nil {
			return err
		}
	}
	if !bind {
		return nil
	}
	binding, _ := json.Marshal(map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "bench-edit"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": authzUser}},
	})
	if err := post(ctx, admin, srv.URL()+"/apis/rbac.authorization.k8s.io/v1/namespaces/"+authzNamespace+"/rolebindings", binding, http.StatusCreated); err != nil {
		return err
	}
	user, err := authzClient()
	if err != nil {
		return err
	}
	defer user.CloseIdleConnections()
	// The binding and edit's aggregated rules reach the authorizer's cache
	// through watches: poll, with a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := get(user, srv.URL()+"/api/v1/namespaces/"+authzNamespace+"/pods")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still cannot list pods: %w", authzUser, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// authzClient is newClient presenting authzUser's client certificate.
func authzClient() (*http.Client, error) {
	pair, err := testserver.IssueClient(authzUser)
	if err != nil {
		return nil, err
	}
	c := testserver.ClientConfig("")
	c.CertData, c.KeyData = pair.CertPEM, pair.KeyPEM
	tlsCfg, err := rest.TLSConfigFor(c)
	if err != nil {
		return nil, err
	}
	client := newClient()
	client.Transport.(*http.Transport).TLSClientConfig = tlsCfg
	return client, nil
}

// BenchmarkAuthorization compares what a user outside system:masters gets
// with RBAC (the default, its rights from a RoleBinding to edit) and with
// AlwaysAllow: pod creates by 16 concurrent clients (creates/s) and one
// client's LISTs of a namespace of 100 pods (ms/op). The difference is the
// cost of RequestInfo and the RBAC decision (see BenchmarkAuthorize in
// auth/authorizer/rbac for the decision alone).
func BenchmarkAuthorization(b *testing.B) {
	skipShort(b)
	for _, s := range []struct {
		name string
		srv  *lazyServer
	}{{"rbac", authzRBACServer}, {"always-allow", authzAllowServer}} {
		b.Run(s.name+"/create", func(b *testing.B) { benchAuthzCreate(b, s.srv) })
		b.Run(s.name+"/list100", func(b *testing.B) { benchAuthzList(b, s.srv) })
	}
}

func benchAuthzCreate(b *testing.B, ls *lazyServer) {
	srv := ls.get(b)
	client, err := authzClient()
	if err != nil {
		b.Fatal(err)
	}
	defer client.CloseIdleConnections()
	timedCreates(b, srv, client, authzNamespace, "authz")
}

func benchAuthzList(b *testing.B, ls *lazyServer) {
	srv := ls.get(b)
	client, err := authzClient()
	if err != nil {
		b.Fatal(err)
	}
	defer client.CloseIdleConnections()
	// A label no created pod has: the LIST reads the namespace's pods
	// (100, plus the create benchmark's) and answers none, so the time is
	// the request's, not the body's.
	url := srv.URL() + "/api/v1/namespaces/" + authzNamespace + "/pods?labelSelector=app%3Dnone"
	if _, err := get(client, url); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := get(client, url); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(b.N), "ms/op")
}
