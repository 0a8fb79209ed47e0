//! Atomic file replacement, for the cache and for the python_code artifact.
//!
//! A reader must only ever see the old file or the new one, never a mix, and a
//! crash must not leave a half-written file under the real name: write a temp file
//! in the same directory (rename is only atomic within one file system), fsync it
//! (so the rename cannot reach disk before the data), rename it over the target,
//! fsync the directory (so the rename itself survives a crash). torch's own
//! `write_atomic` skips both fsyncs; that is the bug this avoids.
//!
//! Notes that callers should know:
//! - The new file gets default permissions (0666 minus the umask), whatever the
//!   old file's were; a symlink at `path` is replaced, not followed.
//! - An error before the rename leaves the old file untouched and removes the temp
//!   file (also on panic, through a drop guard). An error from the final directory
//!   fsync is reported although the new file is already in place: its content is
//!   right, only its durability across a crash is not guaranteed.
//! - A crash (not an error) can leave a temp file `.<name>.<pid>.<n>.tmp` behind;
//!   it is never mistaken for the target and can be deleted.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The points where a write can fail; tests inject failures at each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Create,
    Write,
    Sync,
    Rename,
    /// Undoing the cache's rename after the code's failed.
    PutBack,
    SyncDir,
}

/// A hook called before each step with the target path; an `Err` aborts there.
pub(crate) type FailPoint<'a> = &'a mut dyn FnMut(Step, &Path) -> io::Result<()>;

/// Replaces `path` with `bytes` atomically and durably (see the module comment).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, &mut |_, _| Ok(()))
}

/// Replaces the python_code file and the cache file together, as far as POSIX
/// allows.
///
/// Both temp files are written and fsynced before either is renamed, so every
/// error up to that point leaves both old files untouched. Then the cache is
/// renamed, then the code, then the directories are fsynced.
///
/// The remaining window: two renames cannot be one atomic step. An error renaming
/// the code puts the old cache back (it is kept under a temp name, a hard link,
/// until both renames are done; a cache that did not exist is removed). A crash
/// between the two renames leaves the new cache next to the old code. No data I/O happens in that window (both files are already on
/// disk), so it lasts microseconds, and the pair it leaves is detectable: the
/// cache's `code_hash` does not match the code, and the loader refuses the pairing
/// (`Header::check_code`) while the old code still runs on its own by JIT.
pub fn write_pair_atomic(
    code_path: &Path,
    code: &[u8],
    cache_path: &Path,
    cache: &[u8],
) -> io::Result<()> {
    write_pair_atomic_with(code_path, code, cache_path, cache, &mut |_, _| Ok(()))
}

pub(crate) fn write_atomic_with(path: &Path, bytes: &[u8], fail: FailPoint) -> io::Result<()> {
    let staged = Staged::write(path, bytes, fail)?;
    let dir = staged.commit(fail)?;
    fail(Step::SyncDir, path)?;
    sync_dir(&dir)
}

pub(crate) fn write_pair_atomic_with(
    code_path: &Path,
    code: &[u8],
    cache_path: &Path,
    cache: &[u8],
    fail: FailPoint,
) -> io::Result<()> {
    pair_steps(code_path, code, cache_path, cache, fail).map_err(|(e, stage)| {
        let tail = match stage {
            Stage::Before => "Nothing was replaced.",
            Stage::Mismatched => {
                "The new cache is in place beside the old python_code and the old cache could \
                 not be put back: load refuses that pair (its code_hash does not match)."
            }
            Stage::Done => {
                "Both files are in place; only their durability across a crash is not \
                 guaranteed."
            }
        };
        io::Error::new(e.kind(), format!("{e}. {tail}"))
    })
}

/// How far a failed pair write got, for its message.
enum Stage {
    /// Neither file was replaced (the old ones, or none, are as they were).
    Before,
    /// The cache was replaced and could not be put back.
    Mismatched,
    /// Both were replaced; a directory fsync failed.
    Done,
}

fn pair_steps(
    code_path: &Path,
    code: &[u8],
    cache_path: &Path,
    cache: &[u8],
    fail: FailPoint,
) -> Result<(), (io::Error, Stage)> {
    let before = |e| (e, Stage::Before);
    // Both destinations are checked before anything is written: a rename that
    // can only fail (a directory in the way) never follows a rename that worked.
    check_destination(code_path, "artifact_path").map_err(before)?;
    check_destination(cache_path, "cache_path").map_err(before)?;
    if same_target(code_path, cache_path).map_err(before)? {
        return Err(before(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "artifact_path and cache_path are the same file ({}): give them \
                 different names",
                code_path.display()
            ),
        )));
    }
    let code = Staged::write(code_path, code, fail).map_err(before)?;
    let cache = Staged::write(cache_path, cache, fail).map_err(before)?;
    // The old cache, kept under a temp name until the code is in place too, so a
    // failed second rename can put it back (or remove a cache that is new).
    let old_cache = keep_old(cache_path);
    let cache_dir = cache.commit(fail).map_err(before)?;
    let code_dir = match code.commit(fail) {
        Ok(dir) => dir,
        Err(e) if fail(Step::PutBack, cache_path).is_ok() && put_back(cache_path, old_cache) => {
            return Err(before(e))
        }
        Err(e) => return Err((e, Stage::Mismatched)),
    };
    let done = |e| (e, Stage::Done);
    fail(Step::SyncDir, cache_path).map_err(done)?;
    sync_dir(&cache_dir).map_err(done)?;
    if code_dir != cache_dir {
        fail(Step::SyncDir, code_path).map_err(done)?;
        sync_dir(&code_dir).map_err(done)?;
    }
    Ok(())
}

/// A destination must be absent, a file, or a symlink (which is replaced).
fn check_destination(path: &Path, what: &str) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() || m.file_type().is_symlink() => Ok(()),
        Ok(m) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{what} {} is {}, not a file: give the path of a file to write",
                path.display(),
                if m.is_dir() {
                    "a directory"
                } else {
                    "not a regular file"
                }
            ),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(context(e, "looking at", path)),
    }
}

/// A hard link to the file at `path` under a temp name, if there is one (None
/// when there is no file, or the file system cannot link: then a failed second
/// rename leaves the documented window). Removed when dropped.
fn keep_old(path: &Path) -> Option<TempGuard> {
    if !fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return Some(TempGuard(PathBuf::new())); // nothing was there: undo is removal
    }
    let (dir, name) = split(path).ok()?;
    for _ in 0..64 {
        let link = temp_path(&dir, &name);
        match fs::hard_link(path, &link) {
            Ok(()) => return Some(TempGuard(link)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

/// Undoes the cache's rename after the code's failed: the old cache goes back
/// under its name, or the new one is removed when there was none. True when
/// it was undone (the error being reported is the rename's either way).
fn put_back(path: &Path, old: Option<TempGuard>) -> bool {
    match old {
        Some(mut kept) if kept.0.as_os_str().is_empty() => {
            kept.0 = PathBuf::new();
            fs::remove_file(path).is_ok()
        }
        Some(mut kept) => {
            let back = fs::rename(&kept.0, path).is_ok();
            if back {
                kept.0 = PathBuf::new(); // renamed back: nothing left to remove
            }
            back
        }
        None => false,
    }
}

/// A written and fsynced temp file waiting to be renamed over its target.
struct Staged {
    temp: TempGuard,
    target: PathBuf,
    dir: PathBuf,
}

impl Staged {
    fn write(path: &Path, bytes: &[u8], fail: FailPoint) -> io::Result<Staged> {
        let (dir, name) = split(path)?;
        fail(Step::Create, path)?;
        let (mut file, temp) = create_temp(&dir, &name)?;
        let wrote = (|| {
            fail(Step::Write, path)?;
            file.write_all(bytes)?;
            fail(Step::Sync, path)?;
            file.sync_all()
        })();
        wrote.map_err(|e| context(e, "writing the temp file", &temp.0))?;
        Ok(Staged {
            temp,
            target: path.to_path_buf(),
            dir,
        })
    }

    /// Renames the temp over the target; returns the directory to fsync.
    fn commit(mut self, fail: FailPoint) -> io::Result<PathBuf> {
        fail(Step::Rename, &self.target)?;
        fs::rename(&self.temp.0, &self.target)
            .map_err(|e| context(e, "renaming the temp file over", &self.target))?;
        self.temp.0 = PathBuf::new(); // renamed away: nothing left to remove
        Ok(std::mem::take(&mut self.dir))
    }
}

/// Removes the temp file when dropped, unless its path was cleared.
struct TempGuard(PathBuf);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.0);
        }
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh `dir/.<name>.<pid>.<n>.tmp` name (not created).
fn temp_path(dir: &Path, name: &OsString) -> PathBuf {
    // Keep the temp name under NAME_MAX (255) even for a 255-byte target name.
    let prefix = &name.as_bytes()[..name.len().min(200)];
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temp_name = b".".to_vec();
    temp_name.extend_from_slice(prefix);
    temp_name.extend_from_slice(format!(".{}.{n}.tmp", std::process::id()).as_bytes());
    dir.join(OsString::from_vec(temp_name))
}

/// Creates `dir/.<name>.<pid>.<n>.tmp` exclusively; the name may be a stale
/// leftover of a crashed process with the same pid, hence `create_new` and retries.
fn create_temp(dir: &Path, name: &OsString) -> io::Result<(File, TempGuard)> {
    let mut last_err = None;
    for _ in 0..64 {
        let temp_path = temp_path(dir, name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp_path)
        {
            Ok(file) => return Ok((file, TempGuard(temp_path))),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(context(e, "creating a temp file in", dir)),
        }
    }
    Err(context(
        last_err.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)),
        "creating a temp file in",
        dir,
    ))
}

/// The directory (`.` for a bare name) and the file name of `path`.
fn split(path: &Path) -> io::Result<(PathBuf, OsString)> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file: give a file path", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_os_string()))
}

fn same_target(a: &Path, b: &Path) -> io::Result<bool> {
    let (dir_a, name_a) = split(a)?;
    let (dir_b, name_b) = split(b)?;
    if name_a != name_b {
        return Ok(false);
    }
    // Same name: the same file unless the directories differ. A directory that
    // does not exist fails later, when its temp file is created.
    match (fs::canonicalize(dir_a), fs::canonicalize(dir_b)) {
        (Ok(x), Ok(y)) => Ok(x == y),
        _ => Ok(false),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| context(e, "fsyncing the directory", dir))
}

/// Adds the path to an error's message, keeping its kind.
fn context(e: io::Error, doing: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
