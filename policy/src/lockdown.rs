//! Process-global lockdown state: the startup flag, the process-wide
//! `no_compilation()` depth and the per-thread `serving()` depth.
//!
//! Atomics and a const-initialised, drop-free thread local only: read from
//! exec hooks that may run in a vfork child or between fork and exec, where a
//! lock or an allocation could deadlock.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::verdict::Lock;

static STARTUP: AtomicBool = AtomicBool::new(false);
static DEPTH: AtomicU32 = AtomicU32::new(0);

thread_local! {
    // `const` init and no Drop: no lazy registration, never inaccessible.
    static SERVING: Cell<u32> = const { Cell::new(0) };
}

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

/// This thread's serving depth += 1 (saturating); returns the new depth.
pub fn serving_enter() -> u32 {
    SERVING
        .try_with(|d| {
            let new = d.get().saturating_add(1);
            d.set(new);
            new
        })
        .unwrap_or(0)
}

/// This thread's serving depth -= 1; `None` if it was already 0.
pub fn serving_exit() -> Option<u32> {
    SERVING
        .try_with(|d| {
            let new = d.get().checked_sub(1)?;
            d.set(new);
            Some(new)
        })
        .ok()
        .flatten()
}

pub fn serving_depth() -> u32 {
    SERVING.try_with(Cell::get).unwrap_or(0)
}

/// The lock that holds for the calling thread, strongest first.
pub fn current() -> Lock {
    if startup() {
        Lock::Startup
    } else if depth() > 0 {
        Lock::NoCompilation
    } else if serving_depth() > 0 {
        Lock::Serving
    } else {
        Lock::Open
    }
}
