//! The command line: upstream stunnerctl's flags where they apply to a CDS client.

use clap::{Parser, Subcommand, ValueEnum};
use stunner_gateway_client::cds::Transport;

/// Inspect the dataplane configs, license and statuses served by the STUNner gateway operator.
#[derive(Debug, Parser)]
#[command(name = "stunnerctl", version)]
pub struct Cli {
    /// Config discovery server: host:port, :port or http://host:port.
    #[arg(long, global = true, env = "STUNNERCTL_CDS_SERVER_ADDRESS", default_value = "127.0.0.1:13478")]
    pub cds_server_address: String,

    /// API to use: ws (the HTTP/WebSocket API stunnerd speaks) or grpc. Same output either way.
    #[arg(long, global = true, value_enum, default_value = "ws")]
    pub transport: Transport,

    /// Namespace of the Gateways.
    #[arg(short, long, global = true, default_value = "default")]
    pub namespace: String,

    /// Consider all namespaces.
    #[arg(short, long = "all-namespaces", global = true)]
    pub all_namespaces: bool,

    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Summary)]
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
    /// Get the statuses the operator computed for GatewayClasses, Gateways and routes.
    Status {
        /// Only this Gateway among Gateways (routes and classes are filtered by namespace).
        gateway: Option<String>,
    },
    /// List the watch clients connected to the server: which version of each config they were
    /// sent, and which they acknowledged or rejected (gRPC clients only acknowledge).
    Clients,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable summary.
    Summary,
    /// One compact JSON document per line.
    Json,
    /// YAML documents separated by `---`.
    Yaml,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["stunnerctl", "stunner-config", "gw", "-n", "ns", "-o", "yaml", "-w"]).unwrap();
        assert!(matches!(cli.command, Command::Config { gateway: Some(ref g) } if g == "gw"));
        assert_eq!((cli.namespace.as_str(), cli.output, cli.watch), ("ns", Output::Yaml, true));
        let cli = Cli::try_parse_from(["stunnerctl", "-a", "license-status"]).unwrap();
        assert!(cli.all_namespaces && matches!(cli.command, Command::License));
        assert_eq!(cli.transport, Transport::WebSocket, "the default");
        let cli = Cli::try_parse_from(["stunnerctl", "clients", "--transport", "grpc", "-o", "json"]).unwrap();
        assert!(matches!(cli.command, Command::Clients) && cli.transport == Transport::Grpc);
    }
}
