//! `stunnerctl`: inspect what the STUNner gateway operator serves, over its config discovery
//! service. A drop-in for upstream stunnerctl's `config` and `license` commands (given the
//! server address; no Kubernetes discovery), plus `status` for the operator's own statuses
//! and `clients` for its client table. `--transport grpc` uses the gRPC API instead of the
//! HTTP/WebSocket one, with the same output.
//!
//! Exit status: 0 on success (including a watch ended by Ctrl-C or SIGTERM), 1 on any error,
//! with the message on stderr.

mod cli;
mod clients_cmd;
mod config_cmd;
mod output;
mod status_cmd;
mod summary;

use clap::Parser;
use cli::{Cli, Command};
use output::Printer;
use std::error::Error;
use std::io::{self, Write};
use std::process::ExitCode;
use stunner_gateway::cds::ConfigId;
use stunner_gateway_client::cds::{CdsClient, ConfigScope, Transport};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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
    let client = CdsClient::new(&cli.cds_server_address)?.with_transport(cli.transport);
    let mut printer = Printer::new(cli.output);
    match cli.command {
        Command::Config { gateway } => {
            // As upstream: -a wins over a namespace and a Gateway name.
            let scope = match gateway {
                _ if cli.all_namespaces => ConfigScope::All,
                None => ConfigScope::Namespace(cli.namespace),
                Some(name) => ConfigScope::Gateway { id: ConfigId::new(cli.namespace, name), node: cli.node },
            };
            config_cmd::run(&client, &scope, cli.watch, &mut printer).await
        }
        Command::License => {
            config_flags_unused(&cli)?;
            printer.document(&client.license().await?, summary::license)
        }
        Command::Clients => {
            config_flags_unused(&cli)?;
            let list = client.clients().await?;
            printer.document(&clients_cmd::sorted(list), clients_cmd::table)
        }
        Command::Status { ref gateway } => {
            config_flags_unused(&cli)?;
            if cli.transport != Transport::WebSocket {
                return Err("status is served over HTTP only: drop --transport".into());
            }
            let filter = status_cmd::Filter {
                all_namespaces: cli.all_namespaces,
                namespace: &cli.namespace,
                gateway: gateway.as_deref(),
            };
            status_cmd::run(&client, &filter, &mut printer).await
        }
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

/// A note on stderr that does not end the command (a watch reconnecting, a skipped config).
fn warn(message: &str) {
    let _ = writeln!(io::stderr(), "stunnerctl: {message}");
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(io::stderr(), "error: {message}");
    ExitCode::FAILURE
}
