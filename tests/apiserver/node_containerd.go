package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// The node's container runtime: Debian's containerd and runc, with all of containerd's state
// (root, state, sockets, runc's state, network namespaces, CNI config and IPAM) under
// work/containerd, so nothing outside the node's state dir is written except the shims'
// sockets in /run/containerd/s (named by a hash of our socket's path; the shims remove them).

// pauseImage is the sandbox image, imported from the images directory like the others.
const pauseImage = "registry.k8s.io/pause:3.10"

type containerdPaths struct {
	dir, config, socket, cniConfDir string
}

func newContainerdPaths(work string) containerdPaths {
	dir := filepath.Join(work, "containerd")
	return containerdPaths{
		dir:        dir,
		config:     filepath.Join(dir, "config.toml"),
		socket:     filepath.Join(dir, "containerd.sock"),
		cniConfDir: filepath.Join(dir, "cni"),
	}
}

func (p containerdPaths) endpoint() string { return "unix://" + p.socket }

// writeContainerdConfig writes containerd's config and the CNI network config.
func writeContainerdConfig(work string, p containerdPaths, cniBinDir string) error {
	if err := os.MkdirAll(p.cniConfDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.cniConfDir, "10-stunner-test.conflist"), []byte(cniConfig(work)), 0o644); err != nil {
		return err
	}
	cri := `plugins."io.containerd.grpc.v1.cri"`
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Snapshotters this node does not use would probe (and complain about) the host's filesystems.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[%[6]s]
  sandbox_image = %[7]q
  # The pods' network namespaces go under state, not /var/run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  # Lowering an OOM score needs CAP_SYS_RESOURCE, which a sandboxed root (a CI container, a
  # microVM's agent) may lack: runc then fails with "can't get final child's PID from pipe"
  # for every pause container (kubelet asks for -998). Never below containerd's own score.
  restrict_oom_score_adj = true
  [%[6]s.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [%[6]s.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [%[6]s.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q
  [%[6]s.cni]
    bin_dir = %[9]q
    conf_dir = %[10]q
    max_conf_num = 1
`, filepath.Join(p.dir, "root"), filepath.Join(p.dir, "state"), p.socket, p.socket+".ttrpc",
		filepath.Join(p.dir, "opt"), cri, pauseImage, filepath.Join(p.dir, "runc"), cniBinDir, p.cniConfDir)
	return os.WriteFile(p.config, []byte(config), 0o644)
}

// waitSocket waits until something accepts connections on the unix socket path.
func waitSocket(path string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing listening after %s: %v", path, timeout, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before listening on %s", path)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// importImages imports every OCI archive (*.tar) in dir into containerd's k8s.io namespace,
// where the CRI plugin (and so kubelet) finds them; nothing is ever pulled. It returns the
// image references containerd then holds.
func importImages(p containerdPaths, dir string) ([]string, error) {
	archives, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, fmt.Errorf("no image archives (*.tar) in %s: run tests/images/build.sh", dir)
	}
	sort.Strings(archives)
	for _, a := range archives {
		if _, err := runCmd(5*time.Minute, "ctr", "--address", p.socket, "-n", "k8s.io", "images", "import", a); err != nil {
			return nil, err
		}
	}
	out, err := runCmd(time.Minute, "ctr", "--address", p.socket, "-n", "k8s.io", "images", "list", "-q")
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, r := range strings.Fields(out) {
		if !strings.HasPrefix(r, "sha256:") {
			refs = append(refs, r)
		}
	}
	return refs, nil
}

// removeAllPods stops and removes every pod sandbox through the CRI, the way kubelet would,
// so that containerd runs the CNI DEL of each (veth, IP address, portmap rules) and removes
// its network namespace and mounts.
func removeAllPods(p containerdPaths, log func(string, ...any)) {
	logger := klog.Background()
	rs, err := criclient.NewRemoteRuntimeService(p.endpoint(), 10*time.Second, noop.NewTracerProvider(), &logger)
	if err != nil {
		log("CRI client: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := rs.ListPodSandbox(ctx, &criapi.PodSandboxFilter{})
	if err != nil {
		log("CRI ListPodSandbox: %v", err)
		return
	}
	for _, pod := range pods {
		if err := rs.StopPodSandbox(ctx, pod.Id); err != nil {
			log("CRI StopPodSandbox %s/%s: %v", pod.Metadata.Namespace, pod.Metadata.Name, err)
		}
		if err := rs.RemovePodSandbox(ctx, pod.Id); err != nil {
			log("CRI RemovePodSandbox %s/%s: %v", pod.Metadata.Namespace, pod.Metadata.Name, err)
		}
	}
}
