//! `kai-scheduler`: simulate, bench, and the daemon that follows a policy in Git.
// One call sets an allocator option (`keep_freed_memory`); nothing else is unsafe.
#![deny(unsafe_code)]

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    keep_freed_memory();
    std::process::ExitCode::from(cli::run())
}

/// mimalloc's `mi_option_purge_delay` (its index in `mimalloc.h`, v2 and v3 alike).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc keep memory freed for ten seconds before giving it back to the system (its
/// default is one), unless `MIMALLOC_PURGE_DELAY` says otherwise. Each cycle frees what it
/// built and builds as much again a period later: given back in between, the pages are
/// faulted in and zeroed anew every cycle (`bench --scenario steady --nodes 4000`: 100,000 to
/// 127,000 page faults over its first fit and five cycles instead of 81,000-82,000).
#[allow(unsafe_code)]
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option, first thing in `main`, before any other thread
        // exists to read it.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 10_000) };
    }
}
