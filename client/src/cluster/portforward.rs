//! A port-forward to one port of one pod through the API server (`pods/portforward`, the
//! WebSocket protocol), served on an ephemeral loopback port: what `kubectl port-forward`
//! does, in-process, so that the CDS client and the status client connect to a plain
//! `127.0.0.1:port` whatever transport they speak.
//!
//! Each accepted connection gets a port-forward of its own (a Kubernetes port-forward carries
//! one stream per port), as kubectl opens one data stream per connection.

use super::discovery::pod_key;
use super::error::ClusterError;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Portforwarder};
use kube::{Client, ResourceExt};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// At most this many connections are carried at once: a CLI needs a few (a watch, a GET),
/// and each holds a WebSocket to the API server.
const MAX_CONNECTIONS: usize = 16;
/// How long a finished connection waits for the kubelet's error message.
const ERROR_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A running port-forward; dropping it closes the listener and every carried connection.
pub struct PortForward {
    local: SocketAddr,
    pod: String,
    port: u16,
    last_error: Arc<Mutex<Option<String>>>,
    task: JoinHandle<()>,
}

impl PortForward {
    /// Opens the first port-forward at once, so that an API server or kubelet that refuses is
    /// reported here rather than as a broken connection later; it carries the first connection.
    pub async fn start(client: Client, pod: &Pod, port: u16) -> Result<Self, ClusterError> {
        let key = pod_key(pod);
        let failed = |reason: String| ClusterError::PortForward { pod: key.clone(), port, reason };
        let api: Api<Pod> = Api::namespaced(client, &pod.namespace().unwrap_or_default());
        let name = pod.name_any();
        let first = api.portforward(&name, &[port]).await.map_err(|e| failed(e.to_string()))?;
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| failed(e.to_string()))?;
        let local = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        let last_error = Arc::new(Mutex::new(None));
        let task = tokio::spawn(serve(listener, api, name, port, first, last_error.clone()));
        Ok(PortForward { local, pod: key, port, last_error, task })
    }

    /// Where to connect: a loopback address of this process.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `namespace/name` of the pod it forwards to.
    pub fn pod(&self) -> &str {
        &self.pod
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Why the last connection could not be carried, if one could not (the kubelet's answer,
    /// e.g. nothing listening on the port): what a broken connection alone does not say.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().expect("not poisoned").clone()
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    api: Api<Pod>,
    name: String,
    port: u16,
    first: Portforwarder,
    last_error: Arc<Mutex<Option<String>>>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut first = Some(first);
    let mut carried = tokio::task::JoinSet::new();
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let Ok((conn, _)) = listener.accept().await else { return };
        let forwarder = match first.take() {
            Some(f) => Ok(f),
            None => api.portforward(&name, &[port]).await,
        };
        let last_error = last_error.clone();
        carried.spawn(async move {
            let _permit = permit;
            let result = match forwarder {
                Ok(f) => carry(conn, f, port).await,
                Err(e) => Err(CarryError::Forward(e)),
            };
            if let Err(e) = result {
                *last_error.lock().expect("not poisoned") = Some(e.to_string());
            }
        });
        // Reap what has finished, so the set holds only live connections.
        while carried.try_join_next().is_some() {}
    }
}

/// Why one connection could not be carried.
#[derive(Debug, thiserror::Error)]
enum CarryError {
    /// The API server refused this connection's port-forward.
    #[error(transparent)]
    Forward(kube::Error),
    #[error("the port-forward has no stream for the port")]
    NoStream,
    /// What the kubelet said on the port-forward's error stream (e.g. nothing listens there).
    #[error("{0}")]
    Kubelet(String),
    #[error(transparent)]
    Copy(std::io::Error),
}

/// Copies both ways until either side closes, then reports what the kubelet said went wrong.
async fn carry(mut conn: TcpStream, mut forwarder: Portforwarder, port: u16) -> Result<(), CarryError> {
    let mut upstream = forwarder.take_stream(port).ok_or(CarryError::NoStream)?;
    let error = forwarder.take_error(port);
    let copied = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    drop(upstream);
    drop(conn);
    // The kubelet's error (if any) comes on its own stream, about when the data stream ends;
    // a clean close never sends one, hence the bound.
    let kubelet_error = match error {
        Some(e) => tokio::time::timeout(ERROR_GRACE, e).await.ok().flatten(),
        None => None,
    };
    forwarder.abort();
    let _ = forwarder.join().await;
    match (kubelet_error, copied) {
        (Some(e), _) => Err(CarryError::Kubelet(e)),
        (None, Err(e)) => Err(CarryError::Copy(e)),
        (None, Ok(_)) => Ok(()),
    }
}
