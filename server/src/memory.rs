//! Giving the heap memory the operator freed back to the system.
//!
//! glibc's allocator keeps what a program frees for later allocations: it returns pages to the
//! system only from the top of the main heap, and only past a threshold. A large render (the
//! first complete one, or a change to a GatewayConfig every Gateway shares) and a rescan of a
//! large manifest directory build and drop a working set of many small allocations (parsed
//! YAML, the render's objects and output), spread over the arenas of the threads that ran
//! them. Freed, those pages stayed resident: with 1,000 Gateways the operator kept the peak of
//! its first render as its RSS for good. `malloc_trim` releases the free pages of every arena.

/// Most malloc arenas the process uses; see [`limit_arenas`].
pub const ARENA_MAX: i32 = 1;

/// Caps glibc's malloc arenas at [`ARENA_MAX`]; call before any thread starts. glibc gives
/// threads that contend for the heap arenas of their own, up to 8 per core, and each keeps what
/// its threads freed (tokio's workers and the blocking threads rescans and renders run on
/// touch several). Measured with 1,000 Gateways (BENCHMARKS.md's history in git, "Footprint
/// and storms at scale"): one arena held 17 MiB less before the watchers and a 41 MiB lower peak than the
/// default, two arenas the same RSS but the higher peak. Small allocations mostly never reach
/// the arena's lock: glibc's per-thread cache serves them. A no-op where the allocator is not
/// glibc's; `GLIBC_TUNABLES=glibc.malloc.arena_max=N` set by hand is overridden. One run each.
pub fn limit_arenas() -> bool {
    arena_max(ARENA_MAX)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn arena_max(n: i32) -> bool {
    // SAFETY: `mallopt` takes no pointers; called before any other thread exists, it changes
    // a setting the allocator reads when a thread first picks an arena.
    #[allow(unsafe_code)] // a libc call
    let ok = unsafe { libc::mallopt(libc::M_ARENA_MAX, n) };
    ok == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn arena_max(_: i32) -> bool {
    false
}

/// Renders of at least this many Gateways are followed by [`release_free_memory`]: below,
/// what a render frees is little and soon used again, and the walk over the heap not worth it.
pub const LARGE_RENDER: usize = 64;

/// Returns the heap's free pages to the system; whether any were released. A no-op (false)
/// where the allocator is not glibc's.
pub fn release_free_memory() -> bool {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: `malloc_trim` takes no pointers and only walks the allocator's own state, under
    // the allocator's locks; any thread may call it at any time.
    #[allow(unsafe_code)] // a libc call
    let released = unsafe { libc::malloc_trim(0) };
    released == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}
