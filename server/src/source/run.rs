//! Runs the standalone source: an initial load, then a rescan after every settled burst of
//! file events, each turned into index changes for the render loop.
//!
//! A rescan reads files and parses YAML, so it runs on a blocking thread: whatever the
//! directory holds, the CDS, its pongs and every endpoint keep answering. A rescan that could
//! not read everything for a passing reason (e.g. out of file descriptors) is repeated with
//! backoff, since no file event may come to ask again. A rescan under which a write began (the
//! file may have been read truncated, between an in-place writer's truncate and its write) is
//! not handed on: its changes wait for the rescan after that write settles, which is handed on
//! with them, so a burst of in-place rewrites never serves a half-written file's state (a
//! Gateway withdrawn for a moment) and is rendered once when it ends. A file found without any
//! of the objects it held is believed only once it has stayed so for [`EMPTIED_CONFIRM`]: an
//! in-place writer empties its file as it opens it, and the kernel reports that only once the
//! truncate is done, so a rescan can read the empty file before any event says a write began
//! (measured, BENCHMARKS.md: 1,000 in-place rewrites in 1 s by a busy writer on a loaded
//! machine withdrew the Gateway and put it back 1 to 3 times in each of 6 bursts). Rescans
//! interrupted without pause are handed on after [`INTERRUPTED_MAX`] all the same, so a file
//! rewritten forever is still served. When the directory itself is removed, the last objects
//! stay in force, `/readyz` fails and says why, and the directory is looked for until it is
//! back, then watched and read again.

use super::files::FileSource;
use super::manifests::Rescan;
use super::watcher::{self, Writes};
use crate::admin::Readiness;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stunner_gateway::index::{Change, Held, Input, ObjRef};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The first pause before a failed rescan is repeated; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// How often a removed directory is looked for.
const GONE_POLL: Duration = Duration::from_millis(500);
/// How long rescans may be interrupted before one is handed on all the same: a file rewritten
/// without pause is served (what it was read as), later than its events settle ([`watcher::OPEN_MAX`]).
const INTERRUPTED_MAX: Duration = Duration::from_secs(2);
/// How long a file must stay without the objects it held before their removal is handed on:
/// as long as a burst waits for a file open for writing ([`watcher::OPEN_MAX`]). A writer that
/// emptied the file to write it again writes within it, and its events bring the rescan that
/// reads what it wrote.
const EMPTIED_CONFIRM: Duration = watcher::OPEN_MAX;

/// Why the directory cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot watch {}", dir.display())]
    Open {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot watch {}: not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("cannot watch {}", dir.display())]
    Notify {
        dir: PathBuf,
        #[source]
        source: notify::Error,
    },
}

/// Loads the directory, reports the initial state as complete, then follows changes until
/// `shutdown`. Fails only if the directory cannot be watched at start-up.
pub async fn follow(
    source: FileSource,
    tx: mpsc::Sender<Input>,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), WatchError> {
    let dir = source.dir().to_path_buf();
    // Watch before the first scan, so a change made during the scan is not missed.
    let mut watched = Some(Watched::start(&dir)?);
    let mut follower = Follower::new(source, tx);
    let mut retry = None;
    let mut synced = false;
    loop {
        if let Some(w) = &watched {
            let scan = follower.rescan(&w.watch.writes).await;
            retry = match scan {
                Scan::Complete => None,
                Scan::Incomplete => Some(retry.map_or(RETRY_FIRST, |r: Duration| (r * 2).min(RETRY_MAX))),
                Scan::Interrupted => retry,
                Scan::Held(left) => Some(left),
            };
            // The initial state is complete once a rescan of it was handed on.
            if !synced && !matches!(scan, Scan::Interrupted | Scan::Held(_)) {
                if follower.tx.send(Input::Synced).await.is_err() {
                    return Ok(());
                }
                synced = true;
            }
        }
        match &mut watched {
            Some(w) => {
                let pause = retry.unwrap_or(Duration::MAX);
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    event = w.watch.settled.recv() => if event.is_none() { return Ok(()) },
                    _ = tokio::time::sleep(pause), if retry.is_some() => {}
                }
                if !w.is_current(&dir) {
                    tracing::warn!(dir = %dir.display(), "the manifest directory is gone; the last objects stay in force until it is back");
                    readiness.set_source_problem(Some(format!(
                        "the manifest directory {} is gone; serving the last configs",
                        dir.display()
                    )));
                    watched = None;
                }
            }
            None => {
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(GONE_POLL) => {}
                }
                if let Ok(w) = Watched::start(&dir) {
                    watched = Some(w);
                    tracing::info!(dir = %dir.display(), "the manifest directory is back");
                    readiness.set_source_problem(None);
                    retry = None;
                }
            }
        }
    }
}

/// The watch on the directory, and the directory it watches, held open: while held, its
/// inode cannot be reused, so a directory removed and created again is told apart from it.
struct Watched {
    watch: watcher::Watch,
    root: File,
}

impl Watched {
    fn start(dir: &Path) -> Result<Watched, WatchError> {
        let open = |source| WatchError::Open { dir: dir.to_path_buf(), source };
        let root = File::open(dir).map_err(open)?;
        if !root.metadata().map_err(open)?.is_dir() {
            return Err(WatchError::NotADirectory { dir: dir.to_path_buf() });
        }
        let watch = watcher::watch(dir).map_err(|source| WatchError::Notify { dir: dir.to_path_buf(), source })?;
        Ok(Watched { watch, root })
    }

    /// Whether `dir` still is the directory being watched.
    fn is_current(&self, dir: &Path) -> bool {
        let (Ok(held), Ok(now)) = (self.root.metadata(), std::fs::metadata(dir)) else { return false };
        held.nlink() > 0 && (held.dev(), held.ino()) == (now.dev(), now.ino())
    }
}

/// What a rescan came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Everything was read and its changes handed on.
    Complete,
    /// Handed on, but something could not be read for a reason that may pass: worth
    /// repeating without a file event.
    Incomplete,
    /// A write began under it: its changes wait for the rescan after that write settles.
    Interrupted,
    /// A file lost all its objects less than [`EMPTIED_CONFIRM`] ago: the changes wait for a
    /// rescan when the time left has passed (or after the next write).
    Held(Duration),
}

struct Follower {
    /// Taken while a rescan runs on its blocking thread.
    source: Option<FileSource>,
    /// The problems logged after the last rescan: each is logged when it appears, not on
    /// every rescan while it lasts.
    reported: BTreeSet<String>,
    tx: mpsc::Sender<Input>,
    /// The changes of interrupted rescans, not handed on yet (the source counts them as
    /// applied: the next rescan's changes are relative to them).
    withheld: Vec<Change>,
    /// Since when rescans have been interrupted without one handed on.
    interrupted_since: Option<Instant>,
    /// The files that hold none of the objects they held, since when (see [`EMPTIED_CONFIRM`]).
    emptied: BTreeMap<PathBuf, Instant>,
    /// The objects last reported held at their last valid version.
    held: Vec<Held>,
}

impl Follower {
    fn new(source: FileSource, tx: mpsc::Sender<Input>) -> Self {
        Follower {
            source: Some(source),
            reported: BTreeSet::new(),
            tx,
            withheld: Vec::new(),
            interrupted_since: None,
            emptied: BTreeMap::new(),
            held: Vec::new(),
        }
    }

    /// Rescans and hands the changes on, unless a write began under the rescan (`writes`).
    async fn rescan(&mut self, writes: &Writes) -> Scan {
        let mut source = self.source.take().expect("one rescan at a time");
        let (source, result) = tokio::task::spawn_blocking(move || {
            let result = source.rescan();
            (source, result)
        })
        .await
        .expect("a rescan does not panic");
        let dir = source.dir().display().to_string();
        self.source = Some(source);
        let (report, changes) = match result {
            Ok(r) => r,
            Err(e) => {
                self.report(vec![format!("cannot read the manifest directory {dir}: {e}")], tracing::Level::ERROR);
                return Scan::Incomplete;
            }
        };
        self.withhold(changes);
        let now = Instant::now();
        // A changed file is no longer emptied, unless it still is: then since when it was. Two
        // passes, not a search of `emptied` per changed file (thousands of files may change).
        let still_emptied: Vec<_> =
            report.emptied.iter().map(|p| (p.clone(), self.emptied.get(p).copied().unwrap_or(now))).collect();
        for path in &report.changed {
            self.emptied.remove(path);
        }
        self.emptied.extend(still_emptied);
        if !writes.settled() {
            let since = *self.interrupted_since.get_or_insert(now);
            if now - since < INTERRUPTED_MAX {
                tracing::debug!(dir, "a write began while the manifests were read; waiting for it to settle");
                return Scan::Interrupted;
            }
        }
        self.interrupted_since = None;
        let left = |since: &Instant| (*since + EMPTIED_CONFIRM).saturating_duration_since(now);
        if let Some(left) = self.emptied.values().map(left).max().filter(|l| !l.is_zero()) {
            let files: Vec<_> = self.emptied.keys().map(|p| p.display().to_string()).collect();
            tracing::debug!(?files, ?left, "files lost all their objects; waiting to see them stay so");
            return Scan::Held(left);
        }
        self.emptied.clear();
        // Problems of an interrupted rescan may be the half-written file's: only these count.
        self.report(problems(&report), tracing::Level::WARN);
        let changes = std::mem::take(&mut self.withheld);
        if !changes.is_empty() {
            tracing::info!(files = report.changed.len(), objects = changes.len(), "manifests changed");
            let _ = self.tx.send(Input::Changes(changes)).await;
        }
        self.report_held().await;
        if report.incomplete() { Scan::Incomplete } else { Scan::Complete }
    }

    /// Says which objects are held at their last valid version, when that changed: each newly
    /// held one at WARN with where the invalid edit is, each released at INFO, and the list to
    /// the render loop (statuses, metric).
    async fn report_held(&mut self) {
        let source = self.source.as_ref().expect("not rescanning");
        let held: Vec<Held> = source
            .held()
            .iter()
            .map(|(object, at)| Held { object: object.clone(), why: format!("invalid edit at {at}") })
            .collect();
        if held == self.held {
            return;
        }
        let name = |h: &Held| format!("{} {}", h.object.kind.api().kind, h.object.key);
        for h in held.iter().filter(|h| !self.held.contains(h)) {
            tracing::warn!("{}: held at its last valid version: {}", name(h), h.why);
        }
        for h in self.held.iter().filter(|h| !held.iter().any(|n| n.object == h.object)) {
            tracing::info!("{}: no longer held at an older version", name(h));
        }
        self.held = held.clone();
        let _ = self.tx.send(Input::Held(held)).await;
    }

    /// Adds a rescan's changes to those not handed on yet; a later change of an object
    /// replaces an earlier one.
    fn withhold(&mut self, changes: Vec<Change>) {
        if self.withheld.is_empty() {
            self.withheld = changes;
            return;
        }
        let by_object: BTreeMap<ObjRef, Change> =
            self.withheld.drain(..).chain(changes).map(|c| (c.seen().0, c)).collect();
        self.withheld = by_object.into_values().collect();
    }

    /// Logs the problems that are new since the last rescan.
    fn report(&mut self, problems: Vec<String>, level: tracing::Level) {
        let current: BTreeSet<String> = problems.into_iter().collect();
        for p in current.difference(&self.reported) {
            if level == tracing::Level::ERROR {
                tracing::error!("{p}");
            } else {
                tracing::warn!("{p}");
            }
        }
        self.reported = current;
    }
}

/// Every problem of a rescan, one line each, naming its file or directory.
fn problems(report: &Rescan) -> Vec<String> {
    let errors = report.errors.iter().map(|e| format!("{e} (the file's last good content stays in force)"));
    let skipped = report.skipped.iter().map(ToString::to_string);
    let unreadable = report
        .unreadable
        .iter()
        .map(|(path, e)| format!("{}: {e}; skipped (its last good content stays in force)", path.display()));
    let dirs = report.skipped_dirs.iter().map(|(path, e)| {
        format!("{}: {e}; directory skipped (the files last read there stay in force)", path.display())
    });
    let refused =
        report.refused.iter().map(|e| format!("{e}: the scan is refused, the last good state stays in force"));
    errors.chain(skipped).chain(unreadable).chain(dirs).chain(refused).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::OperatorMetrics;
    use crate::pipeline::{ConfigSink, Outputs, standalone::Standalone};
    use crate::reconcile::Reconciler;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use stunner_gateway::cds::ConfigId;
    use stunner_gateway::config::StunnerConfig;
    use stunner_gateway::render::RenderSettings;
    use stunner_gateway_cds::{CdsMetrics, ConfigStore, Version};
    use stunner_gateway_k8s::nodes::NodeFeed;
    use watcher::Raw;

    /// The CDS store, counting the configs withdrawn.
    struct Withdrawals {
        store: ConfigStore,
        deleted: AtomicUsize,
    }

    impl ConfigSink for Withdrawals {
        fn upsert(&self, config: StunnerConfig) -> Option<Version> {
            self.store.upsert(config)
        }

        fn delete(&self, id: &ConfigId) -> bool {
            self.deleted.fetch_add(1, Ordering::Relaxed);
            self.store.delete(id)
        }
    }

    /// A fresh directory named `name` holding the quickstart; the path and text of its
    /// GatewayConfig's file.
    fn quickstart_dir(name: &str) -> (PathBuf, PathBuf, String) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/quickstart");
        for f in ["gatewayclass.yaml", "gateway.yaml", "route.yaml"] {
            std::fs::copy(quickstart.join(f), dir.join(f)).unwrap();
        }
        let path = dir.join("gatewayclass.yaml");
        let class = std::fs::read_to_string(&path).unwrap();
        (dir, path, class)
    }

    /// 1,000 in-place rewrites of the GatewayConfig's file in 1 s, each seen the way a loaded
    /// machine sees it: the file is truncated before the previous write's close event is taken
    /// (a burst past `SETTLE_MAX` settles on that close, and its rescan reads the empty file),
    /// and the truncate's own event comes after. The rescans that read a half-written file are
    /// not handed on: the Gateway is never withdrawn, and the burst is rendered once, when it
    /// settles. Before, each such rescan withdrew the Gateway's config and the next put it
    /// back, three renders each.
    #[tokio::test(start_paused = true)]
    async fn a_burst_of_in_place_rewrites_never_serves_a_half_written_file_and_renders_once() {
        let (dir, path, class) = quickstart_dir("run-burst");

        let sink =
            Arc::new(Withdrawals { store: ConfigStore::new(CdsMetrics::default()), deleted: AtomicUsize::new(0) });
        let metrics = OperatorMetrics::default();
        let outputs = Outputs {
            store: sink.clone(),
            statuses: Arc::default(),
            metrics: metrics.clone(),
            readiness: Readiness::default(),
            mode: Box::new(Standalone::default()),
            nodes: NodeFeed::new(Arc::default()),
        };
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(Reconciler::new(RenderSettings::default(), Duration::from_millis(250), outputs).run(rx));
        let (feed, mut settled, writes) = watcher::settling();
        let mut follower = Follower::new(FileSource::new(&dir).unwrap(), tx);
        assert_eq!(follower.rescan(&writes).await, Scan::Complete);
        follower.tx.send(Input::Synced).await.unwrap();
        let password = || {
            let id = ConfigId::new("stunner", "udp-gateway");
            sink.store.get(&id).map(|s| s.config.auth.credentials.get("password").cloned().unwrap_or_default())
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(password().as_deref(), Some("pass-1"));
        let before = metrics.render.get();

        // Followed as `follow` does: a rescan per settled burst.
        let rescans = Arc::new(AtomicUsize::new(0));
        let counted = rescans.clone();
        tokio::spawn(async move {
            while settled.recv().await.is_some() {
                follower.rescan(&writes).await;
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        for i in 0..1000 {
            std::fs::write(&path, "").unwrap();
            feed.count();
            if i > 0 {
                feed.send(Raw::Closed(path.clone()));
            }
            tokio::task::yield_now().await;
            feed.deliver(Raw::Written(path.clone()));
            // The clock stands still while a rescan reads.
            tokio::time::sleep(Duration::from_millis(1)).await;
            std::fs::write(&path, class.replace("\"pass-1\"", &format!("\"burst-{i}\""))).unwrap();
        }
        feed.send(Raw::Closed(path.clone()));
        tokio::time::sleep(Duration::from_secs(1)).await;

        assert_eq!(password().as_deref(), Some("burst-999"));
        assert_eq!(sink.deleted.load(Ordering::Relaxed), 0, "the Gateway was withdrawn during the burst");
        let rescans = rescans.load(Ordering::Relaxed);
        assert!((10..=12).contains(&rescans), "one rescan per SETTLE_MAX and the last: {rescans}");
        assert_eq!(metrics.render.get() - before, 1, "rendered once, when the burst settled");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What the burst above cannot show: the kernel reports a truncate only once it is done, so
    /// a rescan can read a file its writer emptied before any event says that a write began.
    /// Its objects are not removed on that sight; the write comes, and what it wrote is handed
    /// on. A file that stays empty loses its objects once it has stayed so for
    /// `EMPTIED_CONFIRM`.
    #[tokio::test(start_paused = true)]
    async fn a_file_read_empty_loses_its_objects_only_once_it_stays_empty() {
        let (dir, path, class) = quickstart_dir("run-emptied");
        let (tx, mut rx) = mpsc::channel(8);
        let (_feed, _settled, writes) = watcher::settling();
        let mut follower = Follower::new(FileSource::new(&dir).unwrap(), tx);
        let mut handed_on = move || match rx.try_recv() {
            Ok(Input::Changes(changes)) => Some(changes),
            Ok(_) => panic!("only changes are handed on"),
            Err(_) => None,
        };
        assert_eq!(follower.rescan(&writes).await, Scan::Complete);
        assert_eq!(handed_on().map(|c| c.len()), Some(6), "the quickstart's objects");

        // Emptied by an in-place writer that has not written yet, and no event of it so far.
        std::fs::write(&path, "").unwrap();
        assert_eq!(follower.rescan(&writes).await, Scan::Held(EMPTIED_CONFIRM));
        assert!(handed_on().is_none(), "nothing removed on the first sight of an empty file");
        std::fs::write(&path, class.replace("\"pass-1\"", "\"pass-2\"")).unwrap();
        assert_eq!(follower.rescan(&writes).await, Scan::Complete);
        let changes = handed_on().expect("what the writer wrote is handed on");
        assert_eq!(changes.len(), 3, "the file's three objects");
        assert!(changes.iter().all(|c| matches!(c, Change::Apply(_))), "and none removed: {changes:?}");

        // Emptied for good.
        std::fs::write(&path, "").unwrap();
        assert_eq!(follower.rescan(&writes).await, Scan::Held(EMPTIED_CONFIRM));
        tokio::time::sleep(EMPTIED_CONFIRM / 2).await;
        assert_eq!(follower.rescan(&writes).await, Scan::Held(EMPTIED_CONFIRM / 2), "still empty, not long enough");
        assert!(handed_on().is_none());
        tokio::time::sleep(EMPTIED_CONFIRM / 2).await;
        assert_eq!(follower.rescan(&writes).await, Scan::Complete);
        let changes = handed_on().expect("the removal is handed on");
        assert_eq!(changes.len(), 3);
        assert!(changes.iter().all(|c| matches!(c, Change::Delete(_))), "{changes:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_that_cannot_be_watched_keeps_the_cause() {
        let missing = std::env::temp_dir().join(format!("run-watch-missing-{}", std::process::id()));
        let err = Watched::start(&missing).err().expect("a missing directory cannot be watched");
        assert_eq!(err.to_string(), format!("cannot watch {}", missing.display()));
        let cause = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(cause.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound), "{err:?}");

        let file = std::env::temp_dir().join(format!("run-watch-file-{}", std::process::id()));
        std::fs::write(&file, "").unwrap();
        let err = Watched::start(&file).err().expect("a file is not a directory");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(err.to_string(), format!("cannot watch {}: not a directory", file.display()));
    }
}
