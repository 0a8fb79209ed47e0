//! What an exec asks for, read from the calling thread: the path and argv
//! out of its memory (`/proc/<tid>/mem`), and the file opened the way that
//! thread's exec resolves it (its root, its working directory, its dirfd,
//! its `/proc/self`), not the way the supervisor would.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

/// The most argv the supervisor reads (bytes of strings plus pointers):
/// above the kernel's own limit with an 8 MiB stack (2 MiB), so a real exec
/// is never cut; past it the exec is refused, not decided on a part.
const ARGV_BYTES_MAX: usize = 8 << 20;
/// The longest path read (PATH_MAX).
pub const PATH_MAX: usize = 4096;
const PAGE: u64 = 4096;

pub struct Target {
    pub tid: i32,
    mem: File,
}

/// The program file of an exec, as the supervisor could open it.
pub enum Program {
    /// The kernel will fail this exec itself (no such file, a directory in
    /// the way, no search permission): nothing runs.
    Missing,
    /// Not a regular file: the kernel refuses to run it (EACCES).
    NotRegular,
    /// There, but the supervisor may not read it (refused: what it is
    /// cannot be checked).
    Unreadable,
    Readable(Box<Opened>),
}

pub struct Opened {
    pub file: File,
    /// Where it really is, symlinks resolved (in the supervisor's view).
    pub real: PathBuf,
    pub meta: std::fs::Metadata,
}

impl Target {
    pub fn open(tid: i32) -> io::Result<Target> {
        let mem = File::open(format!("/proc/{tid}/mem"))?;
        Ok(Target { tid, mem })
    }

    /// (process id, parent's process id), for a report; read only then, as
    /// most execs are never reported.
    pub fn ids(&self) -> (i32, i32) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.tid)).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<i32>().ok())
        };
        (
            field("Tgid:").unwrap_or(self.tid),
            field("PPid:").unwrap_or(0),
        )
    }

    /// `RANK` as the process started with it (its initial environment, the
    /// value the shim journals), for a report.
    pub fn rank(&self) -> Option<i64> {
        let environ = std::fs::read(format!("/proc/{}/environ", self.tid)).ok()?;
        let value = environ.split(|&b| b == 0).find_map(|e| {
            e.strip_prefix(policy::env::RANK.as_bytes())?
                .strip_prefix(b"=")
        })?;
        policy::env::rank(std::str::from_utf8(value).ok())
    }

    /// The NUL-terminated string at `addr`, at most `max` bytes.
    pub fn c_string(&self, addr: u64, max: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = addr;
        let mut chunk = [0u8; PAGE as usize];
        loop {
            // never read across a page: the next one may be unmapped
            let want = (PAGE - at % PAGE) as usize;
            let n = self.mem.read_at(&mut chunk[..want], at)?;
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            if let Some(nul) = chunk[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..nul]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..n]);
            if out.len() > max {
                return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
            }
            at += n as u64;
        }
    }

    /// The NULL-terminated array of strings at `addr` (NULL: none).
    pub fn argv(&self, addr: u64) -> io::Result<Vec<Vec<u8>>> {
        let mut args = Vec::new();
        if addr == 0 {
            return Ok(args);
        }
        let mut total = 0usize;
        for i in 0.. {
            let mut word = [0u8; 8];
            if self.mem.read_at(&mut word, addr + 8 * i)? != 8 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            let ptr = u64::from_ne_bytes(word);
            if ptr == 0 {
                break;
            }
            let arg = self.c_string(ptr, ARGV_BYTES_MAX - total)?;
            total += arg.len() + 9;
            if total > ARGV_BYTES_MAX {
                return Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
            args.push(arg);
        }
        Ok(args)
    }

    pub fn cwd(&self) -> Vec<u8> {
        std::fs::read_link(format!("/proc/{}/cwd", self.tid))
            .map(|p| p.into_os_string().into_encoded_bytes())
            .unwrap_or_default()
    }

    /// `path` as the thread's exec would open it: relative to `dirfd` (its
    /// descriptor; `None` for its working directory), or the descriptor
    /// itself when `empty_path` (`execveat(fd, "", AT_EMPTY_PATH)`, fexecve).
    pub fn program(
        &self,
        dirfd: Option<i32>,
        path: &[u8],
        empty_path: bool,
        nofollow: bool,
    ) -> io::Result<Program> {
        let opath = match self.open_path(dirfd, path, empty_path, nofollow) {
            Ok(f) => f,
            Err(e) => {
                return match e.raw_os_error() {
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG | libc::EACCES) => {
                        Ok(Program::Missing)
                    }
                    _ => Err(e),
                }
            }
        };
        let meta = opath.metadata()?;
        if !meta.file_type().is_file() {
            return Ok(Program::NotRegular);
        }
        let me = format!("/proc/self/fd/{}", opath.as_raw_fd());
        let real = std::fs::read_link(&me).unwrap_or_default();
        // reopened through our own descriptor: the very file resolved above
        match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(&me)
        {
            Ok(file) => Ok(Program::Readable(Box::new(Opened { file, real, meta }))),
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => Ok(Program::Unreadable),
            Err(e) => Err(e),
        }
    }

    fn open_path(
        &self,
        dirfd: Option<i32>,
        path: &[u8],
        empty_path: bool,
        nofollow: bool,
    ) -> io::Result<File> {
        let tid = self.tid;
        let o_path = |p: &str| {
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
                .open(p)
        };
        if empty_path && path.is_empty() {
            let fd = dirfd.ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            return o_path(&format!("/proc/{tid}/fd/{fd}"));
        }
        // The thread's own /proc/self and descriptors: rewritten to its pid,
        // or they would name the supervisor's.
        if let Some(own) = own_proc_path(path, tid) {
            return o_path(&own);
        }
        let (base, rooted) = if path.first() == Some(&b'/') {
            (format!("/proc/{tid}/root"), true)
        } else if let Some(fd) = dirfd {
            (format!("/proc/{tid}/fd/{fd}"), false)
        } else {
            (format!("/proc/{tid}/cwd"), false)
        };
        let dir = o_path(&base)?;
        let rel: &[u8] = if rooted { &path[1..] } else { path };
        let rel = if rel.is_empty() { b".".as_slice() } else { rel };
        // Any other way into a /proc magic link (a symlink to /proc/self/fd/N)
        // would resolve against the supervisor: refused, ELOOP.
        let mut resolve = RESOLVE_NO_MAGICLINKS;
        if rooted {
            resolve |= RESOLVE_IN_ROOT;
        }
        let mut flags = libc::O_PATH | libc::O_CLOEXEC;
        if nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        openat2(&dir, rel, flags as u64, resolve)
    }
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_IN_ROOT: u64 = 0x10;

/// `struct open_how` (linux/openat2.h; not in the libc crate).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn openat2(dir: &File, path: &[u8], flags: u64, resolve: u64) -> io::Result<File> {
    let path =
        std::ffi::CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow {
        flags,
        mode: 0,
        resolve,
    };
    // SAFETY: `path` is NUL-terminated and `how` is a complete open_how,
    // both alive for the call; the size passed is the struct's own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just returned to us alone.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// `/proc/self/…`, `/proc/thread-self/…` and `/dev/fd/…` (and `/dev/stdin`
/// and friends) rewritten to the calling thread's own `/proc/<tid>` (a
/// thread's entry shows its process's descriptors, executable and root).
fn own_proc_path(path: &[u8], tid: i32) -> Option<String> {
    let path = OsStr::from_bytes(path).to_str()?;
    let fds = |n: &str| format!("/proc/{tid}/fd/{n}");
    for (prefix, to) in [
        ("/proc/self/", format!("/proc/{tid}/")),
        ("/proc/thread-self/", format!("/proc/{tid}/")),
        ("/dev/fd/", fds("")),
    ] {
        if let Some(rest) = path.strip_prefix(prefix) {
            return Some(format!("{to}{rest}"));
        }
    }
    match path {
        "/dev/stdin" => Some(fds("0")),
        "/dev/stdout" => Some(fds("1")),
        "/dev/stderr" => Some(fds("2")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_proc_paths_name_the_thread_not_the_supervisor() {
        assert_eq!(
            own_proc_path(b"/proc/self/fd/3", 12).unwrap(),
            "/proc/12/fd/3"
        );
        assert_eq!(
            own_proc_path(b"/proc/thread-self/exe", 12).unwrap(),
            "/proc/12/exe"
        );
        assert_eq!(own_proc_path(b"/dev/fd/7", 12).unwrap(), "/proc/12/fd/7");
        assert_eq!(own_proc_path(b"/dev/stdin", 12).unwrap(), "/proc/12/fd/0");
        assert!(own_proc_path(b"/usr/bin/gcc", 12).is_none());
        assert!(own_proc_path(b"/proc/selfish", 12).is_none());
    }

    #[test]
    fn reads_strings_and_argv_from_a_live_process_memory() {
        // our own memory, through /proc: the same reads as for a target
        let me = Target::open(std::process::id() as i32).unwrap();
        let strings = [c"g++", c"-c", c"a.cc"];
        let mut ptrs: Vec<u64> = strings.iter().map(|s| s.as_ptr() as u64).collect();
        ptrs.push(0);
        let argv = me.argv(ptrs.as_ptr() as u64).unwrap();
        assert_eq!(
            argv,
            vec![b"g++".to_vec(), b"-c".to_vec(), b"a.cc".to_vec()]
        );
        assert_eq!(
            me.c_string(strings[2].as_ptr() as u64, 10).unwrap(),
            b"a.cc"
        );
        assert!(me.argv(0).unwrap().is_empty());
        assert!(me.c_string(8, 10).is_err(), "page 0 is never mapped");
    }
}
