//! A measured process's memory and CPU time from /proc (Linux), by pid: what the cluster
//! benchmarks read of an operator, ours or upstream's, the same way.

#![allow(dead_code)] // each benchmark uses its own subset

/// `VmHWM` (peak) or `VmRSS` (now) of process `pid`, in KiB.
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process runs");
    let line = status.lines().find(|l| l.starts_with(field)).expect("a field of /proc/PID/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// User and system CPU time of process `pid` so far, in seconds (10 ms ticks).
#[allow(unsafe_code)] // sysconf(3) has no safe wrapper in std
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process runs");
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks as f64 / hz as f64
}

/// The machine's load averages (`/proc/loadavg`'s first three fields), reported beside figures
/// taken on a shared machine.
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
