//! The C ABI the Python layer drives the shim's policy state through
//! (`ctypes.CDLL(None)` when the shim is preloaded). The same prototypes, as
//! a header, are in `interpose/include/precompile.h`; docs/CONTRACTS.md is
//! the contract. None of these is on the exec path.

use core::ffi::{c_char, c_int};

use policy::lockdown;

use crate::gate;
use crate::journal;
use crate::log;
use crate::raw::{self, c_str, CStrArray};
use crate::resolve::{candidate, search_path, DEFAULT_PATH, PATH_BUF};
use crate::sys;

const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// `const char *precompile_version(void);`
/// A static string, e.g. "0.1.0"; never freed.
#[no_mangle]
pub extern "C" fn precompile_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// `uint32_t precompile_lockdown_enter(void);`
/// Process-wide lockdown depth += 1; returns the new depth.
#[no_mangle]
pub extern "C" fn precompile_lockdown_enter() -> u32 {
    let depth = lockdown::enter();
    log::debug("precompile::abi", |w| {
        w.push(b"lockdown entered depth=").push_int(depth.into());
        w.push(b" pid=").push_int(sys::getpid());
    });
    depth
}

/// `int64_t precompile_lockdown_exit(void);`
/// Depth -= 1; returns the new depth, or -1 if it was already 0.
#[no_mangle]
pub extern "C" fn precompile_lockdown_exit() -> i64 {
    let depth = lockdown::exit().map_or(-1, i64::from);
    log::debug("precompile::abi", |w| {
        w.push(b"lockdown exited depth=").push_int(depth);
        w.push(b" pid=").push_int(sys::getpid());
    });
    depth
}

/// `uint32_t precompile_lockdown_depth(void);`
#[no_mangle]
pub extern "C" fn precompile_lockdown_depth() -> u32 {
    lockdown::depth()
}

/// `int precompile_lockdown_startup(void);`
/// 1 if TORCH_PRECOMPILE_NO_COMPILATION=1 was set at process start, else 0.
#[no_mangle]
pub extern "C" fn precompile_lockdown_startup() -> c_int {
    c_int::from(lockdown::startup())
}

/// `uint32_t precompile_serving_enter(void);`
/// The calling thread's serving depth += 1; returns the new depth.
#[no_mangle]
pub extern "C" fn precompile_serving_enter() -> u32 {
    let depth = lockdown::serving_entered(sys::serving_depth());
    sys::set_serving_depth(depth);
    depth
}

/// `int64_t precompile_serving_exit(void);`
/// The calling thread's serving depth -= 1; returns the new depth, or -1 if
/// it was already 0.
#[no_mangle]
pub extern "C" fn precompile_serving_exit() -> i64 {
    match lockdown::serving_exited(sys::serving_depth()) {
        Some(depth) => {
            sys::set_serving_depth(depth);
            i64::from(depth)
        }
        None => -1,
    }
}

/// `uint32_t precompile_serving_depth(void);` (the calling thread's)
#[no_mangle]
pub extern "C" fn precompile_serving_depth() -> u32 {
    sys::serving_depth()
}

/// `int precompile_locked_here(void);`
/// 1 if a compile would be refused on the calling thread now: startup
/// lockdown, process-wide depth > 0, or this thread serving.
#[no_mangle]
pub extern "C" fn precompile_locked_here() -> c_int {
    c_int::from(crate::state::lock() != policy::Lock::Open)
}

/// `int precompile_journal_arm(const char *path);`
/// Every later decision of this process, and of the children it starts, is
/// appended to `path` (made absolute against the current directory; the
/// file is created if missing). Returns 0, or -1 with errno set (EINVAL for
/// a null or empty path, else open(2)'s errno).
///
/// # Safety
///
/// `path` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn precompile_journal_arm(path: *const c_char) -> c_int {
    // SAFETY: the caller passes null or a C string.
    let Some(path) = (unsafe { c_str(path) }) else {
        sys::set_errno(libc::EINVAL);
        return -1;
    };
    match journal::arm(path.to_bytes()) {
        Ok(()) => {
            log::debug("precompile::abi", |w| {
                w.push(b"journal armed path=").push(path.to_bytes());
            });
            0
        }
        Err(errno) => {
            sys::set_errno(errno);
            -1
        }
    }
}

/// `int precompile_journal_disarm(void);`
/// Back to the journal of PRECOMPILE_JOURNAL at start, if any. Returns 0.
#[no_mangle]
pub extern "C" fn precompile_journal_disarm() -> c_int {
    journal::disarm();
    log::debug("precompile::abi", |w| {
        w.push(b"journal disarmed");
    });
    0
}

/// `int precompile_classify(const char *exe, const char *const *argv);`
/// 0 other, 1 version probe, 2 compile — what the shim would decide on
/// for this exec. A bare name is looked up on PATH and symlinks followed,
/// as for execvp. A null `argv` is an empty one.
///
/// # Safety
///
/// `exe` is null or a C string; `argv` is null or a NULL-terminated array
/// of C strings.
#[no_mangle]
pub unsafe extern "C" fn precompile_classify(
    exe: *const c_char,
    argv: *const *const c_char,
) -> c_int {
    // SAFETY: the caller passes null or a C string.
    let Some(exe) = (unsafe { c_str(exe) }) else {
        return 0;
    };
    // SAFETY: the caller passes null or a NULL-terminated array of C strings.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: read as `getenv` reads it (the caller must not race setenv,
    // getenv's own contract); the value is used before this returns.
    let environ = unsafe { raw::environ() };
    let path_var = raw::lookup(environ, b"PATH").unwrap_or(DEFAULT_PATH);
    let mut buf = [0u8; PATH_BUF];
    let found = search_path(exe.to_bytes(), path_var, &mut buf).and_then(|n| candidate(&buf, n));
    let kind = gate::classify(found.unwrap_or(exe), args);
    match kind {
        policy::Kind::Other => 0,
        policy::Kind::Probe => 1,
        policy::Kind::Compile => 2,
    }
}
