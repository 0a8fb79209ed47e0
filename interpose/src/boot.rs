//! The constructor's work beyond the exec path: the shim's own log, and the
//! Python boot directory. Allocation and `std::env` are fine here: this runs
//! once, before `main`, on the loading thread.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use policy::env;

use crate::state::Settings;

/// `PRECOMPILE_LOG=<filter>` (`debug`, `info`, `precompile=trace`, …): the
/// shim's log lines go to stderr (see [`crate::log`]). Unset: nothing.
pub fn logging() {
    let Some(spec) = std::env::var_os(env::LOG) else {
        return;
    };
    crate::log::install(&spec.to_string_lossy());
}

/// In a Python process whose `<libdir>/boot` exists, prepends that directory
/// to PYTHONPATH (once), so that its `sitecustomize` boots the Python layer.
pub fn python_path(settings: &Settings) {
    if !is_python() {
        return;
    }
    let Some(lib) = settings.self_path else {
        return;
    };
    let Some(boot) = boot_dir(Path::new(std::ffi::OsStr::from_bytes(lib.to_bytes()))) else {
        return;
    };
    let current = std::env::var_os(env::PYTHONPATH);
    if let Some(value) = prepended(
        current.as_ref().map(|v| v.as_bytes()),
        boot.as_os_str().as_bytes(),
    ) {
        // Before main, on the loading thread: no other thread reads the
        // environment yet.
        std::env::set_var(
            env::PYTHONPATH,
            OsString::from(std::ffi::OsStr::from_bytes(&value)),
        );
        tracing::debug!(boot = %boot.display(), "boot directory prepended to PYTHONPATH");
    }
}

/// The basename of /proc/self/exe starts with "python". A stack buffer:
/// a process that is not configured should not even start its heap here.
fn is_python() -> bool {
    let mut buf = [0u8; 4096];
    crate::sys::readlink(c"/proc/self/exe", &mut buf)
        .is_some_and(|exe| crate::raw::basename(exe).starts_with(b"python"))
}

fn boot_dir(lib: &Path) -> Option<PathBuf> {
    let dir = lib.parent()?.join("boot");
    dir.is_dir().then_some(dir)
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
}
