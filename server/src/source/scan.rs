//! Lists and reads the manifest files under a directory, defensively: the directory is
//! whatever people (or a ConfigMap mount, or a sync tool) put there.
//!
//! - Only regular files are read: a FIFO, socket or device named `*.yaml` would block a read
//!   forever or never end, so it is reported instead (and opened non-blocking, so one swapped
//!   in between the check and the open cannot block either).
//! - Symbolic links are followed (mounted ConfigMaps are links), but each real directory is
//!   walked once: links to `.` or to a parent cannot make the walk loop or explode.
//! - A file larger than [`MAX_FILE_BYTES`] is not read.
//! - Listing reads no file: it says what is there and how large (so a directory past its
//!   budget is refused before anything is read), and [`read`] reads one file when its turn
//!   comes, so a rescan holds one file's new text at a time.
//! - A file or subdirectory that cannot be read is reported and skipped, by name; the rest of
//!   the directory still applies. Only the top directory itself failing fails the listing.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use stunner_gateway::manifest::is_manifest;

/// The largest manifest file read: far above any real set of objects (the API server takes
/// at most 1.5 MiB per object), and a bound on what one rescan holds in memory per file.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// How deep subdirectories are followed.
pub const MAX_DIR_DEPTH: usize = 32;

/// Why a manifest file was not read.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("not a regular file")]
    NotRegular,
    #[error("larger than {MAX_FILE_BYTES} bytes")]
    TooLarge,
    #[error("not UTF-8 text")]
    NotUtf8,
    #[error("cannot read: {0}")]
    Io(io::Error),
}

impl Unreadable {
    /// Whether reading again later may succeed without the file changing (e.g. out of file
    /// descriptors); a FIFO stays a FIFO until someone replaces it, which is an event.
    pub fn is_transient(&self) -> bool {
        matches!(self, Unreadable::Io(_))
    }
}

/// Why a subdirectory was skipped.
#[derive(Debug, thiserror::Error)]
pub enum SkippedDir {
    #[error("cannot list: {0}")]
    Io(io::Error),
    #[error("deeper than {MAX_DIR_DEPTH} levels")]
    TooDeep,
}

/// Every manifest file under a directory, in path order.
#[derive(Debug, Default)]
pub struct Listing {
    /// Each manifest file found, with its size when listed or why it cannot be read.
    pub files: Vec<(PathBuf, Result<u64, Unreadable>)>,
    /// Subdirectories that were not walked: what they held is unknown.
    pub skipped_dirs: Vec<(PathBuf, SkippedDir)>,
}

impl Listing {
    /// The bytes of the files that can be read, as listed.
    pub fn bytes(&self) -> u64 {
        self.files.iter().filter_map(|(_, size)| size.as_ref().ok()).sum()
    }
}

/// Lists every manifest under `dir` (recursively; hidden entries are skipped).
/// Fails only if `dir` itself cannot be listed.
pub fn list(dir: &Path) -> io::Result<Listing> {
    let mut walk = Walk { visited: HashSet::new(), listing: Listing::default() };
    let entries = read_dir_sorted(dir)?;
    if let Ok(meta) = std::fs::metadata(dir) {
        walk.visited.insert((meta.dev(), meta.ino()));
    }
    walk.entries(entries, 1);
    Ok(walk.listing)
}

struct Walk {
    /// Real directories already walked, by device and inode.
    visited: HashSet<(u64, u64)>,
    listing: Listing,
}

impl Walk {
    fn entries(&mut self, entries: Vec<PathBuf>, depth: usize) {
        for path in entries {
            if path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => self.dir(path, &meta, depth),
                _ if !is_manifest(&path) => {}
                Ok(meta) if meta.is_file() && meta.len() > MAX_FILE_BYTES => self.file(path, Err(Unreadable::TooLarge)),
                Ok(meta) if meta.is_file() => self.file(path, Ok(meta.len())),
                Ok(_) => self.file(path, Err(Unreadable::NotRegular)),
                // Removed since the listing: gone, not broken.
                Err(e) if e.kind() == io::ErrorKind::NotFound && !is_symlink(&path) => {}
                // A dangling or looping link, or a permission problem.
                Err(e) => self.file(path, Err(Unreadable::Io(e))),
            }
        }
    }

    fn dir(&mut self, path: PathBuf, meta: &std::fs::Metadata, depth: usize) {
        if !self.visited.insert((meta.dev(), meta.ino())) {
            return; // walked already, through another path
        }
        if depth >= MAX_DIR_DEPTH {
            self.listing.skipped_dirs.push((path, SkippedDir::TooDeep));
            return;
        }
        match read_dir_sorted(&path) {
            Ok(entries) => self.entries(entries, depth + 1),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => self.listing.skipped_dirs.push((path, SkippedDir::Io(e))),
        }
    }

    fn file(&mut self, path: PathBuf, size: Result<u64, Unreadable>) {
        self.listing.files.push((path, size));
    }
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn read_dir_sorted(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        entries.push(entry?.path());
    }
    entries.sort();
    Ok(entries)
}

/// Reads a file that was a regular file when listed, checking again on the open handle.
pub fn read(path: &Path) -> Result<String, Unreadable> {
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(Unreadable::Io)?;
    let meta = file.metadata().map_err(Unreadable::Io)?;
    if !meta.is_file() {
        return Err(Unreadable::NotRegular);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Unreadable::TooLarge);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow while it is read: the bound holds regardless.
    File::take(file, MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(Unreadable::Io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Unreadable::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| Unreadable::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("scan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(listing: &Listing, dir: &Path) -> Vec<String> {
        listing.files.iter().map(|(p, _)| p.strip_prefix(dir).unwrap().display().to_string()).collect()
    }

    #[test]
    fn links_to_walked_directories_are_followed_once() {
        let dir = tempdir("loops");
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.yaml"), "kind: A\n").unwrap();
        std::fs::write(dir.join("sub/b.yaml"), "kind: B\n").unwrap();
        symlink(".", dir.join("l1")).unwrap();
        symlink(".", dir.join("l2")).unwrap();
        symlink("..", dir.join("sub/up")).unwrap();
        let listing = list(&dir).unwrap();
        assert_eq!(names(&listing, &dir), ["a.yaml", "sub/b.yaml"]);
        assert!(listing.skipped_dirs.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[allow(unsafe_code)] // mkfifo(3): std cannot make a FIFO
    fn only_regular_files_are_read_and_each_problem_names_its_file() {
        let dir = tempdir("special");
        std::fs::write(dir.join("good.yaml"), "kind: A\n").unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo.yaml").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::fs::write(dir.join("latin1.yaml"), b"kind: A\nname: caf\xe9\n").unwrap();
        symlink("nowhere.yaml", dir.join("dangling.yaml")).unwrap();
        let big = std::fs::File::create(dir.join("big.yaml")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        let listing = list(&dir).unwrap();
        let outcome: Vec<String> = listing
            .files
            .iter()
            .map(|(p, size)| {
                let name = p.file_name().unwrap().to_str().unwrap();
                match size.as_ref().map_err(ToString::to_string).and_then(|_| read(p).map_err(|e| e.to_string())) {
                    Ok(text) => format!("{name}: {text:?}"),
                    Err(e) => format!("{name}: {e}"),
                }
            })
            .collect();
        assert_eq!(outcome.len(), 5, "{outcome:?}");
        assert_eq!(outcome[0], format!("big.yaml: larger than {MAX_FILE_BYTES} bytes"));
        assert!(outcome[1].starts_with("dangling.yaml: cannot read: "), "{outcome:?}");
        assert_eq!(
            outcome[2..],
            ["fifo.yaml: not a regular file", "good.yaml: \"kind: A\\n\"", "latin1.yaml: not UTF-8 text"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
