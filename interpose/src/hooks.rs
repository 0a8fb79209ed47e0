//! The exported exec family: `execve`, `execv`, `execvp`, `execvpe`,
//! `execl`, `execlp`, `execle`, `fexecve`, `execveat`, `posix_spawn`,
//! `posix_spawnp`.
//!
//! Each entry is hooked on its own: glibc's `execv`, `execvp` and `execl*`
//! call its internal `__execve`, never the exported `execve`, so an `execve`
//! hook alone would miss CPython's `subprocess` (which calls `execv` in a
//! vfork child when no env is passed) and Inductor's C++ builds.
//!
//! Every hook: typed view of its arguments ([`crate::raw`]), the gate
//! ([`crate::gate`]), then the real function with the child's environment
//! ([`crate::envp`]). All of it may run in a vfork child or between fork and
//! exec of a multithreaded parent: no allocation, lock, `std::env`,
//! logging, `dlsym` or panic from here down.
//!
//! `system()` and `popen()` are not hooked: glibc starts `/bin/sh` through
//! its internal spawn, the shell inherits `LD_PRELOAD` from `environ`, loads
//! this library and gates its own exec of the command (the integration tests
//! prove it for both).

use core::ffi::{c_char, c_int, CStr};

use policy::Kind;

use crate::envp;
use crate::gate::{self, Existence};
use crate::raw::{self, c_str, CStrArray};
use crate::real;
use crate::resolve::{candidate, search_path, DEFAULT_PATH, PATH_BUF};
use crate::state;
use crate::sys;

type Argv = *const *const c_char;

fn fail(errno: c_int) -> c_int {
    sys::set_errno(errno);
    -1
}

/// Runs `call` with the environment the child must get, or says why the
/// exec cannot go ahead.
fn with_child_env<R>(
    exe: Option<&CStr>,
    argv: CStrArray<'_>,
    env: CStrArray<'_>,
    call: impl FnOnce(*const *const c_char) -> R,
) -> Result<R, c_int> {
    let settings = state::get();
    let mut forced: state::Forced = [c""; 5];
    let wanted = state::wanted(settings, &mut forced);
    envp::with_env(env, &wanted, call).inspect_err(|&errno| {
        gate::cannot_exec_line(exe.unwrap_or(c"?"), argv, errno);
    })
}

/// The real function is missing (not glibc?): fail with ENOSYS, loudly.
fn missing(exe: Option<&CStr>, argv: CStrArray<'_>) -> c_int {
    gate::cannot_exec_line(exe.unwrap_or(c"?"), argv, libc::ENOSYS);
    libc::ENOSYS
}

/// The gate for the PATH-searching entries: the decision is taken on the
/// file the search will run, found the way glibc finds it (the caller's
/// `PATH`, or `/bin:/usr/bin` when unset). A compiler name found nowhere
/// fails with ENOENT without a decision: nothing would run.
fn gate_searched(file: &CStr, argv: CStrArray<'_>) -> Result<(), c_int> {
    if file.to_bytes().contains(&b'/') {
        return gate::check(file, argv, Existence::Check);
    }
    // SAFETY: glibc's execvp reads PATH from `environ` the same way
    // (getenv); only the calling thread exists in a vfork/fork child, and
    // otherwise the caller must not race setenv (getenv's own contract).
    let environ = unsafe { raw::environ() };
    let path_var = raw::lookup(environ, b"PATH").unwrap_or(DEFAULT_PATH);
    let mut buf = [0u8; PATH_BUF];
    let found = search_path(file.to_bytes(), path_var, &mut buf);
    match found.and_then(|n| candidate(&buf, n)) {
        Some(exe) => gate::check(exe, argv, Existence::Check),
        None if gate::classify(file, argv) == Kind::Other => Ok(()),
        None => Err(libc::ENOENT),
    }
}

fn do_execve(
    path: *const c_char,
    file: Option<&CStr>,
    argv: CStrArray<'_>,
    env: CStrArray<'_>,
) -> c_int {
    let Some(real_execve) = real::get().execve else {
        return fail(missing(file, argv));
    };
    if let Some(f) = file {
        if let Err(errno) = gate::check(f, argv, Existence::Check) {
            return fail(errno);
        }
    }
    let run = |envp| {
        // SAFETY: the caller's own path and argv, unchanged, and an envp that
        // is theirs or a NULL-terminated array alive for this call.
        unsafe { real_execve(path, argv.as_ptr(), envp) }
    };
    with_child_env(file, argv, env, run).unwrap_or_else(fail)
}

fn do_execvpe(
    file_ptr: *const c_char,
    file: Option<&CStr>,
    argv: CStrArray<'_>,
    env: CStrArray<'_>,
) -> c_int {
    let Some(real_execvpe) = real::get().execvpe else {
        return fail(missing(file, argv));
    };
    if let Some(f) = file {
        if let Err(errno) = gate_searched(f, argv) {
            return fail(errno);
        }
    }
    let run = |envp| {
        // SAFETY: as in `do_execve`; glibc's execvpe does the PATH search
        // (and the ENOEXEC shell fallback) itself.
        unsafe { real_execvpe(file_ptr, argv.as_ptr(), envp) }
    };
    with_child_env(file, argv, env, run).unwrap_or_else(fail)
}

/// `int execve(const char *path, char *const argv[], char *const envp[]);`
///
/// # Safety
///
/// execve(2)'s contract: `path` a C string, `argv` and `envp` null or
/// NULL-terminated arrays of C strings.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: execve's contract (see # Safety).
    let file = unsafe { c_str(path) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: as above, for envp.
    let env = unsafe { CStrArray::from_raw(envp) };
    do_execve(path, file, args, env)
}

/// `int execv(const char *path, char *const argv[]);`
///
/// # Safety
///
/// As `execve`, with the process environment.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    // SAFETY: execv's contract.
    let file = unsafe { c_str(path) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: execv passes `environ`, read under getenv's contract.
    let env = unsafe { raw::environ() };
    do_execve(path, file, args, env)
}

/// `int execvp(const char *file, char *const argv[]);`
///
/// # Safety
///
/// As `execv`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    // SAFETY: execvp's contract.
    let name = unsafe { c_str(file) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: execvp passes `environ`, read under getenv's contract.
    let env = unsafe { raw::environ() };
    do_execvpe(file, name, args, env)
}

/// `int execvpe(const char *file, char *const argv[], char *const envp[]);`
///
/// # Safety
///
/// As `execve`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: execvpe's contract.
    let name = unsafe { c_str(file) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: as above, for envp.
    let env = unsafe { CStrArray::from_raw(envp) };
    do_execvpe(file, name, args, env)
}

/// `int fexecve(int fd, char *const argv[], char *const envp[]);`
/// Classified by what `/proc/self/fd/<fd>` names.
///
/// # Safety
///
/// As `execve`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: fexecve's contract.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: as above, for envp.
    let env = unsafe { CStrArray::from_raw(envp) };
    let mut link = [0u8; 32];
    let mut target = [0u8; PATH_BUF];
    let mut w = crate::buf::Writer::new(&mut link);
    w.push(b"/proc/self/fd/").push_int(i64::from(fd));
    let exe = w
        .as_c_str()
        .and_then(|p| sys::readlink_c(p, &mut target))
        .or_else(|| args.first());
    let Some(real_fexecve) = real::get().fexecve else {
        return fail(missing(exe, args));
    };
    if let Some(e) = exe {
        if let Err(errno) = gate::check(e, args, Existence::Known) {
            return fail(errno);
        }
    }
    let run = |envp| {
        // SAFETY: the caller's descriptor and argv, and a valid envp.
        unsafe { real_fexecve(fd, argv, envp) }
    };
    with_child_env(exe, args, env, run).unwrap_or_else(fail)
}

/// `int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);`
/// (glibc ≥ 2.34). Classified by the absolute path, or by what
/// `/proc/self/fd/<dirfd>[/<path>]` names.
///
/// # Safety
///
/// As `execve`.
#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    flags: c_int,
) -> c_int {
    // SAFETY: execveat's contract.
    let file = unsafe { c_str(path) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: as above, for envp.
    let env = unsafe { CStrArray::from_raw(envp) };
    let Some(real_execveat) = real::get().execveat else {
        return fail(missing(file, args));
    };
    let mut proc_path = [0u8; PATH_BUF];
    let mut target = [0u8; PATH_BUF];
    let (exe, existence) = match file {
        Some(f) if dirfd == libc::AT_FDCWD || f.to_bytes().first() == Some(&b'/') => {
            (Some(f), Existence::Check)
        }
        Some(f) => {
            let whole_fd = f.to_bytes().is_empty() && flags & libc::AT_EMPTY_PATH != 0;
            let len = {
                let mut w = crate::buf::Writer::new(&mut proc_path);
                w.push(b"/proc/self/fd/").push_int(i64::from(dirfd));
                if !whole_fd {
                    w.push(b"/").push(f.to_bytes());
                }
                w.as_c_str().map(|c| c.to_bytes().len())
            };
            let named = len.and_then(|n| candidate(&proc_path, n));
            if whole_fd {
                (
                    named.and_then(|p| sys::readlink_c(p, &mut target)),
                    Existence::Known,
                )
            } else {
                (named, Existence::Check)
            }
        }
        None => (None, Existence::Check),
    };
    let exe = exe.or_else(|| args.first());
    if let Some(e) = exe {
        if let Err(errno) = gate::check(e, args, existence) {
            return fail(errno);
        }
    }
    let run = |envp| {
        // SAFETY: the caller's arguments unchanged, and a valid envp.
        unsafe { real_execveat(dirfd, path, argv, envp, flags) }
    };
    with_child_env(exe, args, env, run).unwrap_or_else(fail)
}

/// `int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
///                  const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);`
/// Refusals return the error number (EPERM), as posix_spawn reports errors.
///
/// # Safety
///
/// posix_spawn(3)'s contract.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    file_actions: *const libc::posix_spawn_file_actions_t,
    attrp: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> c_int {
    // SAFETY: posix_spawn's contract.
    let file = unsafe { c_str(path) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: as above, for envp.
    let env = unsafe { CStrArray::from_raw(envp) };
    let Some(real_spawn) = real::get().posix_spawn else {
        return missing(file, args);
    };
    if let Some(f) = file {
        if let Err(errno) = gate::check(f, args, Existence::Check) {
            return errno;
        }
    }
    let run = |envp| {
        // SAFETY: the caller's arguments unchanged, and a valid envp.
        unsafe { real_spawn(pid, path, file_actions, attrp, argv, envp) }
    };
    with_child_env(file, args, env, run).unwrap_or_else(|errno| errno)
}

/// `int posix_spawnp(…)`: as `posix_spawn`, searching PATH.
///
/// # Safety
///
/// posix_spawnp(3)'s contract.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    file_actions: *const libc::posix_spawn_file_actions_t,
    attrp: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> c_int {
    // SAFETY: posix_spawnp's contract.
    let name = unsafe { c_str(file) };
    // SAFETY: as above, for argv.
    let args = unsafe { CStrArray::from_raw(argv) };
    // SAFETY: as above, for envp.
    let env = unsafe { CStrArray::from_raw(envp) };
    let Some(real_spawnp) = real::get().posix_spawnp else {
        return missing(name, args);
    };
    if let Some(f) = name {
        if let Err(errno) = gate_searched(f, args) {
            return errno;
        }
    }
    let run = |envp| {
        // SAFETY: the caller's arguments unchanged, and a valid envp.
        unsafe { real_spawnp(pid, file, file_actions, attrp, argv, envp) }
    };
    with_child_env(name, args, env, run).unwrap_or_else(|errno| errno)
}

// execl, execlp and execle are C-variadic, which stable Rust cannot define.
// Each is a naked tail jump into `variadic.c`, which gathers the arguments
// into an array on its own stack and calls this library's execv, execvp or
// execve above. A jump keeps every register and the stack exactly as the
// caller left them, so the variadic ABI reaches the C function intact.
extern "C" {
    fn precompile_c_execl(path: *const c_char, arg: *const c_char, ...) -> c_int;
    fn precompile_c_execlp(file: *const c_char, arg: *const c_char, ...) -> c_int;
    fn precompile_c_execle(path: *const c_char, arg: *const c_char, ...) -> c_int;
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the execl* trampolines are written for x86_64 and aarch64 only");

macro_rules! variadic_trampoline {
    ($(#[$doc:meta])* $name:ident => $target:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C function's contract: a NULL-terminated list of C strings.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> c_int {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!("jmp {}", sym $target);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!("b {}", sym $target);
        }
    };
}

variadic_trampoline!(
    /// `int execl(const char *path, const char *arg, ... /*, (char *) NULL */);`
    execl => precompile_c_execl
);
variadic_trampoline!(
    /// `int execlp(const char *file, const char *arg, ... /*, (char *) NULL */);`
    execlp => precompile_c_execlp
);
variadic_trampoline!(
    /// `int execle(const char *path, const char *arg, ... /*, (char *) NULL, char *const envp[] */);`
    execle => precompile_c_execle
);
