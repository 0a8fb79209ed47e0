//! The journal: where it is (armed at start by `PRECOMPILE_JOURNAL` or later
//! through the C ABI) and the one write of a record.
//!
//! The path lives in a leaked, never-freed allocation published through an
//! atomic pointer: [`arm`] (not on the exec path) allocates, the exec path
//! only loads the pointer. Re-arming leaks the previous path on purpose: a
//! vfork child or another thread may still be reading it, and captures arm a
//! handful of times per process.
//!
//! A record is formatted by `policy::journal::format_record` into a stack
//! buffer and written with ONE `write()` on an `O_APPEND` descriptor, so
//! lines from many processes never interleave (a regular-file append of
//! one buffer is atomic with respect to other appends on Linux).

use alloc::boxed::Box;
use alloc::ffi::CString;
use core::ffi::{c_int, CStr};
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::raw::CStrArray;
use crate::sys;

/// `PRECOMPILE_JOURNAL=<absolute path>`: the environment entry children get,
/// and (after the `=`) the path this process appends to.
pub struct JournalPath {
    entry: CString,
}

const PREFIX: &[u8] = b"PRECOMPILE_JOURNAL=";

impl JournalPath {
    /// `path` made absolute against `cwd` (children may run elsewhere).
    pub fn new(path: &[u8], cwd: &[u8]) -> Option<JournalPath> {
        if path.is_empty() {
            return None;
        }
        let mut entry = PREFIX.to_vec();
        if path.first() != Some(&b'/') {
            entry.extend_from_slice(cwd);
            if !cwd.ends_with(b"/") {
                entry.push(b'/');
            }
        }
        entry.extend_from_slice(path);
        CString::new(entry).ok().map(|entry| JournalPath { entry })
    }

    /// The whole `PRECOMPILE_JOURNAL=…` entry.
    pub fn entry(&self) -> &CStr {
        &self.entry
    }

    /// The path alone, NUL-terminated.
    pub fn path(&self) -> &CStr {
        let bytes = self.entry.as_bytes_with_nul();
        bytes
            .get(PREFIX.len()..)
            .and_then(|p| CStr::from_bytes_with_nul(p).ok())
            .unwrap_or(c"")
    }
}

static ARMED: AtomicPtr<JournalPath> = AtomicPtr::new(ptr::null_mut());
static AT_START: AtomicPtr<JournalPath> = AtomicPtr::new(ptr::null_mut());

fn publish(path: Option<JournalPath>) -> *mut JournalPath {
    match path {
        Some(p) => Box::into_raw(Box::new(p)),
        None => ptr::null_mut(),
    }
}

/// Records the startup journal (from `PRECOMPILE_JOURNAL`) and arms it.
pub fn set_startup(path: Option<JournalPath>) {
    let p = publish(path);
    AT_START.store(p, Ordering::SeqCst);
    ARMED.store(p, Ordering::SeqCst);
}

/// Arms `path` (made absolute against the current directory); the file is
/// opened once now so that an unusable path is an error here, not a silent
/// loss later. Not on the exec path: allocates.
pub fn arm(path: &[u8]) -> Result<(), c_int> {
    let mut cwd_buf = [0u8; crate::resolve::PATH_BUF];
    let cwd = sys::current_dir(&mut cwd_buf)?;
    let jp = JournalPath::new(path, cwd).ok_or(libc::EINVAL)?;
    let fd = sys::open_append(jp.path());
    if fd < 0 {
        return Err(sys::errno());
    }
    sys::close(fd);
    ARMED.store(publish(Some(jp)), Ordering::SeqCst);
    Ok(())
}

/// Back to the startup journal, if there was one.
pub fn disarm() {
    ARMED.store(AT_START.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// The armed journal, if any. One atomic load: exec-path safe.
pub fn armed() -> Option<&'static JournalPath> {
    let p = ARMED.load(Ordering::SeqCst);
    // SAFETY: non-null values come only from `publish`, a leaked Box that is
    // never freed, so the reference is valid for 'static.
    unsafe { p.as_ref() }
}

/// One decision, as `policy` formats it.
pub struct Entry<'a> {
    pub exe: &'a [u8],
    pub argv: CStrArray<'a>,
    pub kind: policy::Kind,
    pub verdict: policy::Verdict,
}

/// Appends one record to the armed journal, if any. Exec-path safe: stack
/// buffers, raw syscalls, no allocation. A journal that cannot be opened
/// loses the record silently: the decision itself stands either way.
pub fn record(e: &Entry<'_>) {
    let Some(journal) = armed() else { return };
    let mut cwd_buf = [0u8; 4096];
    let cwd = sys::getcwd(&mut cwd_buf);
    let mut line = [0u8; policy::journal::LINE_BUDGET + 1];
    let len = {
        let budget = line
            .get_mut(..policy::journal::LINE_BUDGET)
            .unwrap_or(&mut []);
        policy::journal::format_record(
            budget,
            policy::journal::Fields {
                time: sys::now(),
                pid: sys::getpid(),
                ppid: sys::getppid(),
                tid: sys::gettid(),
                rank: crate::state::get().rank,
                exe: e.exe,
                argv: e.argv.bytes(),
                cwd,
                kind: e.kind,
                verdict: e.verdict,
                source: "shim",
            },
        )
    };
    if len == 0 {
        return;
    }
    let mut len = len.min(policy::journal::LINE_BUDGET);
    if line.get(len.saturating_sub(1)) != Some(&b'\n') {
        if let Some(slot) = line.get_mut(len) {
            *slot = b'\n';
            len = len.saturating_add(1);
        }
    }
    let fd = sys::open_append(journal.path());
    if fd < 0 {
        return;
    }
    sys::write_all_once(fd, line.get(..len).unwrap_or(b""));
    sys::close(fd);
}

/// Appends a raw line (used by tests of the write discipline).
#[cfg(test)]
pub fn append_line(path: &CStr, line: &[u8]) -> bool {
    let fd = sys::open_append(path);
    if fd < 0 {
        return false;
    }
    let ok = sys::write_all_once(fd, line);
    sys::close(fd);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_made_absolute() {
        let j = JournalPath::new(b"j.jsonl", b"/tmp/x").unwrap();
        assert_eq!(j.entry().to_bytes(), b"PRECOMPILE_JOURNAL=/tmp/x/j.jsonl");
        assert_eq!(j.path().to_bytes(), b"/tmp/x/j.jsonl");
        let j = JournalPath::new(b"/abs/j", b"/tmp/x").unwrap();
        assert_eq!(j.path().to_bytes(), b"/abs/j");
        let j = JournalPath::new(b"j", b"/").unwrap();
        assert_eq!(j.path().to_bytes(), b"/j");
        assert!(JournalPath::new(b"", b"/").is_none());
        assert!(JournalPath::new(b"a\0b", b"/").is_none());
    }

    #[test]
    fn appends_whole_lines() {
        let dir =
            std::env::temp_dir().join(format!("precompile-journal-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("j");
        let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert!(append_line(&c, b"{\"a\":1}\n"));
        assert!(append_line(&c, b"{\"a\":2}\n"));
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n{\"a\":2}\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
