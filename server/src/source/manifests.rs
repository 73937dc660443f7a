//! The manifests of a directory, loaded by the core's one loader ([`manifest::load`]) and kept
//! per file, so the last good content of a file stays in force when an edit breaks it.

use super::scan::{self, SkippedDir, Unreadable};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use stunner_gateway::index::Resource;
use stunner_gateway::manifest::{self, Admission, LoadError, Origin, Skipped};

/// The objects of every manifest file, by file: the last content of each file that loaded.
#[derive(Debug, Default)]
pub struct ManifestSet {
    files: BTreeMap<PathBuf, FileState>,
}

/// A file's objects are shared (`Arc`) with what the file source last applied: one copy of
/// each object, not two. A `Resource` is as large as its largest kind (a Deployment, ~2.5 KiB
/// inline), so with 1,000 Gateways (4,003 objects) the second copy, a map of them, held ~18 MiB
/// of the operator's heap, and each EndpointSlice's endpoints once more.
#[derive(Debug)]
struct FileState {
    text: String,
    objects: Vec<(Origin, Arc<Resource>)>,
}

/// What a rescan found.
#[derive(Debug, Default)]
pub struct Rescan {
    /// Files whose objects changed (added, edited or removed files).
    pub changed: Vec<PathBuf>,
    /// Files that failed to load; their last good content was kept.
    pub errors: Vec<LoadError>,
    /// Documents skipped in the files that changed.
    pub skipped: Vec<Skipped>,
    /// Manifest files that could not be read; their last good content was kept.
    pub unreadable: Vec<(PathBuf, Unreadable)>,
    /// Subdirectories that could not be walked; the files last read there were kept.
    pub skipped_dirs: Vec<(PathBuf, SkippedDir)>,
}

impl Rescan {
    /// Whether something could not be read for a reason that may go away by itself (e.g. out
    /// of file descriptors): the rescan is worth repeating without a file event.
    pub fn incomplete(&self) -> bool {
        self.unreadable.iter().any(|(_, e)| e.is_transient())
            || self.skipped_dirs.iter().any(|(_, e)| matches!(e, SkippedDir::Io(_)))
    }
}

impl ManifestSet {
    /// Re-reads every manifest under `dir` (recursively); only files whose text changed are
    /// loaded again. Fails only if `dir` itself cannot be listed.
    pub fn rescan(&mut self, dir: &Path) -> std::io::Result<Rescan> {
        let listing = scan::list(dir)?;
        let mut result = Rescan { skipped_dirs: listing.skipped_dirs, ..Rescan::default() };
        let mut seen = Vec::with_capacity(listing.files.len());
        for (path, content) in listing.files {
            seen.push(path.clone());
            let text = match content {
                Ok(text) => text,
                Err(e) => {
                    result.unreadable.push((path, e));
                    continue;
                }
            };
            if self.files.get(&path).is_some_and(|f| f.text == text) {
                continue;
            }
            match manifest::load(&path, &text, Admission::Validated) {
                Ok(loaded) => {
                    // A new, exactly sized list: collected from the loader's, it would reuse that
                    // one's allocation, sized for as many whole `Resource`s and grown by
                    // doubling (10 MiB for 4,003 objects), and keep it until the file changes.
                    let mut objects = Vec::with_capacity(loaded.objects.len());
                    objects.extend(loaded.objects.into_iter().map(|(o, r)| (o, Arc::new(r))));
                    self.files.insert(path.clone(), FileState { text, objects });
                    result.changed.push(path);
                    result.skipped.extend(loaded.skipped);
                }
                Err(e) => result.errors.push(e),
            }
        }
        // What a skipped directory held is unknown: its files are not gone.
        let unknown = |p: &Path| result.skipped_dirs.iter().any(|(d, _)| p.starts_with(d));
        let gone: Vec<PathBuf> = self.files.keys().filter(|p| !seen.contains(p) && !unknown(p)).cloned().collect();
        for path in gone {
            self.files.remove(&path);
            result.changed.push(path);
        }
        Ok(result)
    }

    /// Every object, in file order then document order.
    pub fn objects(&self) -> impl Iterator<Item = &(Origin, Arc<Resource>)> {
        self.files.values().flat_map(|f| f.objects.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ";

    fn names(set: &ManifestSet) -> Vec<String> {
        set.objects().map(|(_, r)| r.key().name).collect()
    }

    #[test]
    fn rescan_keeps_the_last_good_content_and_notices_removals() {
        let dir = tempdir();
        std::fs::write(dir.join("a.yaml"), format!("{NAMESPACE}a\n")).unwrap();
        std::fs::write(dir.join("b.yml"), format!("{NAMESPACE}b\n")).unwrap();
        std::fs::write(dir.join(".hidden.yaml"), format!("{NAMESPACE}h\n")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
        let mut set = ManifestSet::default();
        let r = set.rescan(&dir).unwrap();
        assert_eq!(r.changed.len(), 2);
        assert_eq!(names(&set), ["a", "b"]);
        assert!(set.rescan(&dir).unwrap().changed.is_empty(), "unchanged files are not loaded again");

        std::fs::write(dir.join("a.yaml"), "kind: [broken\n").unwrap();
        let r = set.rescan(&dir).unwrap();
        assert_eq!(r.errors.len(), 1);
        assert!(r.changed.is_empty());
        assert_eq!(names(&set), ["a", "b"], "last good content kept");

        std::fs::write(dir.join("a.yaml"), format!("{NAMESPACE}a\n---\n- 1\n")).unwrap();
        let r = set.rescan(&dir).unwrap();
        assert_eq!((r.errors.len(), r.errors[0].origin.line), (1, 6), "errors point at the document");
        assert_eq!(names(&set), ["a", "b"]);

        std::fs::write(dir.join("a.yaml"), format!("{NAMESPACE}a\n---\napiVersion: v1\nkind: ConfigMap\n")).unwrap();
        let r = set.rescan(&dir).unwrap();
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(names(&set), ["a", "b"]);

        std::fs::remove_file(dir.join("b.yml")).unwrap();
        let r = set.rescan(&dir).unwrap();
        assert_eq!(r.changed, [dir.join("b.yml")]);
        assert_eq!(names(&set), ["a"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("manifests-{}-{:?}", std::process::id(), std::thread::current().id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
