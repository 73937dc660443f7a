//! `stunnerctl status`: what each dataplane pod's stunnerd reports about itself (its `/status`
//! on the health-check port), read through a port-forward to each pod as upstream does, or
//! from one stunnerd given by `--pod-address`.

use super::cli::{Cli, PodFlags};
use super::connect::cluster_options;
use super::output::{Printer, nothing_found};
use std::error::Error;
use std::time::Duration;
use stunner_gateway_client::cds::Timeouts;
use stunner_gateway_client::cluster::{self, PortForward, pod_key};
use stunner_gateway_client::dataplane::{self, DataplaneStatus};

/// Upstream's per-pod HTTP timeout.
const TIMEOUTS: Timeouts = Timeouts { connect: Duration::from_secs(5), request: Duration::from_secs(5) };

pub async fn run(
    cli: &Cli,
    gateway: Option<&str>,
    flags: &PodFlags,
    printer: &mut Printer,
) -> Result<(), Box<dyn Error>> {
    if let Some(address) = &flags.pod_address {
        let addr = with_port(address, flags.pod_port);
        let status = dataplane::status(&addr, TIMEOUTS).await?;
        return print(printer, &addr, &status);
    }
    if flags.pod_name.is_some() && (gateway.is_none() || cli.all_namespaces) {
        return Err("--pod-name needs a gateway name and a namespace (not -A)".into());
    }
    let kube = cluster_options(&cli.cluster).client().await?;
    let namespace = (!cli.all_namespaces).then_some(cli.namespace.as_str());
    let pods = cluster::dataplane_pods(&kube, namespace, gateway, flags.pod_name.as_deref()).await?;
    if pods.is_empty() {
        let what = match gateway {
            Some(gw) if !cli.all_namespaces => format!("dataplane pods of gateway {}/{gw}", cli.namespace),
            _ => "dataplane pods".into(),
        };
        nothing_found(&what, cli.all_namespaces, &cli.namespace);
        return Ok(());
    }
    let mut failed = 0;
    for pod in &pods {
        let key = pod_key(pod);
        let result = async {
            let forward = PortForward::start(kube.clone(), pod, flags.pod_port).await?;
            dataplane::status(&forward.local_addr().to_string(), TIMEOUTS).await.map_err(|e| {
                let why = forward.last_error().map(|w| format!(" (port-forward: {w})")).unwrap_or_default();
                Box::<dyn Error>::from(format!("{e}{why}"))
            })
        };
        match result.await {
            Ok(status) => print(printer, &key, &status)?,
            Err(e) => {
                // As upstream, one pod that does not answer does not hide the others.
                super::output::warn(&format!("pod {key}: {e}"));
                failed += 1;
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} dataplane pods did not report a status", pods.len()).into());
    }
    Ok(())
}

/// Upstream joins `--pod-address` and `--pod-port`; an address with a port of its own keeps it.
fn with_port(address: &str, port: u16) -> String {
    if address.parse::<std::net::Ipv6Addr>().is_ok() {
        return format!("[{address}]:{port}");
    }
    let has_port = match address.rfind(']') {
        Some(end) => address[end..].contains(':'),
        None => address.contains(':'),
    };
    if has_port { address.to_string() } else { format!("{address}:{port}") }
}

/// Upstream's layout: the pod (or address), then its tab-indented status summary.
fn print(printer: &mut Printer, label: &str, status: &DataplaneStatus) -> Result<(), Box<dyn Error>> {
    printer.text(&status.value, |_| format!("{label}:\n\t{}\n", status.status.summary()), |_| status.json.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_address_takes_the_port() {
        assert_eq!(with_port("10.0.0.1", 8086), "10.0.0.1:8086");
        assert_eq!(with_port("10.0.0.1:1", 8086), "10.0.0.1:1");
        assert_eq!(with_port("::1", 8086), "[::1]:8086");
        assert_eq!(with_port("[::1]:2", 8086), "[::1]:2");
        assert_eq!(with_port("localhost", 1), "localhost:1");
    }
}
