//! The command line: upstream stunnerctl's commands and flags (kubectl's cluster flags, the
//! `--cds-server-*` and `--pod-*` flags), plus our `gateway-status`, `clients` and `--transport`.

use super::jsonpath::Template;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;
use stunner_gateway::turn_auth::DEFAULT_TTL_SECS;
use stunner_gateway_client::cds::Transport;
use stunner_gateway_client::cluster::DEFAULT_HEALTH_CHECK_PORT;

/// Inspect STUNner gateways: the dataplane configs and license the operator serves, the
/// dataplane pods' status, and TURN credentials for clients.
///
/// Without --cds-server-address, the operator is found in the cluster of the current
/// kubeconfig context (or the in-cluster config) and reached through a port-forward.
#[derive(Debug, Parser)]
#[command(name = "stunnerctl", version)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: ClusterFlags,

    /// Config discovery server: an address (with --cds-server-port, as upstream), host:port,
    /// :port or http://host:port. Disables finding it in the cluster.
    #[arg(long, global = true, env = "STUNNERCTL_CDS_SERVER_ADDRESS")]
    pub cds_server_address: Option<String>,

    /// Config discovery server port [default: 13478].
    #[arg(long, global = true)]
    pub cds_server_port: Option<u16>,

    /// Look for the config discovery server pod in this namespace only (default: all).
    #[arg(long, global = true)]
    pub cds_server_namespace: Option<String>,

    /// API to use: ws (the HTTP/WebSocket API stunnerd speaks) or grpc. Same output either way.
    #[arg(long, global = true, value_enum, default_value = "ws")]
    pub transport: Transport,

    /// Namespace of the Gateways.
    #[arg(short, long, global = true, default_value = "default")]
    pub namespace: String,

    /// Whether -n/--namespace was given: commands with a namespace of their own (icetest's
    /// `icetest`, as upstream's) use it only then.
    #[arg(skip)]
    pub namespace_given: bool,

    /// Consider all namespaces.
    #[arg(short, long = "all-namespaces", visible_short_alias = 'A', global = true)]
    pub all_namespaces: bool,

    /// Output format: summary, json, yaml or jsonpath=TEMPLATE (e.g. jsonpath='{.admin.name}').
    #[arg(short, long, global = true, default_value = "summary", value_parser = Output::parse)]
    pub output: Output,

    /// Keep printing configs as they change (config only).
    #[arg(short, long, global = true)]
    pub watch: bool,

    /// Show a Gateway's config as the dataplane on this node gets it (relay address discovery).
    #[arg(long, global = true)]
    pub node: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's flags for choosing a cluster.
#[derive(Debug, Args)]
pub struct ClusterFlags {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Get or watch the dataplane configs of Gateways.
    #[command(visible_alias = "stunner-config")]
    Config {
        /// One Gateway in the namespace (default: every Gateway in it).
        gateway: Option<String>,
    },
    /// Get the licensing status.
    #[command(visible_alias = "license-status")]
    License,
    /// Read the status of the dataplane (stunnerd) pods of a Gateway, or of every Gateway in
    /// the namespace.
    #[command(visible_alias = "dataplane-status")]
    Status {
        /// Only the pods of this Gateway.
        gateway: Option<String>,
        #[command(flatten)]
        pod: PodFlags,
    },
    /// Get the statuses the operator computed for GatewayClasses, Gateways and routes.
    GatewayStatus {
        /// Only this Gateway among Gateways (routes and classes are filtered by namespace).
        gateway: Option<String>,
    },
    /// TURN credentials for a Gateway, as a WebRTC ICE server config (RTCConfiguration) or a
    /// plain TURN credential, computed from the config the operator serves.
    #[command(visible_alias = "get-credential")]
    Auth {
        /// The Gateway (default: every Gateway in the namespace).
        gateway: Option<String>,
        /// User id in an ephemeral (time-windowed) username `<expiry>:<user id>`.
        #[arg(short, long, default_value = "")]
        username: String,
        /// Validity of an ephemeral credential: seconds, or a number with s, m, h or d.
        #[arg(long, value_parser = parse_duration, default_value = "1d")]
        ttl: Duration,
        /// Print a plain TURN credential ({password, ttl, uris, username}) instead of an ICE
        /// server config.
        #[arg(long)]
        auth_turn_credential: bool,
    },
    /// List the watch clients connected to the server: which version of each config they were
    /// sent, and which they acknowledged or rejected (gRPC clients only acknowledge).
    Clients,
    /// Open the operator's web console: print its URL (through a port-forward held open until
    /// Ctrl-C, or at --cds-server-address) and, with --browser, open it.
    #[command(visible_alias = "dashboard")]
    Console {
        /// This Gateway's page (in --namespace) instead of the overview.
        gateway: Option<String>,
        /// Open the URL in the desktop's browser (xdg-open; open on macOS).
        #[arg(long)]
        browser: bool,
    },
    /// Run an ICE test: a WebRTC data channel through a Gateway's TURN listeners to an
    /// icetester, with rate, loss and RTT, or the stage that failed and what to check.
    Icetest(IceTestArgs),
}

impl Cli {
    /// The command line, as `Cli::try_parse` reads it, and whether it named a namespace.
    pub fn parse_args() -> Result<Cli, clap::Error> {
        Cli::parse_args_from(std::env::args_os())
    }

    fn parse_args_from<I: IntoIterator<Item = T>, T: Into<std::ffi::OsString> + Clone>(
        args: I,
    ) -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let matches = Cli::command().try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        cli.namespace_given = matches.value_source("namespace") == Some(clap::parser::ValueSource::CommandLine);
        Ok(cli)
    }
}

/// `stunnerctl icetest [udp|tcp]...`: upstream's flags that this mode uses, and ours.
#[derive(Debug, Args)]
pub struct IceTestArgs {
    /// TURN transports to test: udp, tcp (turn-udp, turn-tcp) [default: udp tcp].
    pub protocols: Vec<String>,
    /// Packet rate [pkts/sec], 0 means flood test.
    #[arg(short = 'r', long, default_value_t = 50)]
    pub packet_rate: u32,
    /// Give up after this long: seconds, or a number with s, m, h or d.
    #[arg(short = 't', long, value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
    /// The operator's credential API, HOST[:PORT] (port 8088 by default).
    #[arg(long)]
    pub auth_server_address: Option<String>,
    /// The icetester's WHIP URL, e.g. http://127.0.0.1:8089/whip (ours).
    #[arg(long)]
    pub whip_server: Option<String>,
    /// The Gateway (in --namespace) to test (ours; default: the namespace's first).
    #[arg(long)]
    pub gateway: Option<String>,
    /// How long packets are sent over each transport (ours; upstream sends for 20s).
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    pub duration: Duration,
    /// The icetester image to deploy (without --whip-server) [default: ours,
    /// ghcr.io/l7mp/stunner-icetester-rs:<this version>].
    #[arg(long)]
    pub ice_tester_image: Option<String>,
    /// Remove what an earlier run left behind (the test namespace) before testing (without
    /// --whip-server).
    #[arg(long)]
    pub force_cleanup: bool,
}

/// Upstream's flags for reaching dataplane pods.
#[derive(Debug, Args)]
pub struct PodFlags {
    /// Address of a stunnerd to query directly (disables finding the pods in the cluster).
    #[arg(long)]
    pub pod_address: Option<String>,
    /// Only this pod of the Gateway (needs a Gateway name).
    #[arg(long)]
    pub pod_name: Option<String>,
    /// Port of stunnerd's health check, which serves its status.
    #[arg(long, default_value_t = DEFAULT_HEALTH_CHECK_PORT)]
    pub pod_port: u16,
}

#[derive(Debug, Clone)]
pub enum Output {
    /// Human-readable summary.
    Summary,
    /// One compact JSON document per line.
    Json,
    /// YAML documents separated by `---`, keys sorted as upstream prints them.
    Yaml,
    /// A kubectl-style JSONPath template, one line per document.
    JsonPath(Template),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Summary,
    Json,
    Yaml,
}

impl Output {
    fn parse(raw: &str) -> Result<Output, String> {
        if let Some(template) = raw.strip_prefix("jsonpath=") {
            return Template::parse(template).map(Output::JsonPath);
        }
        match Format::from_str(raw, false) {
            Ok(Format::Summary) => Ok(Output::Summary),
            Ok(Format::Json) => Ok(Output::Json),
            Ok(Format::Yaml) => Ok(Output::Yaml),
            Err(_) => Err(format!("invalid value '{raw}': expected summary, json, yaml or jsonpath=TEMPLATE")),
        }
    }
}

/// `90`, `90s`, `15m`, `12h`, `1d`: a TTL or a timeout.
fn parse_duration(raw: &str) -> Result<Duration, String> {
    let (number, unit) = match raw.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => raw.split_at(i),
        None => (raw, "s"),
    };
    let n: u64 = number.parse().map_err(|_| format!("invalid duration '{raw}': expected e.g. 3600, 90m, 12h or 1d"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("invalid duration '{raw}': the unit is s, m, h or d")),
    };
    n.checked_mul(scale).filter(|&s| s > 0).map(Duration::from_secs).ok_or_else(|| format!("invalid duration '{raw}'"))
}

const _: () = assert!(DEFAULT_TTL_SECS == 86_400, "the --ttl default says 1d");

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_namespace_given_anywhere_is_told_from_the_default() {
        for args in [&["stunnerctl", "icetest", "-n", "default"][..], &["stunnerctl", "--namespace", "x", "icetest"]] {
            assert!(Cli::parse_args_from(args).unwrap().namespace_given, "{args:?}");
        }
        let cli = Cli::parse_args_from(["stunnerctl", "icetest", "udp"]).unwrap();
        assert!(!cli.namespace_given && cli.namespace == "default");
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["stunnerctl", "stunner-config", "gw", "-n", "ns", "-o", "yaml", "-w"]).unwrap();
        assert!(matches!(cli.command, Command::Config { gateway: Some(ref g) } if g == "gw"));
        assert!(matches!(cli.output, Output::Yaml));
        assert_eq!((cli.namespace.as_str(), cli.watch), ("ns", true));
        let cli = Cli::try_parse_from(["stunnerctl", "-a", "license-status"]).unwrap();
        assert!(cli.all_namespaces && matches!(cli.command, Command::License));
        assert_eq!(cli.transport, Transport::WebSocket, "the default");
        let cli = Cli::try_parse_from(["stunnerctl", "clients", "--transport", "grpc", "-o", "json"]).unwrap();
        assert!(matches!(cli.command, Command::Clients) && cli.transport == Transport::Grpc);
        let cli = Cli::try_parse_from(["stunnerctl", "config", "-A", "-o", "jsonpath={.admin.name}"]).unwrap();
        assert!(cli.all_namespaces && matches!(cli.output, Output::JsonPath(_)));
        let cli = Cli::try_parse_from([
            "stunnerctl",
            "--kubeconfig",
            "/k",
            "--context",
            "c",
            "--cds-server-address",
            "10.0.0.1",
            "--cds-server-port",
            "1",
            "status",
            "gw",
            "--pod-address",
            "127.0.0.1",
        ])
        .unwrap();
        assert_eq!(cli.cluster.kubeconfig.as_deref(), Some(std::path::Path::new("/k")));
        assert_eq!((cli.cluster.context.as_deref(), cli.cds_server_port), (Some("c"), Some(1)));
        assert!(matches!(cli.command, Command::Status { pod: PodFlags { pod_port: 8086, .. }, .. }));
    }

    #[test]
    fn ttls() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(DEFAULT_TTL_SECS as u64));
        for bad in ["", "0", "1w", "h", "-1"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
