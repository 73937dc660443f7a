//! A benchmark run's figures as JSON, beside the markdown the benchmarks print: one file per
//! run, in `BENCH_REPORT_DIR` (default `target/bench-report/` of the workspace), holding the
//! run's date and machine so that `scripts/bench-report` can render BENCHMARKS.md's table from
//! runs alone. The file is rewritten after every row: a run cut short keeps what it measured.
//!
//! Shared by the benchmarks of both crates (`#[path]`); only full runs (`--bench`) write.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Report {
    path: Option<PathBuf>,
    head: Value,
    rows: Vec<Value>,
}

impl Report {
    /// A report of the benchmark `bench`, run with `params` (what the rows depend on beyond
    /// their own fields: the implementation measured, pinning, counts); nothing is written
    /// unless this is a full run.
    pub fn new(bench: &str, params: Value) -> Report {
        let full = std::env::args().any(|a| a == "--bench");
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let label = params.get("implementation").and_then(Value::as_str).unwrap_or("run");
        let path = full.then(|| report_dir().join(format!("{bench}-{label}-{secs}-{}.json", std::process::id())));
        let head = json!({
            "bench": bench,
            "date": utc_date(secs),
            "unix_time": secs,
            "machine": machine(),
            "params": params,
        });
        Report { path, head, rows: Vec::new() }
    }

    /// Adds one row of figures and rewrites the file.
    pub fn row(&mut self, row: Value) {
        self.rows.push(row);
        let Some(path) = &self.path else { return };
        let mut doc = self.head.clone();
        doc["rows"] = Value::Array(self.rows.clone());
        let written = std::fs::create_dir_all(path.parent().expect("a file in a directory"))
            .and_then(|()| std::fs::write(path, serde_json::to_vec_pretty(&doc).expect("JSON")));
        if let Err(e) = written {
            eprintln!("bench report: cannot write {}: {e}", path.display());
        }
    }
}

fn report_dir() -> PathBuf {
    match std::env::var_os("BENCH_REPORT_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => dir.into(),
        None => {
            // The workspace root: the nearest ancestor of this package holding Cargo.lock.
            let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            let root = package.ancestors().find(|d| d.join("Cargo.lock").exists()).unwrap_or(&package);
            root.join("target/bench-report")
        }
    }
}

/// CPU model, cores and kernel release, from /proc (Linux; empty where unreadable). The cores
/// are the machine's, not this process's (a pinned benchmark sees one).
fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim()))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    json!({
        "cpu": model,
        "cores": cpuinfo.lines().filter(|l| l.starts_with("processor")).count(),
        "kernel": kernel.trim(),
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time.
fn utc_date(secs: u64) -> String {
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .map_or_else(|_| secs.to_string(), |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}
