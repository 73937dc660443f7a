//! One policy for the test suites that need what cargo does not build (the Go tools of
//! `tests/*/build.sh`, which scripts/test builds): when it is missing, the test is skipped with
//! a loud notice, or fails when the `CI` environment variable is set (CI builds them all, so a
//! skip there would hide a broken build). The suites include this file with `#[path]`, so the
//! policy is written once.

#![allow(dead_code)] // each suite uses its own subset

use std::io::Write;
use std::path::PathBuf;

/// `path` (a program or a directory of build output) if it exists; else `None` after a notice:
/// the test returns at once (skipped). With `CI` set it panics instead. `how` says how to build
/// what is missing.
pub fn built(path: PathBuf, how: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    unavailable(&format!("{} is missing: {how}", path.display()), "CI");
    None
}

/// Reports that a test cannot run, for `why`: panics when the environment variable `strict` is
/// set (to anything but the empty string), else prints a notice that stands out of a long log
/// and returns, and the caller skips the test.
pub fn unavailable(why: &str, strict: &str) {
    if std::env::var_os(strict).is_some_and(|v| !v.is_empty()) {
        panic!("{why} ({strict} is set: this fails the test instead of skipping it)");
    }
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    let bar = "*".repeat(78);
    let notice = format!("\n{bar}\n* SKIPPED {test}\n*   {why}\n*   (set {strict}=1 to make this a failure)\n{bar}\n");
    // Straight to the process's stderr: the test harness captures `eprintln!` of tests that
    // pass, which would hide the notice.
    let _ = std::io::stderr().lock().write_all(notice.as_bytes());
}
