package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The node's processes besides this one: containerd, and kube-controller-manager,
// kube-scheduler, kubelet and kube-proxy, each this binary run as `component NAME`.

// process is a child process with its output in logDir/<name>.log.
type process struct {
	name, logPath string
	// How it was started, so a restart runs the same command line.
	logDir, path string
	args         []string
	cmd          *exec.Cmd
	done         chan struct{} // closed when it has exited; then err is its exit error
	err          error
	// Set before a stop the test asked for: its exit does not fail the node.
	requested atomic.Bool
}

func startProcess(logDir, name, path string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group (a ^C to the test does not reach it before the node's teardown
	// does), and killed with this process if this one dies without a teardown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logDir: logDir, path: path, args: args, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, and SIGKILL when the process has not exited after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// again starts the same command line once more (its log is appended to).
func (p *process) again() (*process, error) {
	return startProcess(p.logDir, p.name, p.path, p.args...)
}

// running says whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signalGroup sends sig to the process's group (its children too: containerd's plugins, a
// component's helpers).
func (p *process) signalGroup(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// waitHealthz waits until url answers 200, the process exits, or timeout.
func waitHealthz(url string, timeout time.Duration, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not healthy after %s: %v", url, timeout, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before %s answered", url)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exitedError describes an exited process, for an error that fails the node.
func (p *process) exitedError() error {
	return fmt.Errorf("%s exited (%v); its log: %s", p.name, p.err, p.logPath)
}

// freeLocalPort returns a TCP port on 127.0.0.1 nothing listens on now, for a component's
// health or metrics endpoint (their fixed defaults may be taken on a shared machine).
func freeLocalPort() (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(ports[0]), nil
}

// componentArgs returns the command lines of the four components, and the healthz URLs of
// kubelet and kube-proxy (a restart waits for them). Each authenticates with its own static
// token as the user Kubernetes' bootstrap RBAC binds its role to.
func componentArgs(work string, f nodeFiles) (map[string][]string, map[string]string, error) {
	var ports []string
	for i := 0; i < 6; i++ {
		p, err := freeLocalPort()
		if err != nil {
			return nil, nil, err
		}
		ports = append(ports, p)
	}
	kubeletConfig := filepath.Join(work, "kubelet-config.yaml")
	if err := os.WriteFile(kubeletConfig, []byte(kubeletConfiguration(work, f, ports[2])), 0o644); err != nil {
		return nil, nil, err
	}
	proxyConfig := filepath.Join(work, "kube-proxy-config.yaml")
	if err := os.WriteFile(proxyConfig, []byte(kubeProxyConfiguration(f, ports[3], ports[4])), 0o644); err != nil {
		return nil, nil, err
	}
	healthz := map[string]string{
		"kubelet":    "http://127.0.0.1:" + ports[2] + "/healthz",
		"kube-proxy": "http://127.0.0.1:" + ports[3] + "/healthz",
	}
	return map[string][]string{
		"kube-controller-manager": {
			"--kubeconfig=" + f.kubeconfigs["kube-controller-manager"],
			"--authentication-kubeconfig=" + f.kubeconfigs["kube-controller-manager"],
			"--authorization-kubeconfig=" + f.kubeconfigs["kube-controller-manager"],
			"--bind-address=127.0.0.1", "--secure-port=" + ports[0],
			"--leader-elect=false",
			// Every controller that is on by default: among them deployment, replicaset,
			// endpoint, endpointslice, serviceaccount, serviceaccount-token,
			// root-ca-certificate-publisher, namespace and garbage-collector.
			"--controllers=*",
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + f.saKey,
			"--root-ca-file=" + f.caCert,
			// Both families' ranges, as on a dual-stack cluster. The node's pod ranges are the
			// CNI config's, not allocated (no --allocate-node-cidrs), so no mask sizes.
			"--cluster-cidr=" + joined(familyClusterCIDR),
			"--service-cluster-ip-range=" + joined(familyServiceCIDR),
			"--cluster-name=" + nodeName,
			"--concurrent-deployment-syncs=2", "--concurrent-replicaset-syncs=2",
		},
		"kube-scheduler": {
			"--kubeconfig=" + f.kubeconfigs["kube-scheduler"],
			"--authentication-kubeconfig=" + f.kubeconfigs["kube-scheduler"],
			"--authorization-kubeconfig=" + f.kubeconfigs["kube-scheduler"],
			"--bind-address=127.0.0.1", "--secure-port=" + ports[1],
			"--leader-elect=false",
		},
		"kubelet": {
			"--config=" + kubeletConfig,
			"--kubeconfig=" + f.kubeconfigs["kubelet"],
			"--hostname-override=" + nodeName,
			// An InternalIP of each family, IPv4 first: pods' status.podIPs list both, IPv4 first.
			"--node-ip=" + joined(familyNodeIP),
			"--root-dir=" + filepath.Join(work, "kubelet"),
			"--cert-dir=" + filepath.Join(work, "kubelet", "pki"),
		},
		"kube-proxy": {"--config=" + proxyConfig},
	}, healthz, nil
}

// kubeletConfiguration: cgroupfs (as containerd's runc is set up), swap allowed, the cluster
// DNS, the apiserver authenticated by its client cert and authorized by a SubjectAccessReview
// (so logs, exec, port-forward and the pod proxy work), no eviction or image garbage
// collection (a busy test machine's disk must not make pods or imported images go away),
// and every path under the node's state dir.
func kubeletConfiguration(work string, f nodeFiles, healthzPort string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[2]s
containerRuntimeEndpoint: %[3]s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [%[4]s]
clusterDomain: %[5]s
resolvConf: %[6]s
podCIDR: %[7]s
tlsCertFile: %[8]s
tlsPrivateKeyFile: %[9]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[10]s}
authorization:
  mode: Webhook
staticPodPath: ""
podLogsDir: %[11]s
volumePluginDir: %[12]s
localStorageCapacityIsolation: false
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# Its own OOM score stays as it is (lowering it needs CAP_SYS_RESOURCE; see containerd's
# restrict_oom_score_adj).
oomScoreAdj: 0
`, nodeIP, healthzPort, newContainerdPaths(work).endpoint(), clusterDNSIP, clusterDomain, f.resolvConf, podCIDR,
		f.kubeletCert, f.kubeletKey, f.caCert, filepath.Join(work, "pod-logs"), filepath.Join(work, "volume-plugins"))
}

// kubeProxyConfiguration: iptables mode, both families (iptables and ip6tables, IPv4 the
// primary); NodePorts on the node's addresses only (not on localhost, which would need
// route_localnet), and conntrack sysctls left as they are.
func kubeProxyConfiguration(f nodeFiles, healthzPort, metricsPort string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
mode: iptables
hostnameOverride: %[2]s
bindAddress: %[3]s
clusterCIDR: %[4]s
healthzBindAddress: 127.0.0.1:%[5]s
metricsBindAddress: 127.0.0.1:%[6]s
nodePortAddresses: [%[3]s/32, %[7]s/128]
detectLocalMode: ClusterCIDR
oomScoreAdj: 0
iptables:
  masqueradeAll: false
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, f.kubeconfigs["kube-proxy"], nodeName, nodeIP, joined(familyClusterCIDR), healthzPort, metricsPort, nodeIPv6)
}

// tokenUsers are the static-token identities of the node: each component as the user the
// bootstrap RBAC policy (or the Node authorizer, for kubelet) grants its permissions to.
var tokenUsers = []struct{ name, user, groups string }{
	{"admin", adminUser, "system:masters"},
	{"operator", operatorUser, operatorGroup},
	{"kube-controller-manager", "system:kube-controller-manager", ""},
	{"kube-scheduler", "system:kube-scheduler", ""},
	{"kubelet", "system:node:" + nodeName, "system:nodes"},
	{"kube-proxy", "system:kube-proxy", ""},
}

// writeTokens writes the apiserver's token file and one kubeconfig per identity into dir
// (admin's and operator's into outDir as well), and returns the kubeconfig paths by name.
func writeTokens(tokenFile, dir, outDir, host string, caPEM []byte) (map[string]string, error) {
	var lines strings.Builder
	paths := map[string]string{}
	for _, u := range tokenUsers {
		token := randToken()
		fmt.Fprintf(&lines, "%s,%s,uid-%s", token, u.user, u.name)
		if u.groups != "" {
			fmt.Fprintf(&lines, ",%q", u.groups)
		}
		lines.WriteString("\n")
		path := filepath.Join(dir, u.name+".kubeconfig")
		if u.name == "admin" || u.name == "operator" {
			path = filepath.Join(outDir, u.name+".kubeconfig")
		}
		if err := writeKubeconfig(path, host, caPEM, u.user, token); err != nil {
			return nil, err
		}
		paths[u.name] = path
	}
	return paths, os.WriteFile(tokenFile, []byte(lines.String()), 0o600)
}

// nodeServingIPs are the addresses the apiserver's certificate covers.
var nodeServingIPs = []net.IP{net.ParseIP(nodeIP), net.ParseIP(kubernetesServiceIP), net.ParseIP("127.0.0.1")}
