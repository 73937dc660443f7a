//! The release packaging under test (issue #57): an OCI registry on loopback (tests/registry,
//! built by its build.sh) that a test starts, the real `helm` command (tests/deploytool/bin/helm,
//! from helm's Go module) with its config, cache and registry credentials in a directory of the
//! test's own, and `scripts/release-artifacts chart`, which packages the chart and pushes it
//! there. Shared by tests/deploy.rs and server/tests/e2e_install.rs (`#[path]`).

#![allow(dead_code)] // each test crate uses its own subset

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long the registry may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running registry; dropping it stops it (its stdin closes, and it is killed besides).
pub struct Registry {
    child: Child,
    pub addr: SocketAddr,
}

impl Registry {
    /// Starts `bin` on a free loopback port and waits for its `LISTEN` line.
    pub fn start(bin: &Path) -> Registry {
        let mut child = Command::new(bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let line = BufReader::new(stdout).lines().next();
            let _ = tx.send(line);
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(Ok(line))) => line.strip_prefix("LISTEN ").and_then(|a| a.parse().ok()),
            _ => None,
        };
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the registry did not listen within {START_TIMEOUT:?}");
        };
        Registry { child, addr }
    }

    /// The OCI repository the tests push the chart under.
    pub fn charts(&self) -> String {
        format!("oci://{}/charts", self.addr)
    }

    /// The chart's reference in it (`helm install/pull/template <ref> --version <v>`).
    pub fn chart_ref(&self) -> String {
        format!("{}/stunner-gateway-operator", self.charts())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment that keeps `helm`'s config, cache, data and registry credentials under
/// `home`, never the user's.
fn helm_env(home: &Path) -> [(&'static str, PathBuf); 4] {
    [
        ("HELM_CONFIG_HOME", home.join("config")),
        ("HELM_CACHE_HOME", home.join("cache")),
        ("HELM_DATA_HOME", home.join("data")),
        ("HELM_REGISTRY_CONFIG", home.join("config/registry.json")),
    ]
}

/// `helm` with its files under `home`.
pub fn helm_command(helm: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(helm);
    cmd.envs(helm_env(home));
    cmd
}

/// Runs a command; panics with its output unless it succeeds; returns its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `scripts/release-artifacts chart <out> --push <registry> --plain-http` with `helm` under
/// `home`: the packaged chart's path.
pub fn push_chart(repo: &Path, helm: &Path, home: &Path, out: &Path, registry: &Registry) -> PathBuf {
    let mut cmd = Command::new(repo.join("scripts/release-artifacts"));
    cmd.args(["chart", out.to_str().unwrap(), "--push", &registry.charts(), "--plain-http"])
        .env("HELM", helm)
        .envs(helm_env(home));
    PathBuf::from(run(&mut cmd).trim())
}

/// The chart's version (Chart.yaml), which the pushed chart is tagged with.
pub fn chart_version(repo: &Path) -> String {
    let chart = std::fs::read_to_string(repo.join("deploy/helm/stunner-gateway-operator/Chart.yaml")).unwrap();
    chart
        .lines()
        .find_map(|l| l.strip_prefix("version:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("version in Chart.yaml")
}
