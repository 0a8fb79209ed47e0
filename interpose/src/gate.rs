//! The decision for one exec: classify (following symlinks), decide under
//! the live lock, journal, and on refusal say so in one stderr line.
//! Exec-path safe: stack buffers, atomics, raw system calls.

use core::ffi::{c_int, CStr};
use core::sync::atomic::{AtomicU64, Ordering};

use policy::{Kind, Verdict};

use crate::buf::Writer;
use crate::journal;
use crate::raw::CStrArray;
use crate::resolve::{resolve_symlinks, PATH_BUF};
use crate::script;
use crate::state;
use crate::sys;

/// What running `exe` (a path, as `execve` gets it) with `argv` is.
pub fn classify(exe: &CStr, argv: CStrArray<'_>) -> Kind {
    let mut out = [0u8; PATH_BUF];
    let resolved = resolve_symlinks(exe, &mut out);
    state::get()
        .rules
        .classify(exe.to_bytes(), resolved, argv.bytes())
}

/// What running `exe` is: [`classify`], and when that says `Other`, what a
/// `#!` script runs (an interpreter that is a compiler is gated too).
///
/// Both questions read the file system: whether `exe` is a symlink (to
/// classify its target too) and what its first bytes are. One `open` with
/// `O_NOFOLLOW` asks both for the usual case, a program that is no symlink
/// (every exec of the tree pays for this, in the parent: readlink, then open,
/// read and close, were four system calls, now three); a symlink (`ELOOP`)
/// or a file that cannot be read is asked about as before, one question at a
/// time.
fn kind_of(exe: &CStr, argv: CStrArray<'_>) -> Kind {
    let rules = &state::get().rules;
    let mut head = [0u8; policy::script::HEAD];
    match sys::read_head_nofollow(exe, &mut head) {
        // no symlink: nothing to resolve, and its first bytes are read
        Ok(n) => match rules.classify(exe.to_bytes(), None, argv.bytes()) {
            Kind::Other => script::kind(rules, exe, Some(head.get(..n).unwrap_or(&[])), argv),
            kind => kind,
        },
        // nothing there: no symlink to resolve, no bytes to read
        Err(libc::ENOENT | libc::ENOTDIR) => rules.classify(exe.to_bytes(), None, argv.bytes()),
        Err(_) => match classify(exe, argv) {
            Kind::Other => script::kind(rules, exe, None, argv),
            kind => kind,
        },
    }
}

/// Whether the file must exist before a decision is taken (and journaled).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Existence {
    /// A path: a compiler that is not there is not run, so nothing is
    /// decided; the exec fails with the errno `execve` would give (this is
    /// also why a shell's or CPython's PATH walk, which calls `execve` on
    /// each candidate, journals only the one that exists).
    Check,
    /// An open descriptor (`fexecve`): it exists.
    Known,
}

/// `Ok` when the exec may go ahead; `Err(errno)` when it must fail.
#[inline(never)]
pub fn check(exe: &CStr, argv: CStrArray<'_>, existence: Existence) -> Result<(), c_int> {
    let kind = kind_of(exe, argv);
    if kind == Kind::Other {
        return Ok(());
    }
    let id = match existence {
        Existence::Check => sys::check_executable(exe)?,
        Existence::Known => sys::stat(exe).map_or((0, 0), |st| (st.st_dev, st.st_ino)),
    };
    let settings = state::get();
    let verdict = policy::decide(kind, state::lock(), settings.rules.strict());
    if !verdict.allowed && repeated_refusal(exe, id, argv) {
        return Err(libc::EPERM);
    }
    journal::record(&journal::Entry {
        exe: exe.to_bytes(),
        argv,
        kind,
        verdict,
    });
    if verdict.allowed {
        return Ok(());
    }
    refused_line(exe, argv, kind, verdict);
    Err(libc::EPERM)
}

/// The last refusal, packed into one atomic word: the high half hashes
/// (pid, file identity, argv pointer), the low half the path string.
static LAST_REFUSAL: AtomicU64 = AtomicU64::new(0);

fn mix(parts: &[u64]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &part in parts {
        h = (h ^ part).wrapping_mul(0x0100_0000_01b3);
        h ^= h >> 29;
    }
    (h ^ (h >> 32)) as u32
}

fn path_hash(path: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in path {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h ^ (h >> 32)) as u32
}

/// True when this refusal is the same PATH walk reaching the same file again.
///
/// A shell's or CPython's PATH walk does not stop at EPERM: it tries the
/// remaining candidates, and with a merged /usr (`/bin -> /usr/bin`) the
/// same compiler comes up again under another path. That repeat is refused
/// but neither journaled nor reported a second time. A new attempt (the same
/// path again, or another file, argv or process) is. The pid is part of the
/// key, so a vfork child's store (into its parent's memory) never matches
/// the parent.
fn repeated_refusal(exe: &CStr, id: sys::FileId, argv: CStrArray<'_>) -> bool {
    let key = mix(&[
        sys::getpid() as u64,
        id.0,
        id.1,
        argv.as_ptr() as usize as u64,
    ]);
    let path = path_hash(exe.to_bytes());
    let last = LAST_REFUSAL.load(Ordering::SeqCst);
    let (last_key, last_path) = ((last >> 32) as u32, last as u32);
    if last_key == key && last_path != path {
        return true;
    }
    LAST_REFUSAL.store((u64::from(key) << 32) | u64::from(path), Ordering::SeqCst);
    false
}

/// Room for one stderr line.
const LINE: usize = 1024;
/// The command is cut past this many bytes.
const COMMAND_MAX: usize = 600;

/// `` `g++ -c a.c -o a.o` ``, cut with `...` when long; `exe` when argv is empty.
fn push_command(w: &mut Writer<'_>, exe: &CStr, argv: CStrArray<'_>) {
    w.push(b"`");
    let start = w.len();
    let mut any = false;
    for (i, arg) in argv.bytes().enumerate() {
        if w.len().saturating_sub(start).saturating_add(arg.len()) > COMMAND_MAX {
            w.push(b" ...");
            any = true;
            break;
        }
        if i > 0 {
            w.push(b" ");
        }
        w.push(arg);
        any = true;
    }
    if !any {
        w.push(exe.to_bytes());
    }
    w.push(b"`");
}

fn refused_line(exe: &CStr, argv: CStrArray<'_>, kind: Kind, verdict: Verdict) {
    let mut buf = [0u8; LINE];
    let mut w = Writer::new(&mut buf);
    w.push(b"precompile: refused to run ");
    w.push(if kind == Kind::Probe {
        b"compiler probe ".as_slice()
    } else {
        b"compiler "
    });
    push_command(&mut w, exe, argv);
    w.push(b" (pid ").push_int(sys::getpid()).push(b"): ");
    w.push_str(verdict.reason.explain());
    w.push(b"; capture it ahead of time or run outside the lockdown");
    sys::write_stderr(w.finish_line(b"..."));
}

/// The exec is refused because the environment that keeps the child locked
/// down does not fit the fixed buffer (fail closed).
pub fn cannot_exec_line(exe: &CStr, argv: CStrArray<'_>, errno: c_int) {
    let mut buf = [0u8; LINE];
    let mut w = Writer::new(&mut buf);
    w.push(b"precompile: refused to run ");
    push_command(&mut w, exe, argv);
    w.push(b" (pid ").push_int(sys::getpid()).push(b"): ");
    if errno == libc::E2BIG {
        w.push(b"its environment does not fit the shim's fixed buffer (");
        w.push_int(crate::envp::MAX_ENV as i64);
        w.push(b" entries, ");
        w.push_int(crate::envp::PRELOAD_BUF as i64);
        w.push(b" bytes of LD_PRELOAD), so the lockdown could not be handed on (E2BIG)");
    } else {
        w.push(b"the real exec function was not found (ENOSYS)");
    }
    sys::write_stderr(w.finish_line(b"..."));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn the_command_is_quoted_and_cut_when_long() {
        let args: Vec<CString> = ["g++", "-c", "a.c", "-o", "a.o"]
            .iter()
            .map(|s| CString::new(*s).unwrap())
            .collect();
        let mut ptrs: Vec<_> = args.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: `ptrs` is a NULL-terminated array of live C strings.
        let argv = unsafe { CStrArray::from_raw(ptrs.as_ptr()) };
        let mut buf = [0u8; LINE];
        let mut w = Writer::new(&mut buf);
        push_command(&mut w, c"/usr/bin/g++", argv);
        assert_eq!(w.as_bytes(), b"`g++ -c a.c -o a.o`");

        let long = CString::new("x".repeat(COMMAND_MAX)).unwrap();
        let ptrs = [args[0].as_ptr(), long.as_ptr(), std::ptr::null()];
        // SAFETY: as above.
        let argv = unsafe { CStrArray::from_raw(ptrs.as_ptr()) };
        let mut buf = [0u8; LINE];
        let mut w = Writer::new(&mut buf);
        push_command(&mut w, c"/usr/bin/g++", argv);
        assert_eq!(w.as_bytes(), b"`g++ ...`");

        let mut buf = [0u8; LINE];
        let mut w = Writer::new(&mut buf);
        push_command(&mut w, c"/usr/bin/g++", CStrArray::empty());
        assert_eq!(w.as_bytes(), b"`/usr/bin/g++`");
    }
}
