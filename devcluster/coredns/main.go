// CoreDNS (github.com/coredns/coredns, the version pinned in devcluster/go.mod of the build dir)
// with only the plugins the real node's cluster DNS uses: the kubernetes plugin answers the
// cluster's zone, and no plugin that reaches beyond this machine (forward, the cloud DNS
// plugins, etcd, ...) is even compiled in. The stock main imports every plugin (core/plugin),
// which makes a build several times as long. Order of Directives = order in CoreDNS' plugin.cfg.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes"}
}

func main() { coremain.Run() }
