// Command etcd is the upstream etcd server entry point, built from the pinned module version.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
