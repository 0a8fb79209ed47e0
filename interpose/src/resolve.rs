//! Which file an exec would really run: the PATH search of `execvp` and
//! `posix_spawnp`, and the symlink chain behind a name
//! (`/usr/bin/c++ → /etc/alternatives/c++ → /usr/bin/g++ → g++-12`).
//! Stack buffers only: this runs in the exec path.

use core::ffi::CStr;

use crate::buf::Writer;
use crate::sys;

/// Room for one path (Linux's PATH_MAX).
pub const PATH_BUF: usize = 4096;

/// More hops than any real alternatives chain; the kernel's own limit is 40.
const MAX_HOPS: usize = 16;

/// glibc's search path when PATH is unset.
pub const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// Where glibc's `execvp` would find `name`: the first entry of `path_var`
/// (colon-separated, an empty entry meaning the current directory) under
/// which `name` is an executable regular file. Writes the NUL-terminated
/// candidate into `buf` and returns its length without the NUL.
///
/// A `name` containing `/` is not searched (the caller uses it as is).
pub fn search_path(name: &[u8], path_var: &[u8], buf: &mut [u8]) -> Option<usize> {
    if name.is_empty() || name.contains(&b'/') {
        return None;
    }
    for dir in path_var.split(|&b| b == b':') {
        let mut w = Writer::new(&mut *buf);
        if !dir.is_empty() {
            w.push(dir);
            if !dir.ends_with(b"/") {
                w.push(b"/");
            }
        }
        w.push(name);
        let len = w.len();
        let Some(candidate) = w.as_c_str() else {
            continue;
        };
        if sys::check_executable(candidate).is_ok() {
            return Some(len);
        }
    }
    None
}

/// The NUL-terminated path `search_path` left in `buf`.
pub fn candidate(buf: &[u8], len: usize) -> Option<&CStr> {
    CStr::from_bytes_with_nul(buf.get(..len.checked_add(1)?)?).ok()
}

/// Follows `path` through at most [`MAX_HOPS`] symlinks and returns where
/// the chain ends, or `None` when `path` is not a symlink at all. A relative
/// link target is taken relative to the link's directory. The result is the
/// last name reached (a chain longer than the hop limit stops there).
pub fn resolve_symlinks<'b>(path: &CStr, out: &'b mut [u8; PATH_BUF]) -> Option<&'b [u8]> {
    let mut link = [0u8; PATH_BUF];
    let mut len = {
        let mut w = Writer::new(&mut out[..]);
        w.push(path.to_bytes());
        w.as_c_str()?;
        w.len()
    };
    let mut hops = 0;
    while hops < MAX_HOPS {
        let current = candidate(&out[..], len)?;
        let Some(target) = sys::readlink(current, &mut link) else {
            break;
        };
        // Keep the link's directory (up to and including the last '/') for a
        // relative target; start over for an absolute one.
        let keep = if target.first() == Some(&b'/') {
            0
        } else {
            let dir = out.get(..len).unwrap_or(b"");
            dir.iter()
                .rposition(|&b| b == b'/')
                .map_or(0, |i| i.saturating_add(1))
        };
        let rest = out.get_mut(keep..)?;
        let mut w = Writer::new(rest);
        w.push(target);
        w.as_c_str()?; // a target that does not fit ends the resolution
        len = keep.saturating_add(w.len());
        hops += 1;
    }
    if hops == 0 {
        return None;
    }
    out.get(..len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "precompile-resolve-{}-{}",
            name,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn c(p: &std::path::Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
    }

    fn exe(p: &std::path::Path) {
        std::fs::write(p, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn follows_relative_and_absolute_hops() {
        let d = scratch("chain");
        exe(&d.join("g++-12"));
        symlink("g++-12", d.join("g++")).unwrap(); // relative
        symlink(d.join("g++"), d.join("alt-c++")).unwrap(); // absolute
        symlink(d.join("alt-c++"), d.join("c++")).unwrap();
        let mut out = [0u8; PATH_BUF];
        let got = resolve_symlinks(&c(&d.join("c++")), &mut out).unwrap();
        assert_eq!(got, d.join("g++-12").as_os_str().as_encoded_bytes());
        let mut out = [0u8; PATH_BUF];
        assert!(resolve_symlinks(&c(&d.join("g++-12")), &mut out).is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_loop_stops_at_the_hop_limit() {
        let d = scratch("loop");
        symlink(d.join("b"), d.join("a")).unwrap();
        symlink(d.join("a"), d.join("b")).unwrap();
        let mut out = [0u8; PATH_BUF];
        let got = resolve_symlinks(&c(&d.join("a")), &mut out).unwrap();
        assert!(got.ends_with(b"/a") || got.ends_with(b"/b"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_file_is_not_resolved() {
        let mut out = [0u8; PATH_BUF];
        assert!(resolve_symlinks(c"/nonexistent/precompile/x", &mut out).is_none());
    }

    #[test]
    fn searches_like_execvp() {
        let d = scratch("search");
        let (a, b) = (d.join("a"), d.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("tool"), b"not executable").unwrap();
        std::fs::create_dir_all(a.join("dir-tool")).unwrap();
        exe(&b.join("tool"));
        let path = format!("/nonexistent:{}:{}", a.display(), b.display());
        let mut buf = [0u8; PATH_BUF];
        let n = search_path(b"tool", path.as_bytes(), &mut buf).unwrap();
        assert_eq!(
            candidate(&buf, n).unwrap().to_bytes(),
            b.join("tool").as_os_str().as_encoded_bytes()
        );
        assert!(search_path(b"dir-tool", path.as_bytes(), &mut buf).is_none());
        assert!(search_path(b"missing", path.as_bytes(), &mut buf).is_none());
        assert!(search_path(b"a/tool", path.as_bytes(), &mut buf).is_none());
        assert!(search_path(b"", path.as_bytes(), &mut buf).is_none());
        // a candidate that does not fit the buffer is skipped, not cut
        let mut small = [0u8; 8];
        assert!(search_path(b"tool", path.as_bytes(), &mut small).is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
