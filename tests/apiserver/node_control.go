package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// The node's fault commands (issue #61): after READY, each line on stdin breaks one part of
// the node for a while, and the node answers it with one line on stdout, "OK <command>" once
// the fault is in place (or undone), "ERR <command>: <why>" if it is refused. Every fault is
// bounded: it is undone when its duration is over, when the test undoes it, and at teardown;
// a node killed without a teardown leaves what the next node's cleanUp removes (a SIGKILLed
// frozen process, the filter chain by its name).
//
//	restart COMPONENT                  stop it (SIGTERM; SIGKILL after 15 s) and start it again
//	stop COMPONENT DURATION            stop it; it starts again when DURATION is over
//	start COMPONENT                    start a stopped component now
//	freeze COMPONENT DURATION          SIGSTOP its process group; SIGCONT when DURATION is over
//	thaw COMPONENT                     SIGCONT now
//	block-apiserver DURATION SOURCE... drop TCP from these pod addresses or CIDRs to the apiserver
//	unblock-apiserver                  lift that now
//
// COMPONENT is containerd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kube-proxy or kubelet. A start answers OK once the component serves: containerd its
// socket, kube-apiserver /readyz, kubelet and kube-proxy their /healthz; the controller
// manager and the scheduler once started. A component exiting because a command stopped it
// does not fail the node; etcd (in this process) keeps its data while the apiserver is down.

// maxFault bounds every fault's duration, so a test that forgets one cannot break the node
// for longer than a test runs.
const maxFault = 10 * time.Minute

// faultChain is the filter chain of block-apiserver; its name starts with isolationChain's,
// so cleanUp removes it with the node's own chains.
const faultChain = isolationChain + "-FAULT"

// fault is one thing a test broke and the node has not undone yet.
type fault struct {
	key   string // "stop kubelet", "freeze containerd", "block-apiserver"
	timer *time.Timer
	// undo puts it right while the node runs on; release is what teardown does instead
	// (nil: nothing, the teardown stops the component anyway).
	undo    func(context.Context) error
	release func()
}

// faults are the active faults, by key, and their expiries, which the node's main loop takes
// (so every change to the node happens on that one goroutine).
type faults struct {
	active  map[string]*fault
	expired chan *fault
}

func newFaults() faults {
	return faults{active: map[string]*fault{}, expired: make(chan *fault, 16)}
}

// nodeInput is stopSignals for node mode: stdin's lines are commands, its EOF the stop.
func nodeInput() (stop <-chan string, commands <-chan string) {
	stopped := make(chan string, 2)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				lines <- line
			}
		}
		stopped <- "stdin closed"
	}()
	notifyStopSignals(stopped)
	return stopped, lines
}

// control runs one command line and returns its answer.
func (n *node) control(ctx context.Context, line string) string {
	n.log("command: %s", line)
	if err := n.run(ctx, strings.Fields(line)); err != nil {
		n.log("command %q: %v", line, err)
		return fmt.Sprintf("ERR %s: %v", line, err)
	}
	return "OK " + line
}

func (n *node) run(ctx context.Context, args []string) error {
	verb, rest := args[0], args[1:]
	want := func(count int, usage string) error {
		if len(rest) != count {
			return fmt.Errorf("usage: %s %s", verb, usage)
		}
		return nil
	}
	switch verb {
	case "restart":
		if err := want(1, "COMPONENT"); err != nil {
			return err
		}
		return n.restart(ctx, rest[0])
	case "stop", "freeze":
		if err := want(2, "COMPONENT DURATION"); err != nil {
			return err
		}
		d, err := faultDuration(rest[1])
		if err != nil {
			return err
		}
		if verb == "stop" {
			return n.stopFor(rest[0], d)
		}
		return n.freezeFor(rest[0], d)
	case "start", "thaw":
		if err := want(1, "COMPONENT"); err != nil {
			return err
		}
		return n.undoFault(ctx, verb, rest[0])
	case "block-apiserver":
		if len(rest) < 2 {
			return errors.New("usage: block-apiserver DURATION SOURCE...")
		}
		d, err := faultDuration(rest[0])
		if err != nil {
			return err
		}
		return n.blockAPIServer(d, rest[1:])
	case "unblock-apiserver":
		if err := want(0, ""); err != nil {
			return err
		}
		return n.undoFault(ctx, verb, "")
	}
	return fmt.Errorf("unknown command %q", verb)
}

func faultDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > maxFault {
		return 0, fmt.Errorf("duration %q: want one in (0, %s]", s, maxFault)
	}
	return d, nil
}

// slot is where the node keeps the running process of component name.
func (n *node) slot(name string) (**process, error) {
	if name == "containerd" && n.containerd != nil {
		return &n.containerd, nil
	}
	for i, p := range n.components {
		if p.name == name {
			return &n.components[i], nil
		}
	}
	return nil, fmt.Errorf("no component %q", name)
}

// running returns component name's process if it runs and no fault holds it.
func (n *node) running(name string) (**process, error) {
	slot, err := n.slot(name)
	if err != nil {
		return nil, err
	}
	for _, key := range []string{"stop " + name, "freeze " + name} {
		if n.faults.active[key] != nil {
			return nil, fmt.Errorf("%s is in force: undo it first", key)
		}
	}
	if !(*slot).running() {
		return nil, fmt.Errorf("%s is not running", name)
	}
	return slot, nil
}

func (n *node) restart(ctx context.Context, name string) error {
	slot, err := n.running(name)
	if err != nil {
		return err
	}
	stopRequested(*slot)
	return n.startAgain(ctx, slot)
}

// stopRequested stops p, telling its watcher that the exit is no failure.
func stopRequested(p *process) {
	p.requested.Store(true)
	p.stop(15 * time.Second)
}

// startAgain starts the process in slot again and waits until it serves.
func (n *node) startAgain(ctx context.Context, slot **process) error {
	p, err := (*slot).again()
	if err != nil {
		return err
	}
	*slot = p
	n.watch(p)
	switch p.name {
	case "containerd":
		return waitSocket(n.containerdSocket, time.Minute, p.done)
	case "kube-apiserver":
		return waitReady(ctx, n.adminCfg, p.done, &p.err, nil, 3*time.Minute)
	}
	if url, ok := n.healthz[p.name]; ok {
		return waitHealthz(url, time.Minute, p.done)
	}
	return nil
}

func (n *node) stopFor(name string, d time.Duration) error {
	slot, err := n.running(name)
	if err != nil {
		return err
	}
	stopRequested(*slot)
	n.add(&fault{key: "stop " + name, undo: func(ctx context.Context) error { return n.startAgain(ctx, slot) }}, d)
	return nil
}

func (n *node) freezeFor(name string, d time.Duration) error {
	slot, err := n.running(name)
	if err != nil {
		return err
	}
	p := *slot
	if err := p.signalGroup(syscall.SIGSTOP); err != nil {
		return err
	}
	thaw := func() { _ = p.signalGroup(syscall.SIGCONT) }
	n.add(&fault{key: "freeze " + name, undo: func(context.Context) error { thaw(); return nil }, release: thaw}, d)
	return nil
}

// blockAPIServer drops TCP to the apiserver from sources (addresses or CIDRs of pods): their
// packets arrive on the bridge, and after kube-proxy's DNAT of the kubernetes Service they
// go to the node address's apiserver port. Dropped, not refused: a partition, as a client
// sees a dead network (open connections hang, new ones time out).
func (n *node) blockAPIServer(d time.Duration, sources []string) error {
	if n.faults.active["block-apiserver"] != nil {
		return errors.New("block-apiserver is in force: unblock-apiserver first")
	}
	for _, s := range sources {
		if net.ParseIP(s) == nil {
			if _, _, err := net.ParseCIDR(s); err != nil {
				return fmt.Errorf("source %q: not an address or a CIDR", s)
			}
		}
	}
	steps := [][]string{{"-N", faultChain}}
	for _, s := range sources {
		steps = append(steps, []string{"-A", faultChain, "-i", bridgeName, "-s", s, "-d", nodeIP,
			"-p", "tcp", "--dport", fmt.Sprint(apiServerPort), "-j", "DROP"})
	}
	steps = append(steps, []string{"-I", "INPUT", "1", "-j", faultChain})
	for _, s := range steps {
		if _, err := runCmd(30*time.Second, "iptables", append([]string{"-w"}, s...)...); err != nil {
			unblockAPIServer(n.log)
			return err
		}
	}
	lift := func() { unblockAPIServer(n.log) }
	n.add(&fault{key: "block-apiserver", undo: func(context.Context) error { lift(); return nil }, release: lift}, d)
	return nil
}

// unblockAPIServer removes the chain of blockAPIServer and the jump to it, whatever of them
// exists.
func unblockAPIServer(log func(string, ...any)) {
	// Exit status 1 means "no such rule or chain", which is fine.
	_, _ = runCmd(30*time.Second, "iptables", "-w", "-D", "INPUT", "-j", faultChain)
	_, _ = runCmd(30*time.Second, "iptables", "-w", "-F", faultChain)
	_, _ = runCmd(30*time.Second, "iptables", "-w", "-X", faultChain)
	if out, err := runCmd(30*time.Second, "iptables", "-w", "-S"); err == nil && strings.Contains(out, faultChain) {
		log("iptables: %s is still there", faultChain)
	}
}

// add records f and undoes it after d on the main loop.
func (n *node) add(f *fault, d time.Duration) {
	n.faults.active[f.key] = f
	f.timer = time.AfterFunc(d, func() { n.faults.expired <- f })
	n.log("%s for %s", f.key, d)
}

// undoFault is start, thaw or unblock-apiserver: undoes the fault they name now.
func (n *node) undoFault(ctx context.Context, verb, name string) error {
	key := map[string]string{"start": "stop ", "thaw": "freeze ", "unblock-apiserver": "block-apiserver"}[verb] + name
	f := n.faults.active[key]
	if f == nil {
		return fmt.Errorf("no %s in force", key)
	}
	f.timer.Stop()
	delete(n.faults.active, key)
	return f.undo(ctx)
}

// expire undoes f when its time is up (unless a command undid it meanwhile). A failure to
// undo fails the node: what the test runs next would not be what it thinks.
func (n *node) expire(ctx context.Context, f *fault) {
	if n.faults.active[f.key] != f {
		return
	}
	delete(n.faults.active, f.key)
	n.log("%s: time is up", f.key)
	if err := f.undo(ctx); err != nil {
		select {
		case n.failed <- fmt.Errorf("undoing %s: %w", f.key, err):
		default:
		}
	}
}

// undoFaults is the teardown's: it thaws what is frozen and lifts the filter; a stopped
// component stays stopped (the teardown stops the others).
func (n *node) undoFaults() {
	for key, f := range n.faults.active {
		f.timer.Stop()
		if f.release != nil {
			f.release()
		}
		delete(n.faults.active, key)
	}
}
