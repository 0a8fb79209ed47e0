//! Unpacking a verified envelope into a directory.
//!
//! Entry names were validated when the envelope was decoded, but a name that is
//! harmless as text can still escape through the directory it lands in: if
//! `dir/kernels` is already a symlink to `/`, `kernels/x.so` is written outside.
//! So every directory on the way is inspected with `symlink_metadata` (which does
//! not follow links) and a symlink anywhere under `dir` is refused. All entries are
//! checked before the first one is written, so a refusal writes nothing.
//!
//! Limit: this checks, then writes (plain `std`, no `openat`). A process racing us
//! inside `dir` could swap a checked directory for a symlink in between. The
//! serving directory is private to the loader, so that process would already own
//! it; extract into a directory nobody else can write.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::atomic::write_atomic;
use crate::entry_name::validate_entry_names;
use crate::header::Envelope;
use crate::Error;

/// Writes every entry to `dir/<name>` (creating `dir` and subdirectories), each
/// file atomically, and returns the written paths in entry order. Refuses, before
/// writing anything, a bad name or a path that would pass through a symlink or
/// land on something that is not a regular file.
pub fn extract_to(env: &Envelope, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    // Envelope's fields are public: it may not come from decode().
    validate_entry_names(env.entries.iter().map(|e| e.name.as_str()))?;
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    for entry in &env.entries {
        target(dir, &entry.name, Mode::Check)?;
    }
    let mut written = Vec::with_capacity(env.entries.len());
    for entry in &env.entries {
        let path = target(dir, &entry.name, Mode::Create)?;
        write_atomic(&path, &entry.data).map_err(|e| Error::io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Inspect what exists; stop quietly at the first missing directory.
    Check,
    /// Create missing directories on the way.
    Create,
}

/// The path for `name` under `dir`, after checking each existing component.
fn target(dir: &Path, name: &str, mode: Mode) -> Result<PathBuf, Error> {
    let escape = |path: &Path, why| Error::Escape {
        name: name.to_owned(),
        path: path.to_path_buf(),
        why,
    };
    let mut path = dir.to_path_buf();
    let mut components = name.split('/').peekable();
    while let Some(component) = components.next() {
        path.push(component);
        let last = components.peek().is_none();
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(escape(&path, "a symbolic link is already there"))
            }
            Ok(m) if last && !m.is_file() => {
                return Err(escape(
                    &path,
                    "something that is not a regular file is there",
                ))
            }
            Ok(m) if !last && !m.is_dir() => {
                return Err(escape(
                    &path,
                    "something that is not a directory is in the way",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if last {
                    break;
                }
                match mode {
                    Mode::Check => break,
                    Mode::Create => fs::create_dir(&path).map_err(|e| Error::io(&path, e))?,
                }
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    // Check mode may stop early; the caller only uses the path in Create mode.
    Ok(path)
}

#[cfg(test)]
mod tests;
