package main

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cleanUp leaves the machine as it was before a node ran with state dir work: it kills what
// still runs from it (components, containerd, its shims, the containers), unmounts everything
// under work (pod volumes, overlay snapshots, network namespaces, shm), removes kube-proxy's,
// kubelet's and the CNI plugins' iptables chains, the bridge and its veths, conntrack
// entries of the node's ranges, kubelet's cgroups and log links, puts the sysctls back and
// removes work. It runs both after a teardown and at start, for what a killed run left.
func cleanUp(work, self string, log func(string, ...any)) {
	if _, err := os.Stat(work); err != nil && !linkExists(bridgeName) {
		return // nothing of a node is here
	}
	killAll(func(pid int) bool { return cmdlineMentions(pid, work) }, log)
	killAll(inKubepodsCgroup, log)
	unmountUnder(work, log)
	// kube-proxy's own cleanup of its iptables (and ipvs, nftables) rules.
	if out, err := runCmd(time.Minute, self, "component", "kube-proxy", "--cleanup"); err != nil {
		log("kube-proxy --cleanup: %v\n%s", err, out)
	}
	tearDownNetwork(work, log)
	removeKubepodsCgroups(log)
	removeLinksInto(containerLogLinks, work, log)
	removeCreatedDirs(work, log)
	if err := os.RemoveAll(work); err != nil {
		log("removing %s: %v", work, err)
	}
}

// killAll SIGKILLs every process (but this one and its ancestors) that match selects, and
// waits, bounded, until they are gone.
func killAll(match func(pid int) bool, log func(string, ...any)) {
	spare := map[int]bool{}
	for pid := os.Getpid(); pid > 1; pid = parentPID(pid) {
		spare[pid] = true
	}
	var killed []int
	for _, pid := range pids() {
		if !spare[pid] && match(pid) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed = append(killed, pid)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range killed {
		for syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			if time.Now().After(deadline) {
				log("process %d did not exit after SIGKILL", pid)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func procStatField(pid int, field string) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func parentPID(pid int) int {
	ppid, _ := strconv.Atoi(procStatField(pid, "PPid"))
	return ppid
}

func isZombie(pid int) bool { return strings.HasPrefix(procStatField(pid, "State"), "Z") }

func cmdlineMentions(pid int, s string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(data), s)
}

// inKubepodsCgroup: the node's containers, which kubelet puts under /kubepods.
func inKubepodsCgroup(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && strings.Contains(string(data), ":/kubepods")
}

// unmountUnder detaches every mount point under dir, deepest first, until none is left.
func unmountUnder(dir string, log func(string, ...any)) {
	prefix := filepath.Clean(dir) + "/"
	for pass := 0; pass < 5; pass++ {
		var points []string
		f, err := os.Open("/proc/self/mountinfo")
		if err != nil {
			log("%v", err)
			return
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 {
				p := unescapeMountPath(fields[4])
				if strings.HasPrefix(p, prefix) || p == filepath.Clean(dir) {
					points = append(points, p)
				}
			}
		}
		f.Close()
		if len(points) == 0 {
			return
		}
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && pass == 4 {
				log("unmount %s: %v", p, err)
			}
		}
	}
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, and so on).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeKubepodsCgroups removes kubelet's cgroup tree (kubepods and below) from every
// hierarchy, leaves first.
func removeKubepodsCgroups(log func(string, ...any)) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if fi, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil && fi.IsDir() {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil {
				log("rmdir %s: %v", dirs[i], err)
			}
		}
	}
}

// removeLinksInto removes the symlinks in dir that point under target (kubelet's links to
// the pods' container logs).
func removeLinksInto(dir, target string, log func(string, ...any)) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, target+"/") {
			if err := os.Remove(p); err != nil {
				log("%v", err)
			}
		}
	}
}

// containerLogLinks is where kubelet links every container's log, whatever its podLogsDir.
const containerLogLinks = "/var/log/containers"

// createdDirsFile lists the directories outside the state dir that did not exist before the
// node (kubelet creates them), so cleanup removes them again when they are empty.
const createdDirsFile = "created-dirs"

// recordMissingDirs notes which of the directories kubelet creates outside work are missing.
func recordMissingDirs(work string) error {
	var missing []string
	for _, d := range []string{containerLogLinks} {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, d)
		}
	}
	return os.WriteFile(filepath.Join(work, createdDirsFile), []byte(strings.Join(missing, "\n")), 0o600)
}

func removeCreatedDirs(work string, log func(string, ...any)) {
	data, err := os.ReadFile(filepath.Join(work, createdDirsFile))
	if err != nil {
		return
	}
	for _, d := range strings.Fields(string(data)) {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log("removing %s: %v", d, err)
		}
	}
}
