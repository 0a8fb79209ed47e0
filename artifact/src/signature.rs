//! Signatures over artifacts, in the OpenSSF model signing format (v1.0,
//! "key" method), so the tooling users already run on models
//! (`model_signing verify key …`) reads ours and we read theirs.
//!
//! A signature is a file holding a Sigstore bundle (media type
//! `application/vnd.dev.sigstore.bundle.v0.3+json`) whose DSSE envelope carries
//! an in-toto statement: the predicate lists every signed file by its path
//! relative to the signed directory with its sha256, the subject digest is the
//! sha256 of those digests in that order. The envelope is signed with an ECDSA
//! P-256 key over DSSE's pre-authentication encoding; the bundle names the key
//! by a hint (sha256 of its public PEM), never by the key itself, so only a key
//! the verifier already holds can vouch for a signature.
//!
//! - [`keys`]: PEM keys (SEC1 or PKCS#8 private, SPKI public) and their hints.
//! - [`statement`]: the signed manifest and its in-toto payload.
//! - [`bundle`]: the envelope and bundle around a payload; sign and verify.
//! - [`files`]: where a pair's or a directory's signature lives, what it names,
//!   and the trust policy's key files.
//!
//! Verifying says which files a trusted key signed, with their digests; matching
//! the bytes a loader holds against that list is the caller's (see
//! [`Manifest::check_file`]); only [`files`] touches the filesystem.

pub mod bundle;
pub mod files;
pub mod keys;
pub mod statement;

pub use bundle::{sign, verify, Verified};
pub use files::{sign_dir, sign_pair, trust_policy, verify_pair, DIR_SIGNATURE};
pub use keys::{PrivateKey, TrustedKey};
pub use statement::Manifest;

/// Everything that can go wrong signing or verifying. Each message names what
/// failed; callers add which file and what to do.
#[derive(thiserror::Error, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// A key file that is not a PEM ECDSA P-256 key of the expected kind.
    #[error("not a usable key: {0}")]
    BadKey(String),
    /// A signature file that does not parse as a model signing bundle.
    #[error("not a model signing bundle: {0}")]
    Malformed(String),
    /// The bundle names a key the trust policy does not hold.
    #[error(
        "signed by a key the trust policy does not hold (key hint {hint}); \
         trusted: {trusted}"
    )]
    UntrustedKey { hint: String, trusted: String },
    /// A trusted key, but the signature does not verify over the payload.
    #[error("the signature does not verify with the trusted key {key}: the signature file was altered or re-signed")]
    BadSignature { key: String },
    /// The payload's resource list does not add up to its subject digest.
    #[error("the signed manifest is inconsistent: {0}")]
    Inconsistent(String),
    /// A file the caller holds is missing from, or differs from, the manifest.
    #[error("{0}")]
    FileMismatch(String),
    /// No signature where one is looked for.
    #[error("{0}")]
    Unsigned(String),
    /// A file that could not be read or listed.
    #[error("{0}")]
    Io(String),
}
