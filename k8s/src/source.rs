//! The cluster source: one kube-runtime watcher per kind of the index's kind table, each feeding the
//! render loop through its [`Tracker`], and `Input::Synced` once every watcher has completed
//! its first list (design.md §4.4: nothing is served from half a cluster).
//!
//! Watch errors (a lost connection, a missing CRD, RBAC) are logged and retried with
//! kube-runtime's default backoff; they never end the process. Until a kind's first list
//! succeeds the operator stays unsynced and serves nothing, which is the point.
//!
//! The Gateway API kinds served in more than one version (routes, ReferenceGrant) are watched
//! through the version `served` says, switching when it changes ([`follow_served`]): one watch
//! of one kind at a time, whose objects the index keeps across the switch (the same objects,
//! seen again).

use super::served::{Recheck, Served};
use super::translate::Tracker;
use futures_util::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use stunner_gateway::index::{Input, Kind, KindVisitor, Resource, Wire};
use stunner_gateway::keys::{OWNED_BY_LABEL, OWNED_BY_VALUE};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Which optional watches to run.
#[derive(Debug, Clone)]
pub(crate) struct SourceOptions {
    /// Watch Endpoints instead of EndpointSlices (`--disable-endpontslice-controller`).
    pub(crate) endpoints: bool,
    /// The served versions of the versioned route kinds, as `served::follow` keeps them.
    pub(crate) served: watch::Receiver<Served>,
    /// Where a versioned kind's watch asks discovery to look again.
    pub(crate) recheck: Recheck,
}

/// Starts the watchers; they run until `shutdown`.
pub(crate) fn spawn(
    client: &Client,
    options: SourceOptions,
    tx: mpsc::Sender<Input>,
    shutdown: CancellationToken,
) -> JoinSet<()> {
    let mut w = Watchers { client: client.clone(), tx, shutdown, tasks: JoinSet::new(), kinds: Vec::new() };
    for &kind in Kind::ALL {
        if Served::is_versioned(kind) {
            w.add_served(kind, options.served.clone(), options.recheck.clone());
        } else if let Some(config) = watch_config(kind, &options) {
            kind.visit(AddWatcher { watchers: &mut w, config });
        }
    }
    w.start()
}

/// Which objects of `kind` to watch; `None`: the kind is not watched with these options.
fn watch_config(kind: Kind, options: &SourceOptions) -> Option<watcher::Config> {
    let all = watcher::Config::default();
    Some(match kind {
        Kind::Endpoints if !options.endpoints => return None,
        Kind::EndpointSlice if options.endpoints => return None,
        // The dataplanes of ours only: every other Deployment or DaemonSet is none of the
        // operator's business.
        Kind::Deployment | Kind::DaemonSet => all.labels(&format!("{OWNED_BY_LABEL}={OWNED_BY_VALUE}")),
        // Helm keeps every release in a Secret, often the largest objects of a cluster; no
        // Gateway or GatewayConfig can sensibly refer to one.
        Kind::Secret => all.fields("type!=helm.sh/release.v1"),
        _ => all,
    })
}

/// Adds the watcher of one kind, with its Rust type.
struct AddWatcher<'a> {
    watchers: &'a mut Watchers,
    config: watcher::Config,
}

impl KindVisitor for AddWatcher<'_> {
    type Output = ();

    fn visit<K: Wire>(self, kind: Kind) {
        self.watchers.add::<K>(kind, self.config);
    }
}

/// Collects the watches to run, so the sync barrier knows how many to wait for.
struct Watchers {
    client: Client,
    tx: mpsc::Sender<Input>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
    kinds: Vec<Box<dyn FnOnce(Barrier) -> futures_util::future::BoxFuture<'static, ()> + Send>>,
}

impl Watchers {
    fn add<K: Wire>(&mut self, kind: Kind, config: watcher::Config) {
        let api = Api::<K>::all(self.client.clone());
        let feed = Feed { tx: self.tx.clone(), shutdown: self.shutdown.clone() };
        self.kinds.push(Box::new(move |barrier| Box::pin(follow(api, config, kind, feed, barrier))));
    }

    fn add_served(&mut self, kind: Kind, served: watch::Receiver<Served>, recheck: Recheck) {
        let client = self.client.clone();
        let feed = Feed { tx: self.tx.clone(), shutdown: self.shutdown.clone() };
        let run = move |barrier| follow_served(client, kind, served, recheck, feed, barrier);
        self.kinds.push(Box::new(move |barrier| Box::pin(run(barrier))));
    }

    fn start(mut self) -> JoinSet<()> {
        let barrier = Barrier { remaining: Arc::new(AtomicUsize::new(self.kinds.len())), tx: self.tx };
        for run in self.kinds {
            self.tasks.spawn(run(barrier.clone()));
        }
        self.tasks
    }
}

/// Sends `Input::Synced` when the last watcher completes its first list. Each watcher sends
/// its changes before it arrives here, so the render loop has every kind when it syncs.
#[derive(Clone)]
struct Barrier {
    remaining: Arc<AtomicUsize>,
    tx: mpsc::Sender<Input>,
}

impl Barrier {
    async fn arrive(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            tracing::info!("initial sync of every watched kind complete");
            let _ = self.tx.send(Input::Synced).await;
        }
    }
}

/// Where one watcher's changes go.
struct Feed {
    tx: mpsc::Sender<Input>,
    shutdown: CancellationToken,
}

async fn follow<K: Wire>(api: Api<K>, config: watcher::Config, kind: Kind, feed: Feed, barrier: Barrier) {
    let mut tracker = Tracker::new(kind);
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    // Whether this watcher has counted itself in at the barrier (once only).
    let mut arrived = false;
    loop {
        let event = tokio::select! {
            _ = feed.shutdown.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            None => return,
            Some(Err(e)) if is_not_served(&e) => {
                // A CRD that is not installed must not hold every other kind hostage: the
                // kind counts as empty until its CRD appears (the watcher keeps retrying).
                if !arrived {
                    tracing::warn!(
                        ?kind,
                        "the API server does not serve this kind (is its CRD installed?); treating it as empty until it does"
                    );
                    arrived = true;
                    barrier.arrive().await;
                }
            }
            Some(Err(e)) => tracing::warn!(?kind, error = %watch_error(&e), "watch failed; retrying"),
            Some(Ok(event)) => {
                let step = tracker.handle(event);
                if !step.changes.is_empty() && feed.tx.send(Input::Changes(step.changes)).await.is_err() {
                    return;
                }
                if step.first_sync && !std::mem::replace(&mut arrived, true) {
                    tracing::debug!(?kind, "initial list complete");
                    barrier.arrive().await;
                }
            }
        }
    }
}

/// Follows a versioned kind: watches it through the version `served` names, switching (with
/// the same [`Tracker`], so a relist of the same objects through the other version changes
/// nothing) when that changes, and deleting what the index holds of it when it stops being
/// served. Counts itself in at the barrier after its first list, or at once when not served.
async fn follow_served(
    client: Client,
    kind: Kind,
    mut served: watch::Receiver<Served>,
    recheck: Recheck,
    feed: Feed,
    barrier: Barrier,
) {
    let mut tracker = Tracker::new(kind);
    let mut arrived = false;
    loop {
        let api = {
            let now = served.borrow_and_update();
            now.version(kind).map(|_| now.api(kind))
        };
        let Some(api) = api else {
            let gone = tracker.forget_all();
            if !gone.is_empty() && feed.tx.send(Input::Changes(gone)).await.is_err() {
                return;
            }
            if !std::mem::replace(&mut arrived, true) {
                tracing::info!(?kind, "the API server does not serve this kind: not watching it");
                barrier.arrive().await;
            }
            tokio::select! {
                _ = feed.shutdown.cancelled() => return,
                changed = served.changed() => if changed.is_err() { return },
            }
            continue;
        };
        tracing::debug!(?kind, version = %api.version, "watching");
        let events = watcher(Api::<DynamicObject>::all_with(client.clone(), &api), watcher::Config::default());
        let mut events = std::pin::pin!(events.default_backoff());
        // Failures in a row: a version that went fails a watch or two before discovery, asked
        // at once, says so; only a failure that outlasts that is worth a warning.
        let mut failures = 0u32;
        loop {
            let event = tokio::select! {
                _ = feed.shutdown.cancelled() => return,
                changed = served.changed() => if changed.is_err() { return } else { break },
                event = events.next() => event,
            };
            match event {
                None => return,
                Some(Err(e)) => {
                    // The version may have stopped being served: discovery decides, at once.
                    recheck.request();
                    failures += 1;
                    if failures > 2 {
                        tracing::warn!(?kind, error = %e, "watch failed; retrying");
                    } else {
                        tracing::debug!(?kind, error = %e, "watch failed; asking discovery again");
                    }
                }
                Some(Ok(event)) => {
                    failures = 0;
                    let Some(event) = decoded(kind, event) else { continue };
                    let step = tracker.handle(event);
                    if !step.changes.is_empty() && feed.tx.send(Input::Changes(step.changes)).await.is_err() {
                        return;
                    }
                    if step.first_sync && !std::mem::replace(&mut arrived, true) {
                        barrier.arrive().await;
                    }
                }
            }
        }
    }
}

/// A watch event of `kind` read through a dynamic API, decoded as the kind table decodes it;
/// `None` for an object that does not decode (logged; the API server validated it against the
/// same schema, so this is a bug, not a user's error).
fn decoded(kind: Kind, event: watcher::Event<DynamicObject>) -> Option<watcher::Event<Resource>> {
    let decode = |obj: DynamicObject| {
        let value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
        kind.decode(value).map_err(|e| e.to_string())
    };
    let object =
        |obj| decode(obj).inspect_err(|e| tracing::warn!(?kind, error = %e, "cannot read an object; ignoring it"));
    Some(match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(object(o).ok()?),
        watcher::Event::Delete(o) => watcher::Event::Delete(object(o).ok()?),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(object(o).ok()?),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}

/// Whether a watch failed because the API server does not know the resource (404 on the
/// initial list: the CRD is not installed).
fn is_not_served(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404)
}

/// A watch's error as logged: an object that fails to decode makes serde quote the value it
/// could not take, which may be a secret's: values are dropped (`resources::redact`).
pub(crate) fn watch_error(e: &watcher::Error) -> String {
    stunner_gateway::resources::redact::without_values(&e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn synced_is_sent_once_the_last_watcher_has_listed() {
        let (tx, mut rx) = mpsc::channel(4);
        let barrier = Barrier { remaining: Arc::new(AtomicUsize::new(2)), tx };
        barrier.arrive().await;
        assert!(rx.try_recv().is_err(), "one watcher still listing");
        barrier.clone().arrive().await;
        assert!(matches!(rx.try_recv(), Ok(Input::Synced)));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn only_a_404_on_the_initial_list_means_not_served() {
        let api = |code| kube::Error::Api(kube::core::Status::failure("x", "NotFound").with_code(code).boxed());
        assert!(is_not_served(&watcher::Error::InitialListFailed(api(404))));
        assert!(!is_not_served(&watcher::Error::InitialListFailed(api(403))));
        assert!(!is_not_served(&watcher::Error::WatchFailed(api(404))));
    }

    /// A GatewayConfig the API server holds with a numeric password (a CRD installed without
    /// its schema) fails to decode: the log names the type, not the value.
    #[test]
    fn a_watch_error_quotes_no_value() {
        let body = r#"{"apiVersion":"stunner.l7mp.io/v1","kind":"GatewayConfig","metadata":{"name":"c"},"spec":{"password":987654321012}}"#;
        let decode = serde_json::from_str::<stunner_gateway::resources::GatewayConfig>(body).unwrap_err();
        let e = watcher::Error::InitialListFailed(kube::Error::SerdeError(decode));
        assert!(e.to_string().contains("987654321012"), "serde quotes it: {e}");
        let logged = watch_error(&e);
        assert!(!logged.contains("987654321012") && logged.contains("invalid type: integer <redacted>"), "{logged}");
    }
}
