package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The node's network. Every IPv4 address is in 198.18.0.0/15 (RFC 2544's benchmarking range,
// never routed on the Internet), every IPv6 address in the unique local prefix
// fd5e:3a7c:1b00::/48 (RFC 4193; its global ID picked at random once, so it does not meet a
// machine's own fd00::/64), on a bridge of its own with no route or NAT to any uplink. The
// cluster is dual-stack with IPv4 its primary family: a Service asks for IPv6 explicitly
// (ipFamilies, ipFamilyPolicy), and every other Service and pod address is what it was on an
// IPv4-only node. Only one node runs on a machine at a time (node.lock), so these names are
// fixed, and a cleanup after a killed run finds what that run made by name.
const (
	nodeName    = "stunner-test-node"
	bridgeName  = "stnr-test0"
	nodeIP      = "198.18.0.1" // the bridge's address: the pods' gateway, kubelet's and the apiserver's address
	podCIDR     = "198.18.0.0/24"
	serviceCIDR = "198.19.0.0/16"
	// The node's IPv6 address (on the bridge: the pods' IPv6 gateway), pod and Service ranges.
	nodeIPv6      = "fd5e:3a7c:1b00::1"
	podCIDRv6     = "fd5e:3a7c:1b00::/64"
	serviceCIDRv6 = "fd5e:3a7c:1b00:100::/112"
	// The first address of serviceCIDR, which the apiserver gives the kubernetes Service.
	kubernetesServiceIP = "198.19.0.1"
	clusterDNSIP        = "198.19.0.10"
	clusterDomain       = "cluster.local"
	apiServerPort       = 6443
	// Our filter chain: nothing from the pod range leaves through any interface but the bridge.
	isolationChain = "STUNNER-TEST-NODE"
)

// ipFamily is one address family of the node: its addresses and ranges, and the tools that
// set up and clean up its packet filter and connection tracking.
type ipFamily struct {
	nodeIP string
	// The prefix length of the node address on the bridge (the pod subnet's).
	nodePrefixLen string
	podCIDR       string
	// What kube-proxy and the controller manager take as the cluster's pod range, a superset
	// of podCIDR: what the isolation chain keeps on the bridge.
	clusterCIDR string
	serviceCIDR string
	iptables    string // iptables or ip6tables
	conntrack   string // conntrack's -f: ipv4 or ipv6
	// Extra flags of `ip addr add` for the node address: IPv6 skips duplicate address
	// detection (the bridge is ours; a tentative address could not be bound for seconds).
	addrFlags []string
}

// nodeFamilies are the node's families, the primary (IPv4) first: every flag and config that
// takes both lists them in this order.
var nodeFamilies = []ipFamily{
	{nodeIP: nodeIP, nodePrefixLen: "24", podCIDR: podCIDR, clusterCIDR: "198.18.0.0/16", serviceCIDR: serviceCIDR,
		iptables: "iptables", conntrack: "ipv4"},
	{nodeIP: nodeIPv6, nodePrefixLen: "64", podCIDR: podCIDRv6, clusterCIDR: "fd5e:3a7c:1b00::/56", serviceCIDR: serviceCIDRv6,
		iptables: "ip6tables", conntrack: "ipv6", addrFlags: []string{"nodad"}},
}

// joined is the field of every family, primary first, comma-separated, as Kubernetes' dual-stack
// flags take them (--service-cluster-ip-range, --cluster-cidr, --node-ip).
func joined(field func(ipFamily) string) string {
	var parts []string
	for _, f := range nodeFamilies {
		parts = append(parts, field(f))
	}
	return strings.Join(parts, ",")
}

func familyNodeIP(f ipFamily) string      { return f.nodeIP }
func familyClusterCIDR(f ipFamily) string { return f.clusterCIDR }
func familyServiceCIDR(f ipFamily) string { return f.serviceCIDR }

// sysctlsSet are the kernel settings the node needs; their values before the node are saved
// in the state directory and put back by cleanup. Forwarding: a pod reaches a Service's other
// pod through the bridge's gateway (the CNI bridge plugin, a gateway of both families, would
// turn both on anyway); bridge-nf-call-ip(6)tables: kube-proxy's rules see bridged
// pod-to-pod traffic. The IPv6 forwarding switch also stops router advertisements from
// configuring an interface whose accept_ra is 1 while the node runs.
var sysctlsSet = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/ipv6/conf/all/forwarding":        "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

const sysctlsSavedFile = "sysctl.saved"

// runCmd runs a command with a bounded time and returns its combined output.
func runCmd(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// setUpNetwork creates the bridge with the node's address of each family, routes the Service
// ranges to it (so the host reaches ClusterIPs without touching the uplink), sets the sysctls
// and inserts the isolation chain into iptables and ip6tables.
func setUpNetwork(work string) error {
	var saved strings.Builder
	for key := range sysctlsSet {
		old, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			return fmt.Errorf("sysctl %s: %w (is br_netfilter loaded, is IPv6 on?)", key, err)
		}
		fmt.Fprintf(&saved, "%s %s\n", key, strings.TrimSpace(string(old)))
	}
	if err := os.WriteFile(filepath.Join(work, sysctlsSavedFile), []byte(saved.String()), 0o600); err != nil {
		return err
	}
	for key, want := range sysctlsSet {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(want), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", key, want, err)
		}
	}
	steps := [][]string{{"ip", "link", "add", bridgeName, "type", "bridge"}}
	for _, f := range nodeFamilies {
		addr := append([]string{"ip", "addr", "add", f.nodeIP + "/" + f.nodePrefixLen, "dev", bridgeName}, f.addrFlags...)
		steps = append(steps, addr)
	}
	steps = append(steps, []string{"ip", "link", "set", bridgeName, "up"})
	for _, f := range nodeFamilies {
		steps = append(steps,
			[]string{"ip", "route", "add", f.serviceCIDR, "dev", bridgeName, "src", f.nodeIP},
			[]string{f.iptables, "-w", "-N", isolationChain},
			[]string{f.iptables, "-w", "-A", isolationChain, "-s", f.clusterCIDR, "!", "-o", bridgeName, "-j", "DROP"},
			[]string{f.iptables, "-w", "-A", isolationChain, "-d", f.clusterCIDR, "!", "-i", bridgeName, "-j", "DROP"},
			[]string{f.iptables, "-w", "-I", "FORWARD", "1", "-j", isolationChain},
		)
	}
	for _, s := range steps {
		if _, err := runCmd(30*time.Second, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// tearDownNetwork undoes setUpNetwork and what kube-proxy, kubelet and the CNI plugins left:
// veths on the bridge, the bridge, the route, KUBE-* and CNI-* chains, conntrack entries of the
// node's ranges, and the sysctls. It is safe to run when some or none of it exists.
func tearDownNetwork(work string, log func(string, ...any)) {
	if out, err := runCmd(30*time.Second, "ip", "-o", "link", "show", "master", bridgeName); err == nil {
		for _, line := range strings.Split(out, "\n") {
			// "12: veth1234@if2: <...> ..."
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			link, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if _, err := runCmd(10*time.Second, "ip", "link", "del", link); err != nil {
				log("%v", err)
			}
		}
	}
	if linkExists(bridgeName) {
		if _, err := runCmd(10*time.Second, "ip", "link", "del", bridgeName); err != nil {
			log("%v", err)
		}
	}
	// The routes went with the bridge. Our chain, then every chain kube-proxy, kubelet and
	// portmap make (they are all named KUBE-* or CNI-*; nothing else on a test machine is), in
	// both families' tables.
	for _, f := range nodeFamilies {
		removeChains(f.iptables, []string{isolationChain, "KUBE-", "CNI-"}, log)
		for _, cidr := range []string{f.clusterCIDR, f.serviceCIDR} {
			for _, dir := range []string{"-s", "-d"} {
				// Exit status 1 means "no entries", which is fine.
				_, _ = runCmd(10*time.Second, "conntrack", "-D", "-f", f.conntrack, dir, cidr)
			}
		}
	}
	restoreSysctls(work, log)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// removeChains deletes, in the filter, nat and mangle tables of iptables (the iptables or
// ip6tables command), every rule that jumps to a chain whose name starts with one of prefixes,
// then those chains.
func removeChains(iptables string, prefixes []string, log func(string, ...any)) {
	ours := func(chain string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(chain, p) {
				return true
			}
		}
		return false
	}
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, err := runCmd(30*time.Second, iptables, "-w", "-t", table, "-S")
		if err != nil {
			log("%v", err)
			continue
		}
		var chains []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "-N" && ours(f[1]):
				chains = append(chains, f[1])
			case len(f) >= 2 && f[0] == "-A" && !ours(f[1]) && jumpsTo(f, ours):
				// A rule in a chain that stays (a built-in one) jumping to one of ours.
				args := append([]string{"-w", "-t", table, "-D"}, f[1:]...)
				if _, err := runCmd(10*time.Second, iptables, args...); err != nil {
					log("%v", err)
				}
			}
		}
		for _, c := range chains {
			_, _ = runCmd(10*time.Second, iptables, "-w", "-t", table, "-F", c)
		}
		for _, c := range chains {
			if _, err := runCmd(10*time.Second, iptables, "-w", "-t", table, "-X", c); err != nil {
				log("%v", err)
			}
		}
	}
}

func jumpsTo(rule []string, ours func(string) bool) bool {
	for i := 0; i+1 < len(rule); i++ {
		if (rule[i] == "-j" || rule[i] == "-g") && ours(rule[i+1]) {
			return true
		}
	}
	return false
}

func restoreSysctls(work string, log func(string, ...any)) {
	data, err := os.ReadFile(filepath.Join(work, sysctlsSavedFile))
	if err != nil {
		return // the node never changed them
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		key, val, ok := strings.Cut(line, " ")
		if !ok || sysctlsSet[key] == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644); err != nil {
			log("restoring sysctl %s=%s: %v", key, val, err)
		}
	}
}

// cniConfig is the pod network: the bridge plugin on our bridge (the node's addresses as the
// pods' gateways, no masquerade), host-local addresses of both families kept in the state dir
// (every pod gets an IPv4 and an IPv6 address), and portmap for hostPorts. containerd's CRI
// plugin adds the loopback plugin itself.
func cniConfig(work string) string {
	type ipamRange struct {
		Subnet  string `json:"subnet"`
		Gateway string `json:"gateway"`
	}
	var ranges [][]ipamRange
	for _, f := range nodeFamilies {
		ranges = append(ranges, []ipamRange{{Subnet: f.podCIDR, Gateway: f.nodeIP}})
	}
	rangesJSON, _ := json.Marshal(ranges) // plain strings: cannot fail
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "stunner-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": %s,
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeName, rangesJSON, filepath.Join(work, "cni-ipam"))
}
