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

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time (the civil calendar from days since 1970-01-01).
fn utc_date(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}
