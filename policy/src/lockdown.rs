//! Process-global lockdown state: the startup flag and the process-wide
//! `no_compilation()` depth; and the rule that combines them with a thread's
//! `serving()` depth into the lock that holds.
//!
//! Atomics only: read from exec hooks that may run in a vfork child or
//! between fork and exec, where a lock or an allocation could deadlock. The
//! per-thread serving depth lives with each holder of this state (the shim
//! and the Python extension keep their own thread-local counter), since a
//! thread local needs std and this crate is linked into the std-free shim.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::verdict::Lock;

static STARTUP: AtomicBool = AtomicBool::new(false);
static DEPTH: AtomicU32 = AtomicU32::new(0);

/// Set once by whoever reads `TORCH_PRECOMPILE_NO_COMPILATION` at start.
pub fn set_startup(on: bool) {
    STARTUP.store(on, Ordering::SeqCst);
}

pub fn startup() -> bool {
    STARTUP.load(Ordering::SeqCst)
}

/// Depth += 1 (saturating); returns the new depth.
pub fn enter() -> u32 {
    match DEPTH.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| d.checked_add(1)) {
        Ok(old) => old + 1,
        Err(max) => max,
    }
}

/// Depth -= 1; `None` if it was already 0. A compare-exchange loop, so racing
/// unbalanced exits can never wrap the depth below zero.
pub fn exit() -> Option<u32> {
    DEPTH
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| d.checked_sub(1))
        .ok()
        .map(|old| old - 1)
}

pub fn depth() -> u32 {
    DEPTH.load(Ordering::SeqCst)
}

/// The lock that holds for a thread whose serving depth is
/// `serving_depth`, strongest first.
pub fn current(serving_depth: u32) -> Lock {
    if startup() {
        Lock::Startup
    } else if depth() > 0 {
        Lock::NoCompilation
    } else if serving_depth > 0 {
        Lock::Serving
    } else {
        Lock::Open
    }
}

/// A thread's serving depth after `serving_enter` (saturating).
pub fn serving_entered(depth: u32) -> u32 {
    depth.saturating_add(1)
}

/// A thread's serving depth after `serving_exit`; `None` if it was already 0.
pub fn serving_exited(depth: u32) -> Option<u32> {
    depth.checked_sub(1)
}
