//! `/ui/events`: server-sent events telling an open page that what it shows changed, so its
//! script fetches the page again. An event carries no data of the operator's (only a
//! fingerprint), so the stream needs no masking.
//!
//! A stream wakes when a config or a status changes, and at least every [`TICK`] for what
//! nothing signals (a dataplane's acknowledgement, a client connecting); it sends an event
//! only when the fingerprint of the state changed (the client table's digest copies no
//! client, so a tick costs little with thousands of them). At most [`MAX_STREAMS`] are open at once:
//! each holds a connection and reads the whole state on every wake-up.

use super::Shared;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway_cds::api::Caller;
use stunner_gateway_cds::host::check_same_origin;
use stunner_gateway_cds::store::Scope;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Most event streams open at once.
pub const MAX_STREAMS: usize = 16;

/// Longest wait between two looks at the state.
pub const TICK: Duration = Duration::from_secs(1);

/// The open streams' permits.
pub struct Streams(Arc<Semaphore>);

impl Default for Streams {
    fn default() -> Self {
        Streams(Arc::new(Semaphore::new(MAX_STREAMS)))
    }
}

pub(super) async fn serve(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    // A page of another site must not learn when the operator's state changes.
    if let Err(cross_site) = check_same_origin(req.uri(), req.headers()) {
        return cross_site.into_response();
    }
    if let Err(refused) = shared.authorize(Caller::of(&req)).await {
        return refused;
    }
    let Ok(permit) = shared.streams.0.clone().try_acquire_owned() else {
        return stunner_gateway_cds::api::text_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many console event streams open",
        );
    };
    let follower = Follower {
        configs: shared.cds.store.subscribe_changes(),
        statuses: shared.console.statuses.subscribe(),
        shared,
        last: None,
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(follower, |mut f| async move {
        let fingerprint = f.next_change().await?;
        let event = Event::default().event("change").data(format!("{fingerprint:016x}"));
        Some((Ok::<_, std::convert::Infallible>(event), f))
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// One stream's view: what it last announced.
struct Follower {
    shared: Arc<Shared>,
    configs: tokio::sync::watch::Receiver<()>,
    statuses: tokio::sync::watch::Receiver<()>,
    last: Option<u64>,
    _permit: OwnedSemaphorePermit,
}

impl Follower {
    /// The next fingerprint that differs from the last one sent (the first at once); `None`
    /// once the server shuts down.
    async fn next_change(&mut self) -> Option<u64> {
        loop {
            let now = fingerprint(&self.shared);
            if self.last != Some(now) {
                self.last = Some(now);
                return Some(now);
            }
            tokio::select! {
                _ = self.shared.cds.shutdown.cancelled() => return None,
                _ = self.configs.changed() => {}
                _ = self.statuses.changed() => {}
                _ = tokio::time::sleep(TICK) => {}
            }
        }
    }
}

/// A digest of everything a page shows: config versions, statuses, the client table.
fn fingerprint(shared: &Shared) -> u64 {
    let mut h = DefaultHasher::new();
    for snapshot in shared.cds.store.list(&Scope::All) {
        (&snapshot.id, snapshot.version).hash(&mut h);
    }
    shared.console.statuses.generation().hash(&mut h);
    shared.cds.clients.digest().hash(&mut h);
    h.finish()
}
