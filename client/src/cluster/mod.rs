//! Reaching the STUNner pods of a cluster the way kubectl does: a kubeconfig (`--kubeconfig`,
//! `$KUBECONFIG`, `~/.kube/config`) with an optional context, or the in-cluster config of a
//! pod; finding the operator's config discovery server and the dataplane pods by their labels
//! (as upstream stunnerctl does); and port-forwards to them through the API server, served on
//! a loopback listener so that every client of this crate (HTTP, WebSocket, gRPC) works over
//! them unchanged.
//!
//! `discovery` picks the pods (by their `labels`), `portforward` carries connections to them,
//! `http_proxy` carries HTTP requests to a pod through the API server's pod proxy.

mod discovery;
mod error;
mod http_proxy;
mod labels;
mod portforward;

pub use discovery::{auth_pod, cds_pod, dataplane_pods, dataplane_selector, is_ready, pod_key};
pub use error::ClusterError;
pub use http_proxy::PodHttpProxy;
pub use labels::{
    APP_LABEL, AUTH_APP, CDS_LABEL, DATAPLANE_APP, RELATED_GATEWAY_NAME_LABEL, RELATED_GATEWAY_NAMESPACE_LABEL,
};
pub use portforward::PortForward;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::path::PathBuf;

/// Default port of stunnerd's health check, which also serves `/status` (`DefaultHealthCheckPort`).
pub const DEFAULT_HEALTH_CHECK_PORT: u16 = 8086;

/// Which cluster to talk to, as kubectl's flags choose it.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// A kubeconfig file; without it `$KUBECONFIG` or `~/.kube/config`, else the in-cluster config.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig other than its current one.
    pub context: Option<String>,
}

impl ClusterOptions {
    /// A client of the chosen cluster. Like kubectl, a kubeconfig named explicitly (or a
    /// context, which needs one) must load; otherwise the default kubeconfig is tried first
    /// and the in-cluster config after it.
    pub async fn client(&self) -> Result<Client, ClusterError> {
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
                Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(|e| config_error(&e))?
            }
            None if self.context.is_some() => Config::from_kubeconfig(&options).await.map_err(|e| config_error(&e))?,
            None => Config::infer().await.map_err(|e| config_error(&e))?,
        };
        Client::try_from(config).map_err(ClusterError::Api)
    }
}

/// The error with its causes, which kube's top-level messages leave out ("failed to load the
/// kubeconfig" says nothing about which file or why).
fn config_error(e: &dyn std::error::Error) -> ClusterError {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    ClusterError::Config(text)
}
