//! Ports that a test hands to a server which binds them a moment later: stunnerd's listeners,
//! the operator's CDS, health and metrics addresses.
//!
//! A port the kernel picked for a bind to port 0 comes from its ephemeral range, and the kernel
//! may hand that same port to any other socket bound to port 0 before the server binds it (a TURN
//! relay, a client socket): the server then fails with "address already in use", and the test
//! with it. These ports come from below the ephemeral range instead, where the kernel never
//! picks on its own. The suites include this file with `#[path]`, so the policy is written once.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port handed out: above the fixed ports the suites meet (stunnerd's health check
/// on 8086, the operator's 13478, 8080 and 8081).
const FIRST: u16 = 20_000;

/// One past the highest port handed out: the start of the ephemeral range, or of Kubernetes'
/// NodePort range (30000) if lower, as the real-node suites open NodePorts on the host.
fn end() -> u16 {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    // A machine whose ephemeral range starts lower still gets ports; only the race is back.
    ephemeral.clamp(FIRST + 1_000, 30_000)
}

/// `n` distinct ports that are free for both TCP and UDP on all interfaces. One test process
/// walks the range once before it repeats a port, and where the walk starts depends on the
/// process id, so two test processes on one machine start far apart; each candidate is checked
/// by binding it.
pub fn free_ports(n: usize) -> Vec<u16> {
    static TRIED: AtomicU32 = AtomicU32::new(0);
    let end = end();
    let span = u32::from(end - FIRST);
    let start = std::process::id().wrapping_mul(7_919);
    let mut ports = Vec::with_capacity(n);
    for _ in 0..span {
        if ports.len() == n {
            break;
        }
        let port = FIRST + (start.wrapping_add(TRIED.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        let free = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
            && UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok();
        if free {
            ports.push(port);
        }
    }
    assert_eq!(ports.len(), n, "free ports between {FIRST} and {end}");
    ports
}
