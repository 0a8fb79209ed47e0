//! The one error type of this crate.
//!
//! Each message names the thing that is wrong and what to do about it, because the
//! text reaches users unchanged: through `PrecompileError` in Python and through the
//! `precompile inspect`/`verify` CLI verbs.

use std::path::PathBuf;

/// Everything that can go wrong reading, writing or unpacking a cache.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// The bytes do not start with [`crate::MAGIC`]: some other file.
    #[error(
        "not a precompile cache (wrong magic bytes): this file was not written by \
         torch_precompile; pass the cache_path that capture() wrote, or delete the \
         file and capture again"
    )]
    NotAnEnvelope,

    /// A precompile cache, but of a format version this build cannot read.
    #[error(
        "precompile cache format version {found} is not supported (this build reads \
         version {supported}): capture again with this torch_precompile, or load the \
         cache with the release that wrote it"
    )]
    UnsupportedVersion { found: u32, supported: u32 },

    /// A cache of the right format and version whose bytes do not add up.
    #[error(
        "corrupt precompile cache: {what}; the file was damaged or modified after it \
         was written: delete it and capture again"
    )]
    Corrupt { what: String },

    /// An entry name that could land outside the extraction directory, or that
    /// cannot be written as a file.
    #[error(
        "invalid cache entry name {name:?}: {why}; entry names are relative \
         '/'-separated paths without '.', '..' or empty components"
    )]
    BadEntryName { name: String, why: &'static str },

    /// A header field handed to `encode` that a reader would reject.
    #[error("invalid cache header field `{field}`: {why}; fix the value passed to encode()")]
    BadHeader { field: &'static str, why: String },

    /// The python_code next to the cache is not the one the cache was made for.
    #[error(
        "python_code does not match this cache: the cache was written for code with \
         sha256 {expected}, the code given has sha256 {found}; use the artifact_path \
         and cache_path written together by the same capture, or capture again"
    )]
    CodeMismatch { expected: String, found: String },

    /// Extraction would write outside the target directory (through a symlink that
    /// was already there, or over something that is not a plain file/directory).
    #[error(
        "refusing to extract cache entry {name:?} to {}: {why}; extract into a fresh \
         private directory", path.display()
    )]
    Escape {
        name: String,
        path: PathBuf,
        why: &'static str,
    },

    /// The file system refused; `path` is the file or directory involved.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// True for caches this build does not own: another file, or another format
    /// version. The loader ignores such a cache with a warning and falls back to JIT;
    /// every other error means a cache of ours that is wrong, which it reports.
    pub fn is_foreign(&self) -> bool {
        matches!(
            self,
            Error::NotAnEnvelope | Error::UnsupportedVersion { .. }
        )
    }

    pub(crate) fn corrupt(what: impl Into<String>) -> Self {
        Error::Corrupt { what: what.into() }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
