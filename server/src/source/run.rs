//! Runs the standalone source: an initial load, then a rescan after every settled burst of
//! file events, each turned into index changes for the render loop.

use super::files::FileSource;
use super::watcher;
use crate::reconcile::Input;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Loads the directory, reports the initial state as complete, then follows changes until
/// `shutdown`. Fails only if the directory cannot be watched.
pub async fn follow(
    mut source: FileSource,
    tx: mpsc::Sender<Input>,
    shutdown: CancellationToken,
) -> Result<(), String> {
    // Watch before the first scan, so a change made during the scan is not missed.
    let (_watcher, mut events) =
        watcher::watch(source.dir()).map_err(|e| format!("cannot watch {}: {e}", source.dir().display()))?;
    rescan(&mut source, &tx).await;
    if tx.send(Input::Synced).await.is_err() {
        return Ok(());
    }
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            event = events.recv() => match event {
                Some(()) => rescan(&mut source, &tx).await,
                None => return Ok(()),
            },
        }
    }
}

async fn rescan(source: &mut FileSource, tx: &mpsc::Sender<Input>) {
    let (report, changes) = match source.rescan() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(dir = %source.dir().display(), error = %e, "cannot read the manifest directory");
            return;
        }
    };
    for e in &report.errors {
        tracing::warn!("{e} (the file's last good content stays in force)");
    }
    for s in &report.skipped {
        tracing::warn!("{s}");
    }
    if !changes.is_empty() {
        tracing::info!(files = report.changed.len(), objects = changes.len(), "manifests changed");
        let _ = tx.send(Input::Changes(changes)).await;
    }
}
