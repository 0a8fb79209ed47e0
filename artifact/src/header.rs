//! The header (the JSON part of a cache) and the in-memory envelope.
//!
//! The header is what `inspect` shows and what the loader checks before it unpacks
//! or runs anything: which backend and tracer produced the cache, which python_code
//! it belongs to (`code_hash`), which torch/Python/platform it needs, and the entry
//! table. Unknown fields are refused so that a header changed without a
//! [`crate::FORMAT_VERSION`] bump fails loudly instead of being half-read; free-form
//! additions belong in `meta`, which needs no bump.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;

/// The JSON header of a cache.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Equal to the binary version field; `encode` sets it to [`crate::FORMAT_VERSION`].
    pub format_version: u32,
    /// `"inductor"` or `"eager"`.
    pub backend: String,
    /// `"dynamo"` or `"make_fx"`.
    pub tracer: String,
    /// sha256 hex (64 lowercase digits) of the exact python_code bytes.
    pub code_hash: String,
    /// `torch.__version__` plus the git version: frozen kernels need this exact build.
    pub torch_build: String,
    /// e.g. `"3.11.7"`.
    pub python_version: String,
    /// e.g. `"linux-x86_64"`.
    pub platform: String,
    /// e.g. `"torch_precompile 0.1.0"`.
    pub created_by: String,
    /// Free-form: CPU ISA decision, host requirements, … Adding keys needs no
    /// version bump; readers must tolerate keys they do not know.
    pub meta: serde_json::Map<String, serde_json::Value>,
    /// One row per entry, in the order the entry bytes follow the header.
    /// Ignored by `encode`, which computes it from the entries.
    pub entries: Vec<EntryMeta>,
}

/// One row of the entry table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EntryMeta {
    /// What the bytes are (e.g. `"cpp_kernel"`, `"triton"`, `"inductor_cache"`):
    /// 1–64 bytes of `[A-Za-z0-9_.-]`.
    pub kind: String,
    /// Relative path under the extraction directory; see [`crate::validate_entry_name`].
    pub name: String,
    /// Length of the entry bytes.
    pub size: u64,
    /// sha256 hex (64 lowercase digits) of the entry bytes.
    pub sha256: String,
}

/// One entry with its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: String,
    pub name: String,
    pub data: Vec<u8>,
}

// The bytes can be megabytes of machine code; a debug print shows their size only.
impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("data", &format_args!("<{} bytes>", self.data.len()))
            .finish()
    }
}

/// A fully verified cache: the header and the entries, in header order.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub header: Header,
    pub entries: Vec<Entry>,
}

impl Envelope {
    /// The entry called `name`, if any.
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

impl Header {
    /// Checks that `code` is the python_code this cache was written for.
    pub fn check_code(&self, code: &[u8]) -> Result<(), Error> {
        let found = sha256_hex(code);
        if found == self.code_hash {
            Ok(())
        } else {
            Err(Error::CodeMismatch {
                expected: self.code_hash.clone(),
                found,
            })
        }
    }
}

/// sha256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// A header value that a reader would reject: which field, and why.
/// `encode` reports it as [`Error::BadHeader`], `decode` as [`Error::Corrupt`].
pub(crate) struct FieldProblem {
    pub field: &'static str,
    pub why: String,
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub(crate) fn check_code_hash(code_hash: &str) -> Result<(), FieldProblem> {
    if is_sha256_hex(code_hash) {
        Ok(())
    } else {
        Err(FieldProblem {
            field: "code_hash",
            why: format!("{code_hash:?} is not 64 lowercase hex digits (a sha256)"),
        })
    }
}

pub(crate) fn check_kind(kind: &str) -> Result<(), FieldProblem> {
    let ok = !kind.is_empty()
        && kind.len() <= 64
        && kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(FieldProblem {
            field: "kind",
            why: format!("entry kind {kind:?} is not 1-64 characters of [A-Za-z0-9_.-]"),
        })
    }
}

pub(crate) fn check_entry_sha256(name: &str, sha: &str) -> Result<(), FieldProblem> {
    if is_sha256_hex(sha) {
        Ok(())
    } else {
        Err(FieldProblem {
            field: "sha256",
            why: format!("entry {name:?} has sha256 {sha:?}, not 64 lowercase hex digits"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_of_empty_input_is_the_known_digest() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn kind_accepts_identifiers_and_refuses_the_rest() {
        for ok in ["cpp_kernel", "triton.cubin", "a-b", "X9"] {
            assert!(check_kind(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", &"k".repeat(65)] {
            assert!(check_kind(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sha256_fields_must_be_lowercase_hex_of_the_right_length() {
        assert!(check_code_hash(&sha256_hex(b"x")).is_ok());
        assert!(check_code_hash(&sha256_hex(b"x").to_uppercase()).is_err());
        assert!(check_code_hash(&"a".repeat(63)).is_err());
        assert!(check_code_hash(&"g".repeat(64)).is_err());
    }

    #[test]
    fn check_code_names_both_hashes_on_mismatch() {
        let header = crate::envelope::tests::sample_header();
        let err = header.check_code(b"other code").unwrap_err();
        match &err {
            Error::CodeMismatch { expected, found } => {
                assert_eq!(expected, &header.code_hash);
                assert_eq!(found, &sha256_hex(b"other code"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!err.is_foreign());
        header
            .check_code(crate::envelope::tests::SAMPLE_CODE)
            .unwrap();
    }

    #[test]
    fn entry_debug_shows_size_not_bytes() {
        let e = Entry {
            kind: "k".into(),
            name: "n".into(),
            data: vec![7; 1000],
        };
        let s = format!("{e:?}");
        assert!(s.contains("<1000 bytes>"), "{s}");
        assert!(s.len() < 100, "{s}");
    }
}
