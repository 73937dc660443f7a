//! The operator's heap: jemalloc, set to give the pages it no longer uses back to the system at
//! once.
//!
//! glibc's malloc keeps small blocks of every size side by side in one heap, and returns a page
//! to the system only once nothing on it is in use. A CDS watch connection is served by a task
//! of some kilobytes (the HTTP connection that upgrades) while it leaves behind, interleaved
//! with those, the few hundred bytes a watcher keeps (its id, its client record): once the
//! tasks end, each page still holds a survivor, and 10,000 idle watchers kept 3.9 KiB each
//! resident where they use about one (issue #48, BENCHMARKS.md's fan-out table); `malloc_trim`
//! cannot return a page with a survivor on it. jemalloc keeps blocks of each size class in slabs
//! of their own, so the handshakes' slabs empty whole and go back, and the rest stays dense.
//!
//! Decay 0 returns an emptied page at once instead of holding it for 10 s (jemalloc's default)
//! for reuse: the operator's working sets (a large render, a rescan, a reconnect storm) come
//! seldom, and the memory they used is what their peak would otherwise keep resident (with
//! glibc that took an explicit trim after every large render and rescan). The fuzz targets
//! keep the system's allocator, which the sanitizers instrument.
//!
//! jemalloc's own `_RJEM_MALLOC_CONF` environment variable overrides these settings (it is
//! read after them), e.g. `_RJEM_MALLOC_CONF=dirty_decay_ms:10000` for its default.
//! Arm64 builds assume pages of up to 64 KiB (`.cargo/config.toml`), so one image runs on
//! every arm64 kernel.

#[cfg(not(feature = "fuzzing"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The options jemalloc reads at its first allocation: a C string the allocator looks up by
/// this name (tikv-jemalloc-sys prefixes jemalloc's symbols with `_rjem_`).
#[cfg(not(feature = "fuzzing"))]
#[used]
#[allow(unsafe_code)] // an exported symbol, which the linker could confuse with another
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 34] = b"dirty_decay_ms:0,muzzy_decay_ms:0\0";

#[cfg(all(test, not(feature = "fuzzing")))]
mod tests {
    /// The options above reached jemalloc (a misspelt symbol name would be ignored silently).
    #[test]
    fn jemalloc_reads_the_operators_options() {
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            eprintln!("skipped: _RJEM_MALLOC_CONF overrides the options");
            return;
        }
        let dirty: isize = read_option(c"opt.dirty_decay_ms");
        let muzzy: isize = read_option(c"opt.muzzy_decay_ms");
        assert_eq!((dirty, muzzy), (0, 0));
    }

    fn read_option(name: &std::ffi::CStr) -> isize {
        let mut value: isize = -2;
        let mut len = std::mem::size_of::<isize>();
        // SAFETY: `opt.*_decay_ms` are `ssize_t` options; `value` and `len` are valid for the
        // call and `len` is the size of `value`; no new value is written.
        #[allow(unsafe_code)] // a call into jemalloc
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(name.as_ptr(), (&raw mut value).cast(), &mut len, std::ptr::null_mut(), 0)
        };
        assert_eq!(rc, 0, "mallctl {name:?}");
        value
    }
}
