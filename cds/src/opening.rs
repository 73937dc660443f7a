//! When the CDS starts answering. The daemon opens it at its first complete render: nothing is
//! served from an empty store (a dataplane told its Gateway is gone, or a 404, while the
//! manifests are still being read). Clients that arrive before are accepted at once and held,
//! unread, until then: after an operator restart a whole fleet reconnects together, and
//! leaving them in the kernel's accept queue would overflow it (those past its length wait for
//! the 1 s SYN retransmit, then for their own retry timers).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::watch;

/// Whether the CDS answers yet; cloned into every held connection.
#[derive(Debug, Clone)]
pub struct Opening {
    open: watch::Receiver<bool>,
    /// Connections waiting in [`Opening::wait`], shared by every clone.
    held: Arc<AtomicUsize>,
}

impl Opening {
    /// Open from the start (servers fed by hand: tests, benchmarks).
    pub(crate) fn now() -> Self {
        Opening { open: watch::channel(true).1, held: Arc::default() }
    }

    /// Opens when `event` completes; never, if it is dropped first. Spawns its waiter, so it
    /// must be called within a Tokio runtime.
    pub fn when(event: impl Future<Output = ()> + Send + 'static) -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            event.await;
            let _ = tx.send(true);
        });
        Opening { open: rx, held: Arc::default() }
    }

    /// Waits until open; `false` if it never will be (its event was dropped).
    pub(crate) async fn wait(&self) -> bool {
        let _held = Held::new(&self.held);
        self.open.clone().wait_for(|open| *open).await.is_ok()
    }

    /// How many accepted connections wait for the opening now: what a caller checks to know
    /// that clients reached the CDS and are held, not lost or answered.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// One connection counted in [`Opening::held`] while it lives.
struct Held<'a>(&'a AtomicUsize);

impl<'a> Held<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Held(count)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Default for Opening {
    fn default() -> Self {
        Opening::now()
    }
}
