//! Where the commands' servers are: given on the command line, or found in the cluster and
//! reached through port-forwards (as upstream stunnerctl does).

use super::cli::{Cli, ClusterFlags};
use std::error::Error;
use stunner_gateway_client::cds::{CdsClient, DEFAULT_PORT, ServerAddress};
use stunner_gateway_client::cluster::{self, ClusterOptions, PortForward};

/// A CDS client, and the port-forward it goes through when the server was found in the cluster
/// (kept alive as long as the client is used).
pub struct Cds {
    pub client: CdsClient,
    pub forward: Option<PortForward>,
}

impl Cds {
    /// `error` with what the port-forward knows about why connections failed, if anything.
    pub fn explain(&self, error: Box<dyn Error>) -> Box<dyn Error> {
        match self.forward.as_ref().and_then(|f| f.last_error().map(|e| (f, e))) {
            Some((f, why)) => format!("{error} (port-forward to pod {} port {}: {why})", f.pod(), f.port()).into(),
            None => error,
        }
    }
}

pub fn cluster_options(flags: &ClusterFlags) -> ClusterOptions {
    ClusterOptions { kubeconfig: flags.kubeconfig.clone(), context: flags.context.clone() }
}

/// The config discovery server: `--cds-server-address` (with `--cds-server-port`), else the
/// labelled pod in the cluster (in `--cds-server-namespace`, else any namespace) through a
/// port-forward to `--cds-server-port`.
pub async fn cds(cli: &Cli) -> Result<Cds, Box<dyn Error>> {
    let (address, forward) = match &cli.cds_server_address {
        Some(address) => (ServerAddress::parse_with_port(address, cli.cds_server_port)?, None),
        None => {
            let kube = cluster_options(&cli.cluster).client().await?;
            let pod = cluster::cds_pod(&kube, cli.cds_server_namespace.as_deref()).await?;
            let forward = PortForward::start(kube, &pod, cli.cds_server_port.unwrap_or(DEFAULT_PORT)).await?;
            (ServerAddress::parse(&forward.local_addr().to_string())?, Some(forward))
        }
    };
    let client = CdsClient::from_address(address).with_transport(cli.transport);
    Ok(Cds { client, forward })
}
