//! When the CDS starts answering. The daemon opens it at its first complete render: nothing is
//! served from an empty store (a dataplane told its Gateway is gone, or a 404, while the
//! manifests are still being read). Clients that arrive before are accepted at once and held,
//! unread, until then: after an operator restart a whole fleet reconnects together, and
//! leaving them in the kernel's accept queue would overflow it (those past its length wait for
//! the 1 s SYN retransmit, then for their own retry timers).

use std::future::Future;
use tokio::sync::watch;

/// Whether the CDS answers yet; cloned into every held connection.
#[derive(Debug, Clone)]
pub struct Opening(watch::Receiver<bool>);

impl Opening {
    /// Open from the start (servers fed by hand: tests, benchmarks).
    pub(crate) fn now() -> Self {
        Opening(watch::channel(true).1)
    }

    /// Opens when `event` completes; never, if it is dropped first. Spawns its waiter, so it
    /// must be called within a Tokio runtime.
    pub fn when(event: impl Future<Output = ()> + Send + 'static) -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            event.await;
            let _ = tx.send(true);
        });
        Opening(rx)
    }

    /// Waits until open; `false` if it never will be (its event was dropped).
    pub(crate) async fn wait(&self) -> bool {
        self.0.clone().wait_for(|open| *open).await.is_ok()
    }
}

impl Default for Opening {
    fn default() -> Self {
        Opening::now()
    }
}
