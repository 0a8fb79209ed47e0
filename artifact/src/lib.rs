//! precompile's acceleration-cache format and the atomic writes behind every
//! artifact file.
//!
//! - [`envelope`]: the byte layout (its module comment is the specification),
//!   `encode`, `decode`, `read_header`.
//! - [`header`]: the JSON header, entry table and in-memory envelope.
//! - [`entry_name`]: which entry names are allowed, since names become paths.
//! - [`atomic`]: temp + fsync + rename + fsync-directory writes, single and paired.
//! - [`extract`]: unpacking entries into a directory without escaping it.
//!
//! Nothing here executes or loads anything: a cache can be verified by a process
//! that trusts none of it.

pub mod atomic;
pub mod entry_name;
pub mod envelope;
mod error;
pub mod extract;
pub mod header;
pub mod manifest;
pub mod signature;

pub use atomic::{write_atomic, write_pair_atomic};
pub use entry_name::{validate_entry_name, validate_entry_names};
pub use envelope::{decode, encode, read_header, FORMAT_VERSION, MAGIC};
pub use error::Error;
pub use extract::extract_to;
pub use header::{sha256_hex, Entry, EntryMeta, Envelope, Header};
