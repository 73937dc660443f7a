//! The manifests of a directory, loaded by the core's one loader ([`manifest::load`]) and kept
//! per file, so the last good content of a file stays in force when an edit breaks it.
//!
//! Of each object only its reference and a digest of its content are kept, not the object:
//! the index holds the one copy the render reads. A rescan hands over the objects of the files
//! it loaded; an object of a file not loaded again is loaded from that file's kept text when
//! asked for ([`ManifestSet::reload`]: when a later file that defined it too goes away).

use super::scan::{self, SkippedDir, Unreadable};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use stunner_gateway::index::{ObjRef, Resource};
use stunner_gateway::manifest::{self, Admission, LoadError, Origin, Skipped};

/// The most bytes of manifests the source reads by default: ~28,000 Gateways of ~290 bytes
/// of YAML each, or a few thousand with their routes, Services, StaticServices and Secrets
/// beside them. Each such Gateway costs ~12 KiB of the operator's memory once rendered
/// (BENCHMARKS.md, "Standalone mode's memory": ~43 bytes of peak per byte of YAML, so the
/// default bounds a load's peak near 350 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 8 << 20;
/// The most objects the source holds by default: a few thousand Gateways with what they use.
pub const DEFAULT_MAX_OBJECTS: usize = 20_000;

/// How much the standalone source holds at most: a directory past it is refused as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_bytes: u64,
    pub max_objects: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { max_bytes: DEFAULT_MAX_BYTES, max_objects: DEFAULT_MAX_OBJECTS }
    }
}

/// Why a rescan was refused as a whole (nothing of it applied; the last good state stays).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverBudget {
    #[error(
        "the manifests hold {bytes} bytes in {files} files, more than the limit of {max} bytes (--standalone-max-bytes)"
    )]
    Bytes { bytes: u64, files: usize, max: u64 },
    #[error(
        "the manifests hold {objects} objects in {files} files, more than the limit of {max} objects (--standalone-max-objects)"
    )]
    Objects { objects: usize, files: usize, max: usize },
}

/// The objects of every manifest file, by file: the last content of each file that loaded.
#[derive(Debug, Default)]
pub struct ManifestSet {
    files: BTreeMap<PathBuf, FileState>,
}

/// A file's last good text and what it defines. With 1,000 Gateways (4,003 objects) a copy of
/// each object here (then a `Resource` held its object inline, as large as its largest kind, a
/// Deployment, ~2.5 KiB, plus its strings) held ~14 MiB of the operator's heap beside the
/// index's copy.
#[derive(Debug)]
struct FileState {
    text: String,
    objects: Vec<Entry>,
    /// The objects its documents name that an API server would refuse, with their lines.
    rejected: Vec<(ObjRef, usize)>,
    /// Where its current text fails to load, if it does: `text` is the last that loaded.
    broken: Option<usize>,
}

/// One object of a manifest file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub object: ObjRef,
    /// Where its document starts.
    pub line: usize,
    /// [`Resource::digest`] of the object as loaded.
    pub digest: u64,
}

/// The objects a rescan loaded, by file and then object (the last of a file's documents that
/// defines an object wins, as in a repeated apply).
pub type Loaded = BTreeMap<PathBuf, BTreeMap<ObjRef, Resource>>;

/// What a rescan found.
#[derive(Debug, Default)]
pub struct Rescan {
    /// Files whose objects changed (added, edited or removed files).
    pub changed: Vec<PathBuf>,
    /// Of `changed`, the files still there that held objects and now hold none: emptied, or
    /// caught between an in-place writer's truncate and its write.
    pub emptied: Vec<PathBuf>,
    /// Files that failed to load; their last good content was kept.
    pub errors: Vec<LoadError>,
    /// Documents skipped in the files that changed.
    pub skipped: Vec<Skipped>,
    /// Manifest files that could not be read; their last good content was kept.
    pub unreadable: Vec<(PathBuf, Unreadable)>,
    /// Subdirectories that could not be walked; the files last read there were kept.
    pub skipped_dirs: Vec<(PathBuf, SkippedDir)>,
    /// The directory was past the budget: nothing of this rescan was taken.
    pub refused: Option<OverBudget>,
}

impl Rescan {
    /// Whether something could not be read for a reason that may go away by itself (e.g. out
    /// of file descriptors): the rescan is worth repeating without a file event.
    pub fn incomplete(&self) -> bool {
        self.unreadable.iter().any(|(_, e)| e.is_transient())
            || self.skipped_dirs.iter().any(|(_, e)| matches!(e, SkippedDir::Io(_)))
    }

    fn refused(refusal: OverBudget) -> Self {
        Rescan { refused: Some(refusal), ..Rescan::default() }
    }
}

impl ManifestSet {
    /// Re-reads every manifest under `dir` (recursively); only files whose text changed are
    /// loaded again, and their objects returned. A directory past `budget` is refused as a
    /// whole: nothing of it is taken, and its bytes are not even read when they are too many.
    /// Fails only if `dir` itself cannot be listed.
    pub fn rescan(&mut self, dir: &Path, budget: Budget) -> std::io::Result<(Rescan, Loaded)> {
        let listing = scan::list(dir)?;
        let readable = listing.files.iter().filter(|(_, size)| size.is_ok()).count();
        let bytes = listing.bytes();
        if bytes > budget.max_bytes {
            return Ok((
                Rescan::refused(OverBudget::Bytes { bytes, files: readable, max: budget.max_bytes }),
                Loaded::new(),
            ));
        }
        let mut result = Rescan { skipped_dirs: listing.skipped_dirs, ..Rescan::default() };
        let mut loaded = Loaded::new();
        // Taken only once the whole directory is known to be within the budget.
        let mut updates = BTreeMap::new();
        let mut broken = Vec::new();
        let mut seen = BTreeSet::new();
        for (path, size) in listing.files {
            seen.insert(path.clone());
            let text = match size.and_then(|_| scan::read(&path)) {
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
                Ok(manifest) => {
                    let mut objects = Vec::with_capacity(manifest.objects.len());
                    let mut by_ref = BTreeMap::new();
                    for (origin, resource) in manifest.objects {
                        let object = resource.obj_ref();
                        objects.push(Entry { object: object.clone(), line: origin.line, digest: resource.digest() });
                        by_ref.insert(object, resource);
                    }
                    let rejected =
                        manifest.skipped.iter().filter_map(|s| Some((s.object.clone()?, s.origin.line))).collect();
                    loaded.insert(path.clone(), by_ref);
                    updates.insert(path, FileState { text, objects, rejected, broken: None });
                    result.skipped.extend(manifest.skipped);
                }
                Err(e) => {
                    broken.push((path, e.origin.line));
                    result.errors.push(e);
                }
            }
        }
        // What a skipped directory held is unknown: its files are not gone.
        let unknown = |p: &Path| result.skipped_dirs.iter().any(|(d, _)| p.starts_with(d));
        let stays = |p: &Path| !updates.contains_key(p) && (seen.contains(p) || unknown(p));
        let kept: usize = self.files.iter().filter(|(p, _)| stays(p)).map(|(_, f)| f.objects.len()).sum();
        let objects = kept + updates.values().map(|f: &FileState| f.objects.len()).sum::<usize>();
        if objects > budget.max_objects {
            let files = self.files.keys().filter(|p| stays(p)).count() + updates.len();
            return Ok((
                Rescan::refused(OverBudget::Objects { objects, files, max: budget.max_objects }),
                Loaded::new(),
            ));
        }
        for (path, line) in broken {
            if let Some(file) = self.files.get_mut(&path) {
                file.broken = Some(line);
            }
        }
        for (path, state) in updates {
            let empty = state.objects.is_empty();
            let before = self.files.insert(path.clone(), state);
            if empty && before.is_some_and(|f| !f.objects.is_empty()) {
                result.emptied.push(path.clone());
            }
            result.changed.push(path);
        }
        let gone: Vec<PathBuf> = self.files.keys().filter(|p| !seen.contains(*p) && !unknown(p)).cloned().collect();
        for path in gone {
            self.files.remove(&path);
            result.changed.push(path);
        }
        Ok((result, loaded))
    }

    /// Every object, with its file, in file order then document order.
    pub fn entries(&self) -> impl Iterator<Item = (&Path, &Entry)> {
        self.files.iter().flat_map(|(path, f)| f.objects.iter().map(move |e| (path.as_path(), e)))
    }

    /// The objects whose file's current text does not give them: those a document names that
    /// an API server would refuse, and every object of a file that fails to load (its last
    /// good text defines them). Each with where the invalid edit is.
    pub fn invalid_edits(&self) -> impl Iterator<Item = (&ObjRef, Origin)> {
        self.files.iter().flat_map(|(path, f)| {
            let at = |line| Origin { path: path.clone(), line };
            let rejected = f.rejected.iter().map(move |(object, line)| (object, at(*line)));
            let broken =
                f.broken.into_iter().flat_map(move |line| f.objects.iter().map(move |e| (&e.object, at(line))));
            rejected.chain(broken)
        })
    }

    /// `object` as the kept text of `path` defines it (its last definition there).
    pub fn reload(&self, path: &Path, object: &ObjRef) -> Option<Resource> {
        let file = self.files.get(path)?;
        let manifest = manifest::load(path, &file.text, Admission::Validated).ok()?;
        manifest.objects.into_iter().rev().map(|(_, r)| r).find(|r| r.obj_ref() == *object)
    }
}

/// Where an entry of `path` was defined, for messages.
pub fn origin(path: &Path, entry: &Entry) -> Origin {
    Origin { path: path.to_path_buf(), line: entry.line }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ";

    fn names(set: &ManifestSet) -> Vec<String> {
        set.entries().map(|(_, e)| e.object.key.name.to_string()).collect()
    }

    #[test]
    fn rescan_keeps_the_last_good_content_and_notices_removals() {
        let dir = tempdir();
        std::fs::write(dir.join("a.yaml"), format!("{NAMESPACE}a\n")).unwrap();
        std::fs::write(dir.join("b.yml"), format!("{NAMESPACE}b\n")).unwrap();
        std::fs::write(dir.join(".hidden.yaml"), format!("{NAMESPACE}h\n")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
        let mut set = ManifestSet::default();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!(r.changed.len(), 2);
        assert_eq!(names(&set), ["a", "b"]);
        assert!(
            set.rescan(&dir, Budget::default()).unwrap().0.changed.is_empty(),
            "unchanged files are not loaded again"
        );

        std::fs::write(dir.join("a.yaml"), "kind: [broken\n").unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!(r.errors.len(), 1);
        assert!(r.changed.is_empty());
        assert_eq!(names(&set), ["a", "b"], "last good content kept");

        std::fs::write(dir.join("a.yaml"), format!("{NAMESPACE}a\n---\n- 1\n")).unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!((r.errors.len(), r.errors[0].origin.line), (1, 6), "errors point at the document");
        assert_eq!(names(&set), ["a", "b"]);

        std::fs::write(dir.join("a.yaml"), format!("{NAMESPACE}a\n---\napiVersion: v1\nkind: ConfigMap\n")).unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(names(&set), ["a", "b"]);

        std::fs::remove_file(dir.join("b.yml")).unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!(r.changed, [dir.join("b.yml")]);
        assert_eq!(names(&set), ["a"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_left_without_any_of_its_objects_is_reported_emptied() {
        let dir = tempdir();
        let a = dir.join("a.yaml");
        std::fs::write(&a, format!("{NAMESPACE}a\n---\n{NAMESPACE}b\n")).unwrap();
        let mut set = ManifestSet::default();
        assert!(set.rescan(&dir, Budget::default()).unwrap().0.emptied.is_empty(), "a new file");

        std::fs::write(&a, format!("{NAMESPACE}a\n")).unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!((r.changed.len(), r.emptied.len()), (1, 0), "one object left");

        std::fs::write(&a, "").unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!((&r.changed, &r.emptied), (&vec![a.clone()], &vec![a.clone()]));
        assert!(names(&set).is_empty());

        std::fs::write(&a, "# nothing yet\n").unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!((r.changed.len(), r.emptied.len()), (1, 0), "it held nothing already");

        std::fs::write(&a, format!("{NAMESPACE}a\n")).unwrap();
        set.rescan(&dir, Budget::default()).unwrap();
        std::fs::remove_file(&a).unwrap();
        let (r, _) = set.rescan(&dir, Budget::default()).unwrap();
        assert_eq!((r.changed.len(), r.emptied.len()), (1, 0), "a removed file is gone, not emptied");
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
