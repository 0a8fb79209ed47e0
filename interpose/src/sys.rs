//! Thin, exec-path-safe wrappers over the system calls the shim makes: each
//! is one libc call on caller-owned buffers, no allocation, no lock.

use core::ffi::{c_char, c_int, CStr};

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(value: c_int) {
    // SAFETY: as in `errno`; writing our own thread's errno.
    unsafe { *libc::__errno_location() = value }
}

/// `open(path, O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC, 0644)`; -1 on error.
pub fn open_append(path: &CStr) -> c_int {
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC;
    // SAFETY: `path` is a valid C string; the mode argument is passed as
    // the variadic third argument `open` expects with O_CREAT.
    unsafe { libc::open(path.as_ptr(), flags, 0o644 as libc::c_uint) }
}

pub fn close(fd: c_int) {
    // SAFETY: closing a descriptor this module opened.
    unsafe { libc::close(fd) };
}

/// ONE `write()` of the whole buffer (retried only on EINTR); true when it
/// all went out. Never split: a split write could interleave with another
/// process's append.
pub fn write_all_once(fd: c_int, bytes: &[u8]) -> bool {
    loop {
        // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        return usize::try_from(n).ok() == Some(bytes.len());
    }
}

/// Writes a message to stderr, keeping the caller's errno.
pub fn write_stderr(bytes: &[u8]) {
    let saved = errno();
    write_all_once(libc::STDERR_FILENO, bytes);
    set_errno(saved);
}

/// The current directory into `buf`; empty when it cannot be read.
pub fn getcwd(buf: &mut [u8]) -> &[u8] {
    // SAFETY: `buf` is writable for `buf.len()` bytes; getcwd NUL-terminates
    // within that length or fails.
    let p = unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
    if p.is_null() {
        return b"";
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    buf.get(..end).unwrap_or(b"")
}

/// Seconds since the epoch (CLOCK_REALTIME).
pub fn now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

pub fn getpid() -> i64 {
    // SAFETY: no preconditions (a system call in glibc ≥ 2.25, correct in
    // a vfork child).
    i64::from(unsafe { libc::getpid() })
}

pub fn getppid() -> i64 {
    // SAFETY: no preconditions.
    i64::from(unsafe { libc::getppid() })
}

pub fn gettid() -> i64 {
    // SAFETY: SYS_gettid takes no arguments.
    i64::from(unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t)
}

/// `readlink(path)` into `buf`; the target's bytes, or `None` when `path`
/// is not a symlink (or the target did not fit).
pub fn readlink<'b>(path: &CStr, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    // SAFETY: `path` is a C string, `buf` is writable for its length;
    // readlink writes at most that many bytes.
    let n = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).ok()?;
    if n >= buf.len() {
        return None; // possibly cut: treat as unresolvable
    }
    buf.get(..n)
}

/// `readlink(path)` as a C string in `buf`.
pub fn readlink_c<'b>(path: &CStr, buf: &'b mut [u8]) -> Option<&'b CStr> {
    let n = readlink(path, buf)?.len();
    let slot = buf.get_mut(n)?;
    *slot = 0;
    CStr::from_bytes_with_nul(buf.get(..n.checked_add(1)?)?).ok()
}

/// The first bytes of the file at `path` (at most `buf.len()`), read with one
/// `read`; `None` when it cannot be opened or read. Opened non-blocking, so a
/// FIFO or a device never stalls the exec.
pub fn read_head(path: &CStr, buf: &mut [u8]) -> Option<usize> {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: `path` is a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `buf` is writable for `buf.len()` bytes; `fd` is ours.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    close(fd);
    usize::try_from(n).ok()
}

/// As [`read_head`], without following a symlink at the end of `path`:
/// `Err(ELOOP)` for one (Linux's `O_NOFOLLOW`), `Err(errno)` when `path`
/// cannot be opened; `Ok(0)` when it opens but cannot be read (a
/// directory). Ok means `path` itself is no symlink.
pub fn read_head_nofollow(path: &CStr, buf: &mut [u8]) -> Result<usize, c_int> {
    let flags =
        libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW;
    // SAFETY: `path` is a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `buf` is writable for `buf.len()` bytes; `fd` is ours.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    close(fd);
    Ok(usize::try_from(n).unwrap_or(0))
}

/// A file's identity (device, inode).
pub type FileId = (u64, u64);

/// Whether `path` is something `execve` would run: an existing regular file
/// the effective user may execute; its identity when it is. `Err(errno)`
/// says why not, with the errno `execve` itself would give (ENOENT,
/// ENOTDIR, EACCES, …).
pub fn check_executable(path: &CStr) -> Result<FileId, c_int> {
    let st = stat(path)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(libc::EACCES);
    }
    // SAFETY: `path` is a C string; faccessat only reads it.
    let rc =
        unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) };
    if rc != 0 {
        return Err(errno());
    }
    Ok((st.st_dev, st.st_ino))
}

/// `stat(path)` (following symlinks).
pub fn stat(path: &CStr) -> Result<libc::stat, c_int> {
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `path` is a C string and `st` a valid out-parameter.
    if unsafe { libc::stat(path.as_ptr(), &mut st) } != 0 {
        return Err(errno());
    }
    Ok(st)
}

/// The path the running program was started with, as `execve` got it
/// (`AT_EXECFN`: a `#!` script's own path, not its interpreter's).
pub fn execfn() -> Option<&'static CStr> {
    // SAFETY: getauxval only reads the auxiliary vector the kernel set up.
    let p = unsafe { libc::getauxval(libc::AT_EXECFN) } as usize as *const c_char;
    // SAFETY: AT_EXECFN is 0 (absent) or the address of the NUL-terminated
    // path the kernel copied to the top of the initial stack, which stays
    // there, unchanged, for the life of the process.
    unsafe { crate::raw::c_str(p) }
}

/// The current directory into `buf` (std's `current_dir` without std);
/// `Err(errno)` when it cannot be read. Not on the exec path only by use:
/// it is one system call.
pub fn current_dir(buf: &mut [u8]) -> Result<&[u8], c_int> {
    // SAFETY: `buf` is writable for `buf.len()` bytes; getcwd NUL-terminates
    // within that length or fails.
    let p = unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
    if p.is_null() {
        return Err(errno());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    Ok(buf.get(..end).unwrap_or(b""))
}

/// `realpath(path)`: absolute, symlinks and `.`/`..` resolved (std's
/// `fs::canonicalize`). Allocates: not on the exec path.
pub fn realpath(path: &CStr) -> Option<alloc::ffi::CString> {
    // SAFETY: `path` is a C string; a null `resolved` makes realpath malloc
    // the result.
    let p = unsafe { libc::realpath(path.as_ptr(), core::ptr::null_mut()) };
    // SAFETY: realpath returned null or a NUL-terminated malloc'd string.
    let owned = unsafe { crate::raw::c_str(p) }.map(alloc::ffi::CString::from);
    // SAFETY: `p` is null or malloc'd by realpath, and copied above.
    unsafe { libc::free(p.cast()) };
    owned
}

/// Whether `path` is a directory (following symlinks), as std's `is_dir`.
pub fn is_dir(path: &CStr) -> bool {
    stat(path).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// `setenv(name, value, 1)`; false when it fails. Not on the exec path,
/// and only before `main` (the constructor), as `std::env::set_var` was.
pub fn setenv(name: &CStr, value: &CStr) -> bool {
    // SAFETY: both are C strings; setenv copies them.
    unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) == 0 }
}

extern "C" {
    // tls.c: the calling thread's `serving()` depth, a C thread local (a
    // Rust thread local needs std).
    fn precompile_c_serving_depth() -> u32;
    fn precompile_c_set_serving_depth(depth: u32);
}

/// The calling thread's serving depth. Exec-path safe: a thread-local read.
pub fn serving_depth() -> u32 {
    // SAFETY: reads this thread's own counter; no preconditions.
    unsafe { precompile_c_serving_depth() }
}

pub fn set_serving_depth(depth: u32) {
    // SAFETY: writes this thread's own counter; no preconditions.
    unsafe { precompile_c_set_serving_depth(depth) }
}
