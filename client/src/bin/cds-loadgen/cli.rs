//! The command line of `cds-loadgen`, with the bounds that keep every run finite.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;
use stunner_gateway_client::cds::Transport;

/// Most watchers one run may open: each is a TCP connection on both ends of loopback.
pub const MAX_WATCHERS: usize = 20_000;
/// Most updates one run may write.
pub const MAX_UPDATES: usize = 10_000;
/// Most Gateways (config ids) the watchers may be spread over.
pub const MAX_GATEWAYS: usize = 1_000;
/// Most endpoints per Gateway (with --endpoints).
pub const MAX_ENDPOINTS: usize = 100;
/// Longest run.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// Fan-out load generator for the STUNner config discovery service: N watchers (WebSocket or
/// gRPC) watch the configs the real operator renders from manifests it writes, then K manifest
/// changes measure the latency from each file write to each watcher's receipt.
#[derive(Debug, Parser)]
#[command(name = "cds-loadgen", version)]
pub struct Args {
    /// Number of watchers (at most 20,000).
    #[arg(short = 'n', long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=MAX_WATCHERS as u64))]
    pub watchers: u64,

    /// Number of updates (manifest changes) after the initial config (at most 10,000).
    #[arg(short = 'k', long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_UPDATES as u64))]
    pub updates: u64,

    /// Number of Gateways, hence configs; watchers are spread over them round-robin. Every
    /// update changes all of them (they share the GatewayConfig whose realm carries it).
    #[arg(short = 'g', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_GATEWAYS as u64))]
    pub gateways: u64,

    /// Endpoints per Gateway (at most 100): each Gateway gets a UDPRoute to a Service of its
    /// own whose EndpointSlice lists this many addresses, all in its config's cluster.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_ENDPOINTS as u64))]
    pub endpoints: u64,

    /// After the updates, restart the spawned operator (kill it, write one more update while
    /// it is down, start it on the same address) and measure the reconnect storm: how long
    /// until every watcher holds that update again. The watchers reconnect as stunnerd does,
    /// every second in lockstep. Not with --manifests.
    #[arg(long, conflicts_with = "manifests")]
    pub restart: bool,

    /// Wire protocol of the watchers.
    #[arg(long, value_enum, default_value = "ws")]
    pub transport: Transport,

    /// The whole run ends after this many seconds, finished or not.
    #[arg(long, default_value = "120", value_parser = parse_duration)]
    pub duration: Duration,

    /// The operator binary to run in standalone mode (default: `stunner-gateway-operator` next
    /// to this program).
    #[arg(long, value_name = "PATH", conflicts_with = "manifests")]
    pub operator_bin: Option<PathBuf>,

    /// Use an already running standalone operator that reads this manifest directory: the
    /// load generator adds its own file there (and removes it at the end). Give its CDS
    /// address with --server.
    #[arg(long, value_name = "DIR", requires = "server")]
    pub manifests: Option<PathBuf>,

    /// Config discovery server of the running operator (with --manifests).
    #[arg(long, value_name = "HOST:PORT")]
    pub server: Option<String>,

    /// Allow a --server that is not on this host.
    #[arg(long)]
    pub allow_remote: bool,

    /// The spawned operator's --throttle-timeout (its render debounce, part of every latency).
    #[arg(long, default_value = "10ms", value_name = "DURATION")]
    pub operator_throttle: String,

    /// Most watchers connecting at once during ramp-up. The default stays below the CDS
    /// listener's accept backlog (128): a larger burst overflows it, and the kernel makes the
    /// overflowing clients wait a 1 s SYN retransmit, which would dominate the connect rate.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=MAX_WATCHERS as u64))]
    pub connect_concurrency: u64,

    /// Write an SVG histogram and CDF of the latencies to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Print the summary as one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Seconds (`90`, `1.5`) or with a unit (`500ms`, `30s`, `2m`), at most an hour.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (examples: 90, 500ms, 30s, 2m)");
    let (number, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = number.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(bad()),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(bad());
    }
    let d = Duration::from_secs_f64(secs);
    if d > MAX_DURATION {
        return Err(format!("duration {s:?} is longer than the limit of {}s", MAX_DURATION.as_secs()));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn bounds_are_enforced() {
        assert!(Args::try_parse_from(["cds-loadgen", "--watchers", "20000"]).is_ok());
        assert!(Args::try_parse_from(["cds-loadgen", "--watchers", "20001"]).is_err());
        assert!(Args::try_parse_from(["cds-loadgen", "--watchers", "0"]).is_err());
        assert!(Args::try_parse_from(["cds-loadgen", "--updates", "10001"]).is_err());
        assert!(Args::try_parse_from(["cds-loadgen", "--duration", "2h"]).is_err());
        assert!(Args::try_parse_from(["cds-loadgen", "--manifests", "/tmp"]).is_err(), "needs --server");
        assert!(Args::try_parse_from(["cds-loadgen", "--endpoints", "100"]).is_ok());
        assert!(Args::try_parse_from(["cds-loadgen", "--endpoints", "101"]).is_err());
        let external = ["cds-loadgen", "--manifests", "/tmp", "--server", "127.0.0.1:1", "--restart"];
        assert!(Args::try_parse_from(external).is_err(), "only a spawned operator can be restarted");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("1h").is_err());
    }
}
