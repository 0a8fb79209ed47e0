//! The little argument parsing the verbs need (no parser crate: a handful
//! of flags each).

use std::ffi::OsString;

/// A wrong command line: printed like any error, exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// True for `-h`/`--help`.
pub fn is_help(arg: &OsString) -> bool {
    arg == "-h" || arg == "--help"
}
