//! Runs the standalone source: an initial load, then a rescan after every settled burst of
//! file events, each turned into index changes for the render loop.
//!
//! A rescan reads files and parses YAML, so it runs on a blocking thread: whatever the
//! directory holds, the CDS, its pongs and every endpoint keep answering. A rescan that could
//! not read everything for a passing reason (e.g. out of file descriptors) is repeated with
//! backoff, since no file event may come to ask again. When the directory itself is removed,
//! the last objects stay in force, `/readyz` fails and says why, and the directory is looked
//! for until it is back, then watched and read again.

use super::files::FileSource;
use super::manifests::Rescan;
use super::watcher;
use crate::admin::Readiness;
use crate::pipeline::Input;
use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The first pause before a failed rescan is repeated; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// How often a removed directory is looked for.
const GONE_POLL: Duration = Duration::from_millis(500);

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
    let mut follower = Follower { source: Some(source), reported: BTreeSet::new(), tx };
    let mut retry = follower.rescan().await.then_some(RETRY_FIRST);
    if follower.tx.send(Input::Synced).await.is_err() {
        return Ok(());
    }
    loop {
        match &mut watched {
            Some(w) => {
                let pause = retry.unwrap_or(Duration::MAX);
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    event = w.events.recv() => if event.is_none() { return Ok(()) },
                    _ = tokio::time::sleep(pause), if retry.is_some() => {}
                }
                if !w.is_current(&dir) {
                    tracing::warn!(dir = %dir.display(), "the manifest directory is gone; the last objects stay in force until it is back");
                    readiness.set_source_problem(Some(format!(
                        "the manifest directory {} is gone; serving the last configs",
                        dir.display()
                    )));
                    watched = None;
                    continue;
                }
            }
            None => {
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(GONE_POLL) => {}
                }
                match Watched::start(&dir) {
                    Ok(w) => watched = Some(w),
                    Err(_) => continue,
                }
                tracing::info!(dir = %dir.display(), "the manifest directory is back");
                readiness.set_source_problem(None);
                retry = None;
            }
        }
        retry = follower.rescan().await.then(|| retry.map_or(RETRY_FIRST, |r| (r * 2).min(RETRY_MAX)));
    }
}

/// The watch on the directory, and the directory it watches, held open: while held, its
/// inode cannot be reused, so a directory removed and created again is told apart from it.
struct Watched {
    _watcher: notify::RecommendedWatcher,
    events: mpsc::Receiver<()>,
    root: File,
}

impl Watched {
    fn start(dir: &Path) -> Result<Watched, WatchError> {
        let open = |source| WatchError::Open { dir: dir.to_path_buf(), source };
        let root = File::open(dir).map_err(open)?;
        if !root.metadata().map_err(open)?.is_dir() {
            return Err(WatchError::NotADirectory { dir: dir.to_path_buf() });
        }
        let (watcher, events) =
            watcher::watch(dir).map_err(|source| WatchError::Notify { dir: dir.to_path_buf(), source })?;
        Ok(Watched { _watcher: watcher, events, root })
    }

    /// Whether `dir` still is the directory being watched.
    fn is_current(&self, dir: &Path) -> bool {
        let (Ok(held), Ok(now)) = (self.root.metadata(), std::fs::metadata(dir)) else { return false };
        held.nlink() > 0 && (held.dev(), held.ino()) == (now.dev(), now.ino())
    }
}

struct Follower {
    /// Taken while a rescan runs on its blocking thread.
    source: Option<FileSource>,
    /// The problems logged after the last rescan: each is logged when it appears, not on
    /// every rescan while it lasts.
    reported: BTreeSet<String>,
    tx: mpsc::Sender<Input>,
}

impl Follower {
    /// Rescans and hands the changes on; returns whether to rescan again without a file
    /// event (something could not be read for a reason that may pass).
    async fn rescan(&mut self) -> bool {
        let mut source = self.source.take().expect("one rescan at a time");
        let (source, result) = tokio::task::spawn_blocking(move || {
            let result = source.rescan();
            // Parsing a changed file frees as much as it keeps (its YAML tree, the copies).
            if result.as_ref().is_ok_and(|(report, _)| !report.changed.is_empty()) {
                crate::memory::release_free_memory();
            }
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
                return true;
            }
        };
        self.report(problems(&report), tracing::Level::WARN);
        if !changes.is_empty() {
            tracing::info!(files = report.changed.len(), objects = changes.len(), "manifests changed");
            let _ = self.tx.send(Input::Changes(changes)).await;
        }
        report.incomplete()
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
    errors.chain(skipped).chain(unreadable).chain(dirs).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
