//! Upstream's Go operator as the cluster benchmarks run it (`change_latency`, `cluster_scale`):
//! built from the clone that `STUNNER_OPERATOR_GIT` names (a git dir of
//! github.com/l7mp/stunner-gateway-operator) and started as a process against the test's API
//! server with its default flags, its CDS on a port of the benchmark's choosing.

#![allow(dead_code)] // each benchmark uses its own subset

use crate::e2e::repo_root;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The git dir of upstream's clone, or `None` after a notice naming the figures `skipped`.
pub fn git_dir(bench: &str, skipped: &str) -> Option<String> {
    match std::env::var("STUNNER_OPERATOR_GIT") {
        Ok(git_dir) if !git_dir.is_empty() => Some(git_dir),
        _ => {
            eprintln!("{bench}: STUNNER_OPERATOR_GIT is not set: {skipped} skipped");
            None
        }
    }
}

/// Upstream's operator, built from `git_dir`'s HEAD into `scratch` (at low priority: the
/// benchmark itself runs at normal priority); returns the binary and a note on how it was built.
pub fn build(git_dir: &str, scratch: &Path) -> (PathBuf, String) {
    let src = scratch.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut archive = std::process::Command::new("git")
        .args(["--git-dir", git_dir, "archive", "HEAD"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("git");
    let untar = std::process::Command::new("tar")
        .args(["-x", "-C", src.to_str().unwrap()])
        .stdin(archive.stdout.take().unwrap())
        .status()
        .expect("tar");
    let archived = archive.wait().expect("git archive");
    assert!(archived.success() && untar.success(), "exporting {git_dir}");
    let bin = scratch.join("manager");
    // The first attempt's errors are shown only if the second fails too.
    let go_build = |errors: Stdio| {
        std::process::Command::new("nice")
            .args(["-n", "10", "go", "build", "-o", bin.to_str().unwrap(), "."])
            .current_dir(&src)
            .env("GOFLAGS", "-mod=mod")
            .env("GONOSUMDB", "github.com/l7mp/stunner")
            .stderr(errors)
            .status()
            .expect("go on PATH")
            .success()
    };
    if go_build(Stdio::null()) {
        return (bin, String::new());
    }
    // Its pinned STUNner (often an untagged commit) may not be in reach of the module proxy:
    // then the release our Go harnesses use.
    let interop = std::fs::read_to_string(repo_root().join("tests/interop/go.mod")).unwrap();
    let stunner = interop
        .lines()
        .find_map(|l| l.trim().strip_prefix("github.com/l7mp/stunner "))
        .expect("tests/interop/go.mod requires github.com/l7mp/stunner")
        .trim()
        .to_string();
    eprintln!("building the upstream operator against github.com/l7mp/stunner {stunner}");
    let replace = format!("github.com/l7mp/stunner=github.com/l7mp/stunner@{stunner}");
    let edited =
        std::process::Command::new("go").args(["mod", "edit", "-replace", &replace]).current_dir(&src).status();
    assert!(edited.is_ok_and(|s| s.success()) && go_build(Stdio::inherit()), "go build of the upstream operator");
    (bin, format!(", built against stunner {stunner}"))
}

/// `git describe` of the clone: which upstream was measured.
pub fn version(git_dir: &str) -> String {
    let out = std::process::Command::new("git").args(["--git-dir", git_dir, "describe", "--always", "--tags"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// The upstream operator `bin` with its defaults, its CDS at `cds`, metrics and probes off,
/// errors logged to `log`; killed when dropped.
pub fn start(bin: &Path, kubeconfig: &Path, cds: SocketAddr, log: &Path) -> tokio::process::Child {
    let log = std::fs::File::create(log).unwrap();
    tokio::process::Command::new(bin)
        .args(["--config-discovery-address", &cds.to_string(), "--metrics-bind-address", "0"])
        .args(["--health-probe-bind-address", "0", "--zap-log-level", "error"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start the upstream operator")
}
