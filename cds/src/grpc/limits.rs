//! How many watches may be open: per HTTP/2 connection and on the whole server. An idle watch
//! costs the server tens of KiB (BENCHMARKS.md), so HTTP/2's stream limit alone (64 calls per
//! connection, times `--cds-max-connections`) would let clients pin gigabytes; a watch past
//! either limit ends at once with `RESOURCE_EXHAUSTED` naming the limit and its flag.

// tonic's `Status` is the natural error here, large as it is.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

/// The watch slots of one connection, a request extension the CDS listener adds.
#[derive(Clone)]
pub struct ConnectionWatches(Arc<Semaphore>);

impl ConnectionWatches {
    pub(crate) fn new(limit: usize) -> Self {
        ConnectionWatches(Arc::new(Semaphore::new(limit)))
    }
}

/// The server's watch slots, and the limits for the refusal messages.
#[derive(Clone)]
pub(super) struct WatchLimits {
    server: Arc<Semaphore>,
    max_watches: usize,
    max_watches_per_connection: usize,
}

/// The slots one watch holds for as long as its stream lives (from its first byte, so watches
/// still waiting for their `start` count too).
pub(super) struct WatchSlots {
    _connection: Option<OwnedSemaphorePermit>,
    _server: OwnedSemaphorePermit,
}

impl WatchLimits {
    pub(crate) fn new(max_watches: usize, max_watches_per_connection: usize) -> Self {
        WatchLimits { server: Arc::new(Semaphore::new(max_watches)), max_watches, max_watches_per_connection }
    }

    /// Takes a slot on `connection` (absent for a call that did not come through the CDS
    /// listener) and one on the server, or says which limit was reached.
    pub(crate) fn admit(&self, connection: Option<&ConnectionWatches>) -> Result<WatchSlots, Status> {
        let connection = match connection {
            Some(c) => Some(c.0.clone().try_acquire_owned().map_err(|_| {
                Status::resource_exhausted(format!(
                    "too many watches on this connection (limit {} per connection, \
                     --cds-max-grpc-watches-per-connection): open more connections or fewer watches",
                    self.max_watches_per_connection
                ))
            })?),
            None => None,
        };
        let server = self.server.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "too many gRPC watches on this server (limit {}, --cds-max-grpc-watches): try another replica",
                self.max_watches
            ))
        })?;
        Ok(WatchSlots { _connection: connection, _server: server })
    }
}
