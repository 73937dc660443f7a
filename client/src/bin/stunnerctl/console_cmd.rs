//! `stunnerctl console`: the operator's web console (its `/ui/` on the CDS port) at a URL on
//! this machine, as `istioctl dashboard` opens its UIs: through the port-forward the other
//! commands use, held open until Ctrl-C or SIGTERM, or at `--cds-server-address`. Prints the
//! URL; `--browser` also opens it.

use super::config_cmd::interrupted;
use super::connect::Cds;
use std::error::Error;
use std::io::Write;
use std::process::{Command, Stdio};
use stunner_gateway::cds::ConfigId;

/// Prints the URL of the console (of `gateway`'s page, if given) once the server answers it,
/// opens it with `browser`, and holds the port-forward, if any, until interrupted.
pub async fn run(cds: &Cds, gateway: Option<&ConfigId>, browser: bool) -> Result<(), Box<dyn Error>> {
    let url = cds.client.console_url(gateway).await?;
    writeln!(std::io::stdout(), "{url}")?;
    if browser {
        open(url.as_str())?;
    }
    if let Some(forward) = &cds.forward {
        writeln!(
            std::io::stderr(),
            "Forwarding {} to port {} of pod {}: press Ctrl-C to stop.",
            forward.local_addr(),
            forward.port(),
            forward.pod()
        )?;
        interrupted().await;
    }
    Ok(())
}

/// Opens `url` in the desktop's browser, without waiting for it.
fn open(url: &str) -> Result<(), String> {
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    Command::new(opener)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot open a browser with {opener}: {e} (open {url} yourself)"))
}
