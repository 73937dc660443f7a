//! Standalone mode's memory against the size of its manifests (issue #43): the operator's peak
//! resident memory (VmHWM) while it loads, renders and serves N Gateways, above that of the
//! quickstart alone, per byte of YAML read; then the Gateways' files deleted and copied back
//! three times, with the resident memory (VmRSS) after each deletion against a fresh start on
//! the objects left (the quickstart). The budget (`--standalone-max-bytes`, 8 MiB by default)
//! is what bounds the peak in production; this measures what each byte under it costs.
//!
//! `cargo bench -p stunner-gateway-operator --bench standalone_memory` (5,000 Gateways in 20
//! files, `STANDALONE_MEMORY_GATEWAYS` to change); under `cargo test` it runs 200.
//! `STANDALONE_MEMORY_OPERATOR` names another build of our operator to measure instead (e.g. an
//! earlier commit's). A full run writes its rows as JSON (see `benches/support/report.rs`).

#[path = "../tests/e2e/mod.rs"]
mod e2e;
#[path = "../../benches/support/report.rs"]
mod report;
#[path = "support/standalone.rs"]
mod standalone;

use e2e::http_get;
use report::Report;
use serde_json::json;
use standalone::{Standalone, quickstart_dir};
use std::path::PathBuf;
use std::time::Duration;

const FILES: usize = 20;
/// How long the operator's render count must stay unchanged for a load to count as settled.
const QUIET: Duration = Duration::from_millis(1000);

/// A Gateway of one UDP listener and an address of its own, in the quickstart's class.
fn gateway(i: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw-{i}\n  namespace: stunner\n\
         spec:\n  gatewayClassName: stunner-gatewayclass\n  addresses:\n  - type: IPAddress\n    value: 10.1.{}.{}\n\
         \x20 listeners:\n  - name: udp-listener\n    port: 3478\n    protocol: UDP\n",
        i / 250,
        i % 250 + 1
    )
}

/// The Gateways' files: (name, text).
fn gateway_files(gateways: usize) -> Vec<(String, String)> {
    let per_file = gateways.div_ceil(FILES);
    (0..FILES)
        .map(|f| (f * per_file..((f + 1) * per_file).min(gateways)).map(gateway).collect::<Vec<_>>().join("---\n"))
        .enumerate()
        .filter(|(_, text)| !text.is_empty())
        .map(|(f, text)| (format!("gw-{f}.yaml"), text))
        .collect()
}

/// Waits until the CDS serves (`true`) or no longer serves (`false`) Gateway `name`'s config,
/// then until no render happened for [`QUIET`].
async fn settle(op: &Standalone, name: &str, served: bool) {
    let path = format!("/api/v1/configs/stunner/{name}");
    for round in 0.. {
        assert!(round < 1200, "{name} never {}", if served { "served" } else { "withdrawn" });
        if let Some((status, _)) = http_get(op.cds, &path).await
            && (status == 200) == served
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut renders = op.renders().await;
    for _ in 0..120 {
        tokio::time::sleep(QUIET).await;
        let now = op.renders().await;
        if now == renders {
            return;
        }
        renders = now;
    }
    panic!("the operator kept rendering");
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let gateways: usize =
        std::env::var("STANDALONE_MEMORY_GATEWAYS").ok().and_then(|n| n.parse().ok()).unwrap_or(5000).max(FILES);
    let gateways = if full { gateways } else { 200 };
    let (bin, label) = match std::env::var_os("STANDALONE_MEMORY_OPERATOR").filter(|v| !v.is_empty()) {
        Some(bin) => (PathBuf::from(bin), "ours (STANDALONE_MEMORY_OPERATOR)"),
        None => (PathBuf::from(env!("CARGO_BIN_EXE_stunner-gateway-operator")), "ours"),
    };
    let mut report = Report::new("standalone_memory", json!({ "implementation": "ours", "operator": label }));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = quickstart_dir("standalone-memory");
        let files = gateway_files(gateways);
        let yaml_bytes: usize = files.iter().map(|(_, text)| text.len()).sum();
        let last = format!("gw-{}", gateways - 1);

        // The quickstart alone: the baseline both figures are taken against.
        let fresh = Standalone::start(&bin, &dir).await;
        settle(&fresh, "udp-gateway", true).await;
        let (fresh_peak, fresh_rss) = (fresh.memory_kib("VmHWM:"), fresh.memory_kib("VmRSS:"));
        drop(fresh);

        // The Gateways in the directory from the start: one load, as after a restart.
        for (name, text) in &files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let op = Standalone::start(&bin, &dir).await;
        settle(&op, &last, true).await;
        let peak = op.memory_kib("VmHWM:");
        let loaded = op.memory_kib("VmRSS:");
        let per_byte = (peak.saturating_sub(fresh_peak) * 1024) as f64 / yaml_bytes as f64;
        println!("| Gateways | bytes of YAML | peak RSS, quickstart alone | peak RSS, loaded | peak bytes per byte of YAML | RSS loaded |");
        println!("|---|---|---|---|---|---|");
        println!(
            "| {gateways} | {yaml_bytes} | {fresh_peak} KiB | {peak} KiB | {per_byte:.1} | {loaded} KiB |"
        );
        report.row(json!({
            "of": "load", "gateways": gateways, "files": files.len(), "yaml_bytes": yaml_bytes,
            "fresh_peak_kib": fresh_peak, "peak_kib": peak, "peak_bytes_per_yaml_byte": per_byte,
            "loaded_rss_kib": loaded,
        }));

        // Deleted and copied back three times: does the memory come back each time?
        println!();
        println!("| cycle | RSS loaded | RSS after the deletion | ÷ a fresh start on the quickstart ({fresh_rss} KiB) |");
        println!("|---|---|---|---|");
        for cycle in 1..=3 {
            if cycle > 1 {
                for (name, text) in &files {
                    std::fs::write(dir.join(name), text).unwrap();
                }
                settle(&op, &last, true).await;
            }
            let loaded = op.memory_kib("VmRSS:");
            for (name, _) in &files {
                std::fs::remove_file(dir.join(name)).unwrap();
            }
            settle(&op, &last, false).await;
            let deleted = op.memory_kib("VmRSS:");
            let ratio = deleted as f64 / fresh_rss as f64;
            println!("| {cycle} | {loaded} KiB | {deleted} KiB | {ratio:.2}× |");
            report.row(json!({
                "of": "delete", "cycle": cycle, "gateways": gateways, "loaded_rss_kib": loaded,
                "deleted_rss_kib": deleted, "fresh_rss_kib": fresh_rss, "ratio_to_fresh": ratio,
            }));
        }
        drop(op);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
