//! `stunnerctl`: inspect STUNner gateways. A drop-in for upstream stunnerctl's `config`,
//! `license`, `status` and `auth` commands with kubectl's cluster flags: without
//! `--cds-server-address` the operator's config discovery server is found in the cluster and
//! reached through a port-forward, as upstream does. Ours besides: `gateway-status` for the
//! operator's own statuses, `clients` for its client table, `console` for its web console,
//! `auth` computed from the served config (no auth service needed), and `--transport grpc` for
//! the gRPC API with the same output. `icetest` runs a WebRTC data channel through a Gateway:
//! one already there (`--whip-server`), or, as upstream's, ones it deploys with its own tester.
//!
//! Exit status: 0 on success (including a watch ended by Ctrl-C or SIGTERM, and a command that
//! found nothing, which says so on stderr), 1 on any error, with the message on stderr.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

mod auth_cmd;
mod cli;
mod clients_cmd;
mod config_cmd;
mod connect;
mod console_cmd;
mod gateway_status_cmd;
mod icetest_cluster;
mod icetest_cmd;
mod jsonpath;
mod output;
mod status_cmd;
mod summary;

use cli::{Cli, Command};
use output::Printer;
use std::error::Error;
use std::io::{self, Write};
use std::process::ExitCode;
use stunner_gateway::cds::ConfigId;
use stunner_gateway_client::cds::{ConfigScope, Transport};

fn main() -> ExitCode {
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Help and version are not errors; a bad command line is (1, not clap's 2).
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`stunnerctl config | head`): nothing left to do.
        Err(e) if e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_string()),
    }
}

async fn run(cli: Cli) -> Result<(), Box<dyn Error>> {
    let mut printer = Printer::new(cli.output.clone());
    if let Command::Status { gateway, pod } = &cli.command {
        config_flags_unused(&cli)?;
        return status_cmd::run(&cli, gateway.as_deref(), pod, &mut printer).await;
    }
    if let Command::Icetest(args) = &cli.command {
        config_flags_unused(&cli)?;
        if args.whip_server.is_some() {
            for (flag, set) in
                [("--ice-tester-image", args.ice_tester_image.is_some()), ("--force-cleanup", args.force_cleanup)]
            {
                if set {
                    return Err(
                        format!("{flag} applies only without --whip-server (when icetest deploys its tester)").into()
                    );
                }
            }
            return icetest_cmd::run(args, &cli.namespace).await;
        }
        if args.gateway.is_some() {
            return Err("--gateway applies only with --whip-server: without it icetest makes its own Gateways".into());
        }
        let namespace =
            if cli.namespace_given { cli.namespace.as_str() } else { icetest_cluster::manifests::DEFAULT_NAMESPACE };
        return icetest_cluster::run(args, namespace, &connect::cluster_options(&cli.cluster)).await;
    }
    let cds = connect::cds(&cli).await?;
    let result = match &cli.command {
        Command::Config { gateway } => {
            let scope = scope(&cli, gateway.as_deref(), cli.node.clone());
            config_cmd::run(&cds.client, &scope, cli.watch, &cli, &mut printer).await
        }
        Command::License => match config_flags_unused(&cli) {
            Ok(()) => async { printer.document(&cds.client.license().await?, summary::license) }.await,
            Err(e) => Err(e.into()),
        },
        Command::Clients => match config_flags_unused(&cli) {
            Ok(()) => {
                async {
                    let list = cds.client.clients().await?;
                    printer.document(&clients_cmd::sorted(list), clients_cmd::table)
                }
                .await
            }
            Err(e) => Err(e.into()),
        },
        Command::GatewayStatus { gateway } => {
            config_flags_unused(&cli)?;
            if cli.transport != Transport::WebSocket {
                return Err("gateway-status is served over HTTP only: drop --transport".into());
            }
            let filter = gateway_status_cmd::Filter {
                all_namespaces: cli.all_namespaces,
                namespace: &cli.namespace,
                gateway: gateway.as_deref(),
            };
            gateway_status_cmd::run(&cds.client, &filter, &mut printer).await
        }
        Command::Auth { gateway, username, ttl, auth_turn_credential } => {
            config_flags_unused(&cli)?;
            let req = auth_cmd::Request {
                scope: scope(&cli, gateway.as_deref(), None),
                user_id: username,
                ttl: *ttl,
                turn_credential: *auth_turn_credential,
                all_namespaces: cli.all_namespaces,
                namespace: &cli.namespace,
            };
            auth_cmd::run(&cds.client, &req, &mut printer).await
        }
        Command::Console { gateway, browser } => {
            config_flags_unused(&cli)?;
            if cli.transport != Transport::WebSocket {
                return Err("the console is served over HTTP only: drop --transport".into());
            }
            let id = gateway.as_deref().map(|name| ConfigId::new(cli.namespace.clone(), name));
            console_cmd::run(&cds, id.as_ref(), *browser).await
        }
        Command::Status { .. } | Command::Icetest(_) => unreachable!("handled above"),
    };
    result.map_err(|e| cds.explain(e))
}

/// The configs a command is about. As upstream: -a wins over a namespace and a Gateway name.
fn scope(cli: &Cli, gateway: Option<&str>, node: Option<String>) -> ConfigScope {
    match gateway {
        _ if cli.all_namespaces => ConfigScope::All,
        None => ConfigScope::Namespace(cli.namespace.clone()),
        Some(name) => ConfigScope::Gateway { id: ConfigId::new(cli.namespace.clone(), name), node },
    }
}

/// `--watch` and `--node` are global like upstream's flags, but mean something for `config` only.
fn config_flags_unused(cli: &Cli) -> Result<(), String> {
    for (flag, set) in [("--watch", cli.watch), ("--node", cli.node.is_some())] {
        if set {
            return Err(format!("{flag} applies only to the config command"));
        }
    }
    Ok(())
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(io::stderr(), "error: {message}");
    ExitCode::FAILURE
}
