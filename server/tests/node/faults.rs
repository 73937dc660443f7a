//! Breaking one part of a running [`Node`] at a time (issue #61): the commands of
//! tests/apiserver/node_control.go, one line each on the node's stdin, answered by one line.
//! Each fault is bounded by the duration given (the node undoes it then, or at teardown), so a
//! test that panics in the middle leaves nothing broken; and [`Node::assert_no_fault_left`]
//! checks that an undone fault left nothing behind.
//!
//! The calls block for as long as the node takes (a start waits until the component serves):
//! call them from a multi-threaded runtime through `tokio::task::block_in_place`.

use super::{Node, node_processes};
use std::io::Write;
use std::net::Ipv4Addr;
use std::time::Duration;

/// The longest a command may take: a restarted kube-apiserver is ready within 3 minutes (the
/// node's own bound), containerd within one.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(4 * 60);

/// A part of the node a test can stop, restart or freeze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Containerd,
    ApiServer,
    ControllerManager,
    Scheduler,
    Proxy,
    Kubelet,
}

impl Component {
    fn name(self) -> &'static str {
        match self {
            Component::Containerd => "containerd",
            Component::ApiServer => "kube-apiserver",
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
            Component::Proxy => "kube-proxy",
            Component::Kubelet => "kubelet",
        }
    }
}

/// Go's duration syntax, which the node parses.
fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

impl Node {
    /// Stops `c` and starts it again; returns once it serves.
    pub fn restart(&self, c: Component) {
        self.command(&format!("restart {}", c.name()));
    }

    /// Stops `c`; the node starts it again after `bound`, or at [`Node::start_again`].
    pub fn stop_for(&self, c: Component, bound: Duration) {
        self.command(&format!("stop {} {}", c.name(), go_duration(bound)));
    }

    /// Starts a component [`Node::stop_for`] stopped; returns once it serves.
    pub fn start_again(&self, c: Component) {
        self.command(&format!("start {}", c.name()));
    }

    /// Freezes `c`'s processes (SIGSTOP); thawed after `bound`, or at [`Node::thaw`].
    pub fn freeze_for(&self, c: Component, bound: Duration) {
        self.command(&format!("freeze {} {}", c.name(), go_duration(bound)));
    }

    pub fn thaw(&self, c: Component) {
        self.command(&format!("thaw {}", c.name()));
    }

    /// Drops the TCP of the pods at `sources` to the API server (through the kubernetes
    /// Service or not); lifted after `bound`, or at [`Node::unblock_apiserver`].
    pub fn block_apiserver(&self, sources: &[Ipv4Addr], bound: Duration) {
        let sources: Vec<String> = sources.iter().map(Ipv4Addr::to_string).collect();
        self.command(&format!("block-apiserver {} {}", go_duration(bound), sources.join(" ")));
    }

    pub fn unblock_apiserver(&self) {
        self.command("unblock-apiserver");
    }

    /// Sends one command and waits for its answer; panics (with the logs) unless it is OK.
    fn command(&self, line: &str) {
        let mut control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let stdin = control.stdin.as_mut().expect("the node runs");
        writeln!(stdin, "{line}").and_then(|()| stdin.flush()).unwrap_or_else(|e| panic!("node command {line}: {e}"));
        let answer = control.answers.recv_timeout(COMMAND_TIMEOUT);
        match answer {
            Ok(a) if a == format!("OK {line}") => eprintln!("node: {line}: OK"),
            other => panic!("node command {line}: {other:?}\n{}", self.log_tails()),
        }
    }

    /// Nothing a fault did is left once it is undone: no filter chain of `block-apiserver`,
    /// no process of the node stopped.
    pub fn assert_no_fault_left(&self) {
        let rules = std::process::Command::new("iptables").args(["-w", "-S"]).output().unwrap();
        let rules = String::from_utf8_lossy(&rules.stdout);
        assert!(!rules.contains("STUNNER-TEST-NODE-FAULT"), "a block-apiserver filter is left:\n{rules}");
        for (pid, cmdline) in node_processes() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) S ...": the state follows the last ')'.
            let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
            assert_ne!(state, Some('T'), "process {pid} of the node is left stopped: {cmdline}");
        }
    }
}
