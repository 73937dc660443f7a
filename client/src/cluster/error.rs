//! Why reaching the cluster or its pods failed.

use super::labels::CDS_LABEL;

/// Why reaching the cluster or its pods failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot load the Kubernetes config: {0}")]
    Config(String),

    #[error("Kubernetes API request failed: {0}")]
    Api(#[from] kube::Error),

    /// No pod carries the CDS label where we looked.
    #[error(
        "no config discovery server found {where_}: no pod is labelled {CDS_LABEL}=enabled \
         (is the STUNner gateway operator running? give --cds-server-address to connect directly)"
    )]
    NoCdsServer { where_: String },

    /// No pod carries `app=stunner-auth` where we looked.
    #[error(
        "no credential API found: no pod is labelled app=stunner-auth \
         (is the STUNner gateway operator installed with its credential API? give --auth-server-address to connect directly)"
    )]
    NoAuthServer,

    #[error("pod {pod} not found among the dataplane pods of gateway {gateway}")]
    NoSuchPod { pod: String, gateway: String },

    #[error("cannot port-forward to pod {pod} port {port}: {reason}")]
    PortForward { pod: String, port: u16, reason: String },
}
