//! The operator binary in standalone mode on a manifest directory, as the benchmarks that
//! measure it from outside start it (`change_latency`, `standalone_memory`).

#![allow(dead_code)] // each benchmark uses its own subset

use crate::e2e::{free_port, metric_sum, repo_root};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A fresh copy of the quickstart (class, Gateway, route) in a directory named for `name`.
pub fn quickstart_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["gatewayclass.yaml", "gateway.yaml", "route.yaml"] {
        std::fs::copy(repo_root().join("deploy/examples/quickstart").join(f), dir.join(f)).unwrap();
    }
    dir
}

/// The operator in standalone mode on `dir`, serving the CDS and metrics on free ports; killed
/// when dropped.
pub struct Standalone {
    child: tokio::process::Child,
    pub cds: SocketAddr,
    pub metrics: SocketAddr,
}

impl Standalone {
    pub async fn start(bin: &Path, dir: &Path) -> Standalone {
        let cds: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = tokio::process::Command::new(bin)
            .args(["--standalone", dir.to_str().unwrap(), "--health-probe-bind-address", "0"])
            .args(["--config-discovery-address", &cds.to_string(), "--metrics-bind-address", &metrics.to_string()])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the operator");
        Standalone { child, cds, metrics }
    }

    /// Renders so far (`stunner_gateway_operator_render_total`).
    pub async fn renders(&self) -> f64 {
        metric_sum(self.metrics, "stunner_gateway_operator_render_total", "").await
    }

    /// `VmHWM` (peak) or `VmRSS` (now) of the operator, in KiB.
    pub fn memory_kib(&self, field: &str) -> u64 {
        let pid = self.child.id().expect("the operator runs");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the operator runs");
        let line = status.lines().find(|l| l.starts_with(field)).expect("a field of /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
