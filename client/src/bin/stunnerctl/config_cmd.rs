//! `stunnerctl config`: get the configs once, or watch them until interrupted.

use super::cli::Cli;
use super::output::Printer;
use std::error::Error;
use stunner_gateway_client::cds::{CdsClient, ConfigScope, WatchEvent};
use tokio::signal::unix::{SignalKind, signal};

pub async fn run(
    client: &CdsClient,
    scope: &ConfigScope,
    watch: bool,
    cli: &Cli,
    printer: &mut Printer,
) -> Result<(), Box<dyn Error>> {
    if !watch {
        let configs = client.configs(scope).await?;
        if configs.is_empty() {
            super::output::nothing_found("Gateway configs", cli.all_namespaces, &cli.namespace);
        }
        for config in configs {
            printer.config(&config)?;
        }
        return Ok(());
    }
    let mut watcher = client.watch(scope);
    let interrupted = interrupted();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            () = &mut interrupted => {
                watcher.close().await;
                return Ok(());
            }
            event = watcher.next() => match event {
                WatchEvent::Config(config) => printer.config(&config)?,
                WatchEvent::Rejected { reason } => super::output::warn(&format!("ignoring a config from the server: {reason}")),
                WatchEvent::Disconnected { error, retry_in } => {
                    super::output::warn(&format!("{error}; retrying in {:.1}s", retry_in.as_secs_f64()))
                }
            },
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM: the normal end of a watch (and of `console`'s port-forward).
pub async fn interrupted() {
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
