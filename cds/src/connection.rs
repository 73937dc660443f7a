//! What the CDS listener knows of a connection and hands to the transports with each request
//! (as request extensions): who is at the other end, and the slot the connection holds.

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

/// The remote address of the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// Holds one slot of the server's connection limit for as long as the connection lives,
/// including after it was upgraded to a WebSocket.
#[derive(Clone)]
pub struct ConnectionPermit {
    _slot: Arc<OwnedSemaphorePermit>,
}

impl ConnectionPermit {
    pub fn new(slot: OwnedSemaphorePermit) -> Self {
        ConnectionPermit { _slot: Arc::new(slot) }
    }
}
