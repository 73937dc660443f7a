//! Notices changes under a directory. Editors save in many ways (in place, by rename, by
//! delete and create); rather than interpret each event, any event asks for a rescan,
//! after a short pause that lets a burst of events settle.

use notify::{RecursiveMode, Watcher};
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a burst of file events may take before we rescan.
const SETTLE: Duration = Duration::from_millis(100);

/// Watches `dir`; the receiver yields once per settled burst of changes. Dropping the
/// returned watcher stops watching.
pub fn watch(dir: &Path) -> notify::Result<(notify::RecommendedWatcher, mpsc::Receiver<()>)> {
    let (raw_tx, mut raw_rx) = mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !e.kind.is_access()) {
            let _ = raw_tx.send(());
        }
    })?;
    watcher.watch(dir, RecursiveMode::Recursive)?;
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        while raw_rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while raw_rx.try_recv().is_ok() {}
            // A full channel already holds a pending rescan request: nothing is lost.
            if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                return;
            }
        }
    });
    Ok((watcher, rx))
}
