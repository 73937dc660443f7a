//! Notices changes under a directory. Editors save in many ways (in place, by rename, by
//! delete and create); rather than interpret each event, any event asks for a rescan, once
//! the burst of events it belongs to has settled: no new event for [`QUIET`] and no file
//! written in it still open for writing (a shell's `>` truncates first and writes later: read
//! in between, the file would be empty and its objects deleted for a moment). A burst that goes
//! on is read [`SETTLE_MAX`] after its first event, at the next moment no file is open, and at
//! the latest [`OPEN_MAX`] after it, so a file written without pause is still read.
//!
//! Events reach this module a little after the writes that caused them: a burst can look
//! settled while the next write has already truncated its file. So the events are also
//! counted ([`Writes`]), as they come and as settled bursts cover them: a reader that finds
//! more events than the last settled burst covered knows a write began under it.

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The pause after which a burst of file events counts as settled: the events of one save
/// (truncate, writes, rename) come within microseconds of each other.
const QUIET: Duration = Duration::from_millis(3);
/// The longest a burst is waited for while no file written in it is open.
const SETTLE_MAX: Duration = Duration::from_millis(100);
/// The longest a burst is waited for at all (a file held open for writing).
pub const OPEN_MAX: Duration = Duration::from_secs(1);

/// A watched directory.
pub struct Watch {
    /// Dropping it stops watching.
    pub watcher: notify::RecommendedWatcher,
    /// Yields once per settled burst of changes.
    pub settled: mpsc::Receiver<()>,
    pub writes: Arc<Writes>,
}

/// File events counted: as they come, and as settled bursts cover them.
#[derive(Debug, Default)]
pub struct Writes {
    seen: AtomicU64,
    settled: AtomicU64,
}

impl Writes {
    /// Whether every event so far belongs to a settled burst: no write began since the last
    /// burst settled, so what was read after it is what the writers left.
    pub fn settled(&self) -> bool {
        self.seen.load(Ordering::Acquire) == self.settled.load(Ordering::Acquire)
    }
}

/// Where file events go: counted first, then settled.
#[derive(Clone)]
pub(super) struct Feed {
    raw: mpsc::UnboundedSender<Raw>,
    writes: Arc<Writes>,
}

impl Feed {
    pub(super) fn send(&self, raw: Raw) {
        self.count();
        self.deliver(raw);
    }

    /// Counts an event as seen, before it is delivered: at once, so that a rescan never
    /// looks uninterrupted while the event is on its way.
    pub(super) fn count(&self) {
        self.writes.seen.fetch_add(1, Ordering::AcqRel);
    }

    /// Delivers a counted event to the settling.
    pub(super) fn deliver(&self, raw: Raw) {
        let _ = self.raw.send(raw);
    }
}

/// Watches `dir`.
pub fn watch(dir: &Path) -> notify::Result<Watch> {
    let (feed, settled, writes) = settling();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let raw: fn(PathBuf) -> Raw = match event.kind {
            EventKind::Create(CreateKind::File) | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
                Raw::Written
            }
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => Raw::Closed,
            EventKind::Access(_) => return,
            _ => |_| Raw::Other,
        };
        for path in event.paths {
            feed.send(raw(path));
        }
    })?;
    watcher.watch(dir, RecursiveMode::Recursive)?;
    Ok(Watch { watcher, settled, writes })
}

/// A feed of file events, and what settles them into: one request per settled burst, and the
/// count of events.
pub(super) fn settling() -> (Feed, mpsc::Receiver<()>, Arc<Writes>) {
    let (raw_tx, raw_rx) = mpsc::unbounded_channel::<Raw>();
    let writes = Arc::new(Writes::default());
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(settle(raw_rx, tx, writes.clone()));
    (Feed { raw: raw_tx, writes: writes.clone() }, rx, writes)
}

/// One file event, as far as settling goes.
#[derive(Debug)]
pub(super) enum Raw {
    /// The file was created or its content changed: it may be open for writing.
    Written(PathBuf),
    /// The file was closed after writing.
    Closed(PathBuf),
    /// Anything else (a rename, a removal, a directory).
    Other,
}

/// Turns raw events into one request per settled burst, until either side is gone.
async fn settle(mut raw: mpsc::UnboundedReceiver<Raw>, tx: mpsc::Sender<()>, writes: Arc<Writes>) {
    // The files written in this burst and not closed yet.
    let mut open = HashSet::new();
    // The events taken so far.
    let mut taken = 0;
    while let Some(first) = raw.recv().await {
        taken += 1;
        let started = Instant::now();
        let (latest, hard) = (started + SETTLE_MAX, started + OPEN_MAX);
        let mut event = Some(first);
        while let Some(e) = event.take() {
            match e {
                Raw::Written(path) => {
                    open.insert(path);
                }
                Raw::Closed(path) => {
                    open.remove(&path);
                }
                Raw::Other => {}
            }
            // Past `latest`, the next moment no file is open ends the wait (a file rewritten
            // without pause is read between two writes, not in the middle of one).
            let until = if open.is_empty() { (Instant::now() + QUIET).min(latest) } else { hard };
            match tokio::time::timeout_at(until, raw.recv()).await {
                Ok(Some(next)) => {
                    taken += 1;
                    if Instant::now() < hard {
                        event = Some(next);
                    }
                }
                Ok(None) => return,
                Err(_) => {}
            }
        }
        open.clear();
        writes.settled.store(taken, Ordering::Release);
        // A full channel already holds a pending rescan request: nothing is lost.
        if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> (Feed, mpsc::Receiver<()>) {
        let (feed, settled, _) = settling();
        (feed, settled)
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_settles_after_a_few_quiet_milliseconds() {
        let (raw, mut settled) = start();
        let first = Instant::now();
        for _ in 0..3 {
            raw.send(Raw::Other);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        settled.recv().await.unwrap();
        assert_eq!(Instant::now() - first, Duration::from_millis(2) + QUIET, "the last event plus the quiet pause");
        assert!(settled.try_recv().is_err(), "one request for the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn events_without_pause_are_read_at_least_every_settle_max() {
        let (raw, mut settled) = start();
        let first = Instant::now();
        let mut requests = Vec::new();
        while Instant::now() - first < Duration::from_millis(500) {
            raw.send(Raw::Other);
            tokio::time::sleep(Duration::from_millis(1)).await;
            if settled.try_recv().is_ok() {
                requests.push(Instant::now() - first);
            }
        }
        assert!(requests.len() >= 4, "rescans at {requests:?}");
        assert!(requests[0] <= SETTLE_MAX + Duration::from_millis(1), "rescans at {requests:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_open_for_writing_is_waited_for_until_closed() {
        let (raw, mut settled) = start();
        let first = Instant::now();
        raw.send(Raw::Written("a.yaml".into())); // truncated by `>`
        tokio::time::sleep(QUIET * 10).await;
        assert!(settled.try_recv().is_err(), "not read while open for writing");
        raw.send(Raw::Written("a.yaml".into()));
        raw.send(Raw::Closed("a.yaml".into()));
        settled.recv().await.unwrap();
        assert_eq!(Instant::now() - first, QUIET * 10 + QUIET);
    }

    #[tokio::test(start_paused = true)]
    async fn the_count_tells_whether_an_event_came_after_the_last_settled_burst() {
        let (feed, mut settled, writes) = settling();
        assert!(writes.settled(), "nothing happened yet");
        feed.send(Raw::Other);
        assert!(!writes.settled(), "an event not settled yet");
        settled.recv().await.unwrap();
        assert!(writes.settled());
        feed.send(Raw::Written("a.yaml".into()));
        assert!(!writes.settled(), "a write began after the burst settled");
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_never_closed_is_read_after_open_max() {
        let (raw, mut settled) = start();
        let first = Instant::now();
        raw.send(Raw::Written("a.yaml".into()));
        settled.recv().await.unwrap();
        assert_eq!(Instant::now() - first, OPEN_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_rewritten_without_pause_is_read_between_two_writes() {
        let (raw, mut settled) = start();
        let first = Instant::now();
        // Each write: truncated and written at once, closed 1 ms later, the next 1 ms after.
        let mut read = None;
        while read.is_none() {
            raw.send(Raw::Written("a.yaml".into()));
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(settled.try_recv().is_err(), "read while open, {:?} in", Instant::now() - first);
            raw.send(Raw::Closed("a.yaml".into()));
            tokio::time::sleep(Duration::from_millis(1)).await;
            read = settled.try_recv().ok().map(|()| Instant::now() - first);
        }
        let read = read.unwrap();
        assert!(read >= SETTLE_MAX && read <= SETTLE_MAX + Duration::from_millis(2), "read {read:?} in");
    }
}
