// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain)
// built from the version go.mod pins, so that the HA and fault tests run
// real etcd members as separate processes without downloading a release.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
