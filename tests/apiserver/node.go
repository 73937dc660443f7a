package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// runNode is `apiserver node`: a whole single-node cluster on this machine (etcd and
// kube-apiserver in this process; containerd, kube-controller-manager, kube-scheduler,
// kubelet and kube-proxy as child processes; CoreDNS as a Deployment), with the same
// protocol as the apiserver mode: "READY <dir>" on stdout once the node is Ready and CoreDNS
// answers, teardown on stdin EOF or SIGINT/SIGTERM. After READY, each line on stdin is a
// command that breaks one part of the node for a while (node_control.go). It needs root.
func runNode(args []string) error {
	fl := flag.NewFlagSet("node", flag.ContinueOnError)
	dir := fl.String("dir", "", "directory for the kubeconfigs, ca.crt, node.json and logs/ (required; created if missing)")
	imagesDir := fl.String("images", envOr("STUNNER_TEST_IMAGES", "tests/images/out"), "directory of the OCI image archives (*.tar) to import (env STUNNER_TEST_IMAGES)")
	cniBinDir := fl.String("cni-bin-dir", "/usr/lib/cni", "the CNI plugins (Debian's containernetworking-plugins)")
	readyTimeout := fl.Duration("ready-timeout", 5*time.Minute, "give up if the node is not ready by then")
	lockWait := fl.Duration("lock-wait", 10*time.Minute, "how long to wait for another node on this machine to stop")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	if os.Geteuid() != 0 {
		return errors.New("node mode must run as root (it creates a bridge, iptables rules, mounts and cgroups)")
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip6tables", "conntrack", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: install the Debian packages containerd runc containernetworking-plugins iptables conntrack iproute2", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(*cniBinDir, "bridge")); err != nil {
		return fmt.Errorf("CNI plugins missing in %s (install containernetworking-plugins): %w", *cniBinDir, err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	outDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	images, err := filepath.Abs(*imagesDir)
	if err != nil {
		return err
	}
	logDir := filepath.Join(outDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}

	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "node: "+format+"\n", a...) }
	unlock, err := lockNode(*lockWait, logf)
	if err != nil {
		return err
	}
	defer unlock()
	work := filepath.Join(os.TempDir(), "stunner-test-node")
	cleanUp(work, self, logf) // what a killed run left behind
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	n := &node{work: work, outDir: outDir, logDir: logDir, self: self, log: logf, faults: newFaults()}
	defer n.tearDown()

	stop, commands := nodeInput()

	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan string, 1)
	go func() {
		// A stop request cancels the bring-up, or ends the wait after READY.
		why := <-stop
		n.log("%s", why)
		stopped <- why
		cancel()
	}()
	facts, err := n.bringUp(ctx, stopped, images, *cniBinDir, *readyTimeout)
	if err != nil {
		return err
	}
	data, _ := json.MarshalIndent(facts, "", "  ")
	if err := os.WriteFile(filepath.Join(outDir, "node.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	n.log("ready in %s", time.Since(t0).Round(time.Millisecond))
	fmt.Printf("READY %s\n", outDir)
	_ = os.Stdout.Sync()

	// Until the stop: the test's commands (node_control.go), one at a time, each answered
	// with one line on stdout; and the end of the faults whose time is up.
	for {
		select {
		case <-ctx.Done():
			n.log("shutting down")
			return nil
		case err := <-n.failed:
			return fmt.Errorf("after READY: %w", err)
		case line := <-commands:
			fmt.Println(n.control(ctx, line))
			_ = os.Stdout.Sync()
		case f := <-n.faults.expired:
			n.expire(ctx, f)
		}
	}
}

// nodeFacts is node.json: what a test needs to know about the node. The unsuffixed
// addresses and ranges are the primary family's (IPv4), the v6 ones the second family's.
type nodeFacts struct {
	NodeName      string            `json:"nodeName"`
	NodeIP        string            `json:"nodeIP"`
	PodCIDR       string            `json:"podCIDR"`
	ServiceCIDR   string            `json:"serviceCIDR"`
	NodeIPv6      string            `json:"nodeIPv6"`
	PodCIDRv6     string            `json:"podCIDRv6"`
	ServiceCIDRv6 string            `json:"serviceCIDRv6"`
	ClusterDNS    string            `json:"clusterDNS"`
	ClusterDomain string            `json:"clusterDomain"`
	APIServer     string            `json:"apiServer"`
	Images        []string          `json:"images"`
	Logs          map[string]string `json:"logs"`
}

// nodeFiles are the credentials and configs the components are started with.
type nodeFiles struct {
	caCert, saKey, servingCert, servingKey, kubeletCert, kubeletKey string
	kubeletClientCert, kubeletClientKey, tokenFile, resolvConf      string
	kubeconfigs                                                     map[string]string
}

type node struct {
	work, outDir, logDir, self string
	log                        func(string, ...any)
	adminCfg                   *rest.Config
	stopEtcd                   func()
	containerd                 *process
	containerdSocket           string
	healthz                    map[string]string // by component, where it says it is healthy
	components                 []*process        // in start order, kube-apiserver first
	failed                     chan error        // a child that exited
	faults                     faults            // what a test broke and has not been undone yet
}

func (n *node) bringUp(ctx context.Context, stopped <-chan string, images, cniBinDir string, readyTimeout time.Duration) (*nodeFacts, error) {
	n.failed = make(chan error, 8)
	if err := recordMissingDirs(n.work); err != nil {
		return nil, err
	}
	if err := setUpNetwork(n.work); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	host := "https://" + net.JoinHostPort(nodeIP, strconv.Itoa(apiServerPort))
	f, err := writeNodePKI(n.work, n.outDir, host)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}

	// containerd first: importing the images takes a while, and nothing else needs it.
	cp := newContainerdPaths(n.work)
	if err := writeContainerdConfig(n.work, cp, cniBinDir); err != nil {
		return nil, err
	}
	if n.containerd, err = startProcess(n.logDir, "containerd", "containerd", "--config", cp.config); err != nil {
		return nil, err
	}
	n.watch(n.containerd)
	n.containerdSocket = cp.socket
	if err := waitSocket(cp.socket, time.Minute, n.containerd.done); err != nil {
		return nil, fmt.Errorf("containerd: %w; its log: %s", err, n.containerd.logPath)
	}
	refs, err := importImages(cp, images)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	coreDNSImage := ""
	for _, r := range refs {
		if strings.HasPrefix(r, "registry.k8s.io/coredns/coredns:") {
			coreDNSImage = r
		}
	}
	if coreDNSImage == "" || !contains(refs, pauseImage) {
		return nil, fmt.Errorf("images: need %s and registry.k8s.io/coredns/coredns:* in %s (have %v): run tests/images/build.sh", pauseImage, images, refs)
	}

	etcd, etcdURL, err := startEtcd(n.work, "error", false)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	n.stopEtcd = func() { etcd.Close() }
	// A child process like the other components (the first in n.components, so it stops
	// after them), which a test can stop and start again with etcd's data kept.
	ln, err := listenRetry(net.JoinHostPort(nodeIP, strconv.Itoa(apiServerPort)), 30*time.Second)
	if err != nil {
		return nil, err // a previous node's apiserver still holds the port
	}
	ln.Close()
	api, err := startProcess(n.logDir, "kube-apiserver", n.self, append([]string{"component", "kube-apiserver"}, nodeAPIServerArgs(n.work, etcdURL, f)...)...)
	if err != nil {
		return nil, err
	}
	n.components = append(n.components, api)
	n.watch(api)
	if n.adminCfg, err = clientcmd.BuildConfigFromFlags("", f.kubeconfigs["admin"]); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, n.adminCfg, api.done, &api.err, stopped, readyTimeout); err != nil {
		return nil, err
	}
	adminCfg := n.adminCfg

	argv, healthz, err := componentArgs(n.work, f)
	if err != nil {
		return nil, err
	}
	n.healthz = healthz
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		p, err := startProcess(n.logDir, name, n.self, append([]string{"component", name}, argv[name]...)...)
		if err != nil {
			return nil, err
		}
		n.components = append(n.components, p)
		n.watch(p)
	}

	cs, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "node "+nodeName+" Ready", readyTimeout, n.failed, nodeReady(cs)); err != nil {
		return nil, err
	}
	if err := applyCoreDNS(ctx, cs, coreDNSImage); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "CoreDNS Available", readyTimeout, n.failed, coreDNSReady(cs)); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "CoreDNS answering at "+clusterDNSIP, time.Minute, n.failed, coreDNSAnswers); err != nil {
		return nil, err
	}
	logs := map[string]string{"containerd": n.containerd.logPath}
	for _, p := range n.components {
		logs[p.name] = p.logPath
	}
	return &nodeFacts{NodeName: nodeName, NodeIP: nodeIP, PodCIDR: podCIDR, ServiceCIDR: serviceCIDR,
		NodeIPv6: nodeIPv6, PodCIDRv6: podCIDRv6, ServiceCIDRv6: serviceCIDRv6,
		ClusterDNS: clusterDNSIP, ClusterDomain: clusterDomain, APIServer: host, Images: refs, Logs: logs}, nil
}

// watch reports p's exit on n.failed, unless a test asked for it.
func (n *node) watch(p *process) {
	go func() {
		<-p.done
		if p.requested.Load() {
			return
		}
		select {
		case n.failed <- p.exitedError():
		default:
		}
	}()
}

// tearDown undoes what a test broke (thaws what it froze, lifts its filters), then stops the
// node in the reverse order of its start: kubelet first (so it does not restart what goes
// next), then every pod through the CRI (so the CNI plugins release their veths and
// addresses), the other components, the apiserver, etcd, containerd; then cleanUp removes
// what is left.
func (n *node) tearDown() {
	t0 := time.Now()
	n.undoFaults()
	for i := len(n.components) - 1; i >= 0; i-- {
		p := n.components[i]
		p.stop(15 * time.Second)
		if p.name == "kubelet" && n.containerd != nil {
			removeAllPods(newContainerdPaths(n.work), n.log)
		}
	}
	if n.stopEtcd != nil {
		n.stopEtcd()
	}
	if n.containerd != nil {
		n.containerd.stop(15 * time.Second)
	}
	cleanUp(n.work, n.self, n.log)
	for _, name := range []string{"admin.kubeconfig", "operator.kubeconfig"} {
		_ = os.Remove(filepath.Join(n.outDir, name)) // their credentials are dead
	}
	n.log("torn down in %s", time.Since(t0).Round(time.Millisecond))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
