//! Limits of the gRPC API (`--cds-*grpc*` flags).

use std::time::Duration;

/// Limits of the gRPC API.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest request message accepted (a `WatchStart`'s resume list is the only big one).
    pub max_request_bytes: usize,
    /// Most concurrent HTTP/2 streams (calls) per connection.
    pub max_concurrent_streams: u32,
    /// Most watches open at once on one connection (`--cds-max-grpc-watches-per-connection`).
    pub max_watches_per_connection: usize,
    /// Most gRPC watches open at once on the server (`--cds-max-grpc-watches`).
    pub max_watches: usize,
    /// How often an idle HTTP/2 connection is pinged ...
    pub keepalive_interval: Duration,
    /// ... and how long the peer has to answer before the connection is closed.
    pub keepalive_timeout: Duration,
    /// A watch whose `start` message has not arrived within this time is refused.
    pub start_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_request_bytes: 64 * 1024,
            max_concurrent_streams: 64,
            max_watches_per_connection: 16,
            max_watches: 16384,
            keepalive_interval: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(20),
            start_timeout: Duration::from_secs(10),
        }
    }
}
