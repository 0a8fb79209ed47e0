//! The constructor's work beyond the exec path: the shim's own log, and the
//! Python boot directory. Allocation and `setenv` are fine here:
//! this runs once, before `main`, on the loading thread. It runs in every
//! process of the tree, so the common case (not Python, or the boot directory
//! already on PYTHONPATH) makes no system call it can avoid and allocates
//! nothing (a process's first allocation sets up its heap).

use alloc::ffi::CString;
use alloc::vec::Vec;
use core::ffi::CStr;

use policy::env;

use crate::raw::{basename, CStrArray};
use crate::resolve::{resolve_symlinks, PATH_BUF};
use crate::state::{Settings, StartEnv};

/// `PRECOMPILE_LOG=<filter>` (`debug`, `info`, `precompile=trace`, …): the
/// shim's log lines go to stderr (see [`crate::log`]). Unset: nothing.
pub fn logging(start: &StartEnv<'_>) {
    let Some(spec) = start.get(env::LOG) else {
        return;
    };
    crate::log::install(spec);
}

/// In a Python process whose `<libdir>/boot` exists, prepends that directory
/// to PYTHONPATH (once), so that its `sitecustomize` boots the Python layer.
pub fn python_path(settings: &Settings, start: &StartEnv<'_>, argv: CStrArray<'_>) {
    let Some(lib) = settings.self_path else {
        return;
    };
    let Some(libdir) = parent(lib.to_bytes()) else {
        return;
    };
    let current = start.get(env::PYTHONPATH);
    // Already there (inherited from a Python process above): nothing to do,
    // whatever this process is. The usual case below a booted Python.
    if current.is_some_and(|c| has_boot(c, libdir)) {
        return;
    }
    if !is_python(argv) {
        return;
    }
    let Ok(boot) = CString::new(join_boot(libdir)) else {
        return;
    };
    if !crate::sys::is_dir(&boot) {
        return;
    }
    let Some(value) = prepended(current, boot.to_bytes()) else {
        return;
    };
    let (Ok(name), Ok(value)) = (CString::new(env::PYTHONPATH), CString::new(value)) else {
        return;
    };
    // Before main, on the loading thread: no other thread reads the
    // environment yet.
    if crate::sys::setenv(&name, &value) {
        crate::log::debug("precompile::boot", |w| {
            w.push(b"boot directory prepended to PYTHONPATH boot=");
            w.push(boot.to_bytes());
        });
    }
}

/// Whether the basename of the running executable (as /proc/self/exe names
/// it) starts with "python". `argv`: the process's own.
fn is_python(argv: CStrArray<'_>) -> bool {
    if let Some(elf) = exec_elf_basename_is_python(argv) {
        return elf;
    }
    let mut buf = [0u8; PATH_BUF];
    crate::sys::readlink(c"/proc/self/exe", &mut buf)
        .is_some_and(|exe| basename(exe).starts_with(b"python"))
}

/// The same answer without /proc: a process's first look into /proc/self
/// was the constructor's largest cost (about 15 µs of every exec,
/// scripts/bench exec). The absolute path `execve` was given (`AT_EXECFN`)
/// is what runs unless the kernel ran an interpreter for it (a `#!` script,
/// a binfmt_misc format), and then it handed that interpreter the path as
/// `argv[1]` or `argv[2]`, where nothing else put it; so when neither is the
/// path, the path's symlinks followed give /proc/self/exe's basename, without
/// opening the file (three system calls fewer than reading its first bytes).
/// `None` when that does not hold (an interpreted file; a relative path,
/// which a later `chdir` could have moved; a descriptor's name from
/// `fexecve`, which may be closed by now): ask /proc.
fn exec_elf_basename_is_python(argv: CStrArray<'_>) -> Option<bool> {
    let path: &CStr = crate::sys::execfn()?;
    if !runs_itself(path.to_bytes(), argv) {
        return None;
    }
    let mut out = [0u8; PATH_BUF];
    let name = resolve_symlinks(path, &mut out).unwrap_or(path.to_bytes());
    Some(basename(name).starts_with(b"python"))
}

/// Whether the program at `path` (AT_EXECFN) is what runs, by the rule in
/// [`exec_elf_basename_is_python`]. False whenever unsure.
fn runs_itself(path: &[u8], argv: CStrArray<'_>) -> bool {
    path.first() == Some(&b'/')
        && !path.starts_with(b"/dev/fd/")
        && !path.starts_with(b"/proc/")
        && !argv.bytes().skip(1).take(2).any(|arg| arg == path)
}

/// The directory part of the absolute path `path`, as `Path::parent` spells
/// it (`/` for a file at the root); `None` without a `/`.
fn parent(path: &[u8]) -> Option<&[u8]> {
    let slash = path.iter().rposition(|&b| b == b'/')?;
    let dir = path.get(..slash)?;
    Some(if dir.is_empty() { b"/" } else { dir })
}

/// `<libdir>/boot`, as `Path::join` spells it.
fn join_boot(libdir: &[u8]) -> Vec<u8> {
    let mut boot = libdir.to_vec();
    if !libdir.is_empty() && !libdir.ends_with(b"/") {
        boot.push(b'/');
    }
    boot.extend_from_slice(b"boot");
    boot
}

/// Whether the colon-separated `pythonpath` holds `<libdir>/boot` spelled as
/// `libdir.join("boot")` spells it.
fn has_boot(pythonpath: &[u8], libdir: &[u8]) -> bool {
    pythonpath.split(|&b| b == b':').any(|entry| {
        let Some(rest) = entry.strip_prefix(libdir) else {
            return false;
        };
        let rest = if libdir.is_empty() || libdir.ends_with(b"/") {
            Some(rest)
        } else {
            rest.strip_prefix(b"/")
        };
        rest == Some(b"boot".as_slice())
    })
}

/// The new PYTHONPATH, or `None` when `boot` is already on it.
fn prepended(current: Option<&[u8]>, boot: &[u8]) -> Option<Vec<u8>> {
    let current = current.unwrap_or(b"");
    if current.split(|&b| b == b':').any(|entry| entry == boot) {
        return None;
    }
    let mut value = boot.to_vec();
    if !current.is_empty() {
        value.push(b':');
        value.extend_from_slice(current);
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepends_once() {
        assert_eq!(prepended(None, b"/b").unwrap(), b"/b");
        assert_eq!(prepended(Some(b""), b"/b").unwrap(), b"/b");
        assert_eq!(prepended(Some(b"/x:/y"), b"/b").unwrap(), b"/b:/x:/y");
        assert!(prepended(Some(b"/x:/b"), b"/b").is_none());
    }

    #[test]
    fn parent_and_join_spell_paths_as_std_does() {
        use std::path::Path;
        for lib in [
            "/opt/p/lib/precompile/libprecompile.so",
            "/libprecompile.so",
            "/a/b.so",
        ] {
            let std_parent = Path::new(lib)
                .parent()
                .unwrap()
                .as_os_str()
                .as_encoded_bytes();
            let ours = parent(lib.as_bytes()).unwrap();
            assert_eq!(ours, std_parent, "{lib}");
            let std_boot = Path::new(lib).parent().unwrap().join("boot");
            assert_eq!(
                join_boot(ours),
                std_boot.as_os_str().as_encoded_bytes(),
                "{lib}"
            );
        }
    }

    #[test]
    fn finds_the_boot_directory_as_join_spells_it() {
        use std::os::unix::ffi::OsStrExt;
        use std::path::Path;
        for libdir in ["/opt/p/lib/precompile", "/", "/a/"] {
            let boot = Path::new(libdir).join("boot");
            let boot = boot.as_os_str().as_bytes();
            let lib = libdir.as_bytes();
            assert!(has_boot(boot, lib), "{libdir}");
            let mut both = b"/x:".to_vec();
            both.extend_from_slice(boot);
            both.extend_from_slice(b":/y");
            assert!(has_boot(&both, lib), "{libdir}");
            assert!(prepended(Some(&both), boot).is_none());
        }
        let lib = b"/opt/p/lib/precompile";
        for other in [
            "",
            "/opt/p/lib/precompile",
            "/opt/p/lib/precompile/boot/",
            "/opt/p/lib/precompile/bootx",
            "/opt/p/lib/precompileboot",
            "/opt/p/lib/precompile//boot",
        ] {
            assert!(!has_boot(other.as_bytes(), lib), "{other}");
        }
    }

    #[test]
    fn the_running_executable_is_not_python() {
        // this test binary: an ELF file, named for its crate
        assert_eq!(exec_elf_basename_is_python(CStrArray::empty()), Some(false));
        assert!(!is_python(CStrArray::empty()));
    }

    #[test]
    fn an_interpreted_file_is_not_what_runs() {
        use std::ffi::CString;
        let argv = |items: &[&str]| -> (Vec<CString>, Vec<*const std::ffi::c_char>) {
            let owned: Vec<CString> = items.iter().map(|s| CString::new(*s).unwrap()).collect();
            let mut ptrs: Vec<_> = owned.iter().map(|s| s.as_ptr()).collect();
            ptrs.push(std::ptr::null());
            (owned, ptrs)
        };
        let check = |items: &[&str], path: &[u8]| {
            let (_owned, ptrs) = argv(items);
            // SAFETY: `ptrs` is a NULL-terminated array of live C strings.
            runs_itself(path, unsafe { CStrArray::from_raw(ptrs.as_ptr()) })
        };
        // an ELF file, whatever its argv[0]
        assert!(check(&["python3", "-c", "pass"], b"/usr/bin/python3"));
        assert!(check(&[], b"/usr/bin/true"));
        // `#!/bin/sh` and `#!/usr/bin/env python3`: the script is argv[1] or argv[2]
        assert!(!check(&["/bin/sh", "/tmp/s.sh", "x"], b"/tmp/s.sh"));
        assert!(!check(
            &["/usr/bin/env", "python3", "/tmp/s.py"],
            b"/tmp/s.py"
        ));
        // relative, or a descriptor's name (fexecve)
        assert!(!check(&["t"], b"./t"));
        assert!(!check(&["t"], b"/dev/fd/3"));
        assert!(!check(&["t"], b"/proc/self/fd/3"));
    }
}
