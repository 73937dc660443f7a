// Command coredns is the cluster DNS of the single-node test cluster: upstream CoreDNS
// (the version pinned in ../../go.mod) with only the plugins a cluster DNS needs, so the
// image stays small and builds without cgo.
//
// Importing a plugin package registers it; the order plugins run in does not come from
// these imports but from dnsserver.Directives, upstream's generated list, so it stays
// upstream's. The set covers the Corefile kubeadm and the CoreDNS Helm chart install
// (errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload, loadbalance)
// plus log, hosts and bind (a node-local listen address).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
