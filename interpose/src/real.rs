//! The real libc functions behind the hooks, resolved once with
//! `dlsym(RTLD_NEXT, …)` by the constructor.
//!
//! The hooks call only six real functions: every exec that names a path ends
//! in the real `execve` (glibc's `execv`/`execl`/`execle` are `execve` with
//! `environ` or an explicit envp, so routing them there changes nothing), the
//! PATH-searching ones end in the real `execvpe` (which keeps glibc's exact
//! search and its `ENOEXEC` shell fallback), and `fexecve`, `execveat`,
//! `posix_spawn`, `posix_spawnp` keep their own.
//!
//! Reading the table is one atomic load ([`Once::get`]): no lock, no
//! allocation, safe in a vfork child.

use core::ffi::{c_char, c_int, c_void, CStr};

use crate::once::Once;

pub type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
pub type ExecveatFn = unsafe extern "C" fn(
    c_int,
    *const c_char,
    *const *const c_char,
    *const *const c_char,
    c_int,
) -> c_int;
pub type FexecveFn =
    unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
pub type PosixSpawnFn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    *const *const c_char,
    *const *const c_char,
) -> c_int;

pub struct Real {
    pub execve: Option<ExecveFn>,
    pub execvpe: Option<ExecveFn>,
    pub fexecve: Option<FexecveFn>,
    pub execveat: Option<ExecveatFn>,
    pub posix_spawn: Option<PosixSpawnFn>,
    pub posix_spawnp: Option<PosixSpawnFn>,
}

// In `.data`, not `.bss`: see `state::SETTINGS`.
#[link_section = ".data"]
static REAL: Once<Real> = Once::new();

/// The table, once resolved.
///
/// Before the constructor ran (only another library's constructor can exec
/// that early, never a vfork child of a running program) this resolves it
/// on the spot; `dlsym` never calls back into an exec hook, so this cannot
/// recurse.
pub fn get() -> &'static Real {
    match REAL.get() {
        Some(real) => real,
        None => REAL.get_or_init(resolve),
    }
}

/// Resolves every real function; called by the constructor.
pub fn init() {
    let _ = get();
}

fn resolve() -> Real {
    // SAFETY (each transmute below): `next` returns either null (mapped to
    // None) or the address of the libc function of that exact name, whose C
    // prototype is the function-pointer type it is converted to.
    Real {
        // SAFETY: see above; execve(const char*, char *const[], char *const[]).
        execve: next(c"execve")
            .map(|p| unsafe { core::mem::transmute::<*mut c_void, ExecveFn>(p) }),
        // SAFETY: see above; execvpe has execve's prototype.
        execvpe: next(c"execvpe")
            .map(|p| unsafe { core::mem::transmute::<*mut c_void, ExecveFn>(p) }),
        // SAFETY: see above; fexecve(int, char *const[], char *const[]).
        fexecve: next(c"fexecve")
            .map(|p| unsafe { core::mem::transmute::<*mut c_void, FexecveFn>(p) }),
        // SAFETY: see above; execveat(int, const char*, char *const[], char *const[], int).
        execveat: next(c"execveat")
            .map(|p| unsafe { core::mem::transmute::<*mut c_void, ExecveatFn>(p) }),
        // SAFETY: see above; posix_spawn's prototype.
        posix_spawn: next(c"posix_spawn")
            .map(|p| unsafe { core::mem::transmute::<*mut c_void, PosixSpawnFn>(p) }),
        // SAFETY: see above; posix_spawnp has posix_spawn's prototype.
        posix_spawnp: next(c"posix_spawnp")
            .map(|p| unsafe { core::mem::transmute::<*mut c_void, PosixSpawnFn>(p) }),
    }
}

/// The next definition of `name` after this library in the lookup order.
fn next(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: RTLD_NEXT with a valid C string; dlsym only reads both.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        None
    } else {
        Some(p)
    }
}
