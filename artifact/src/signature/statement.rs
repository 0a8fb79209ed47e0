//! The signed manifest (file path → sha256) and the in-toto statement that
//! carries it: `predicateType` `https://model_signing/signature/v1.0`,
//! serialization method `files` with sha256, one subject whose digest is the
//! sha256 of the resources' raw digests in the listed (sorted) order.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::SignatureError;
use crate::header::hex;
use crate::sha256_hex;

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://model_signing/signature/v1.0";

/// What a signature vouches for: files by '/'-separated path relative to the
/// signed directory, each with its sha256 (hex).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Informative only (the signed directory's name); never checked.
    pub model_name: String,
    pub files: BTreeMap<String, String>,
    /// Paths the signer left out on purpose (the signature file itself).
    pub ignore_paths: Vec<String>,
}

impl Manifest {
    pub fn new(model_name: &str) -> Self {
        Self {
            model_name: model_name.to_string(),
            ..Self::default()
        }
    }

    /// Adds a file by its bytes.
    pub fn add(&mut self, name: &str, bytes: &[u8]) {
        self.files.insert(name.to_string(), sha256_hex(bytes));
    }

    /// Ok when `name` is signed with exactly these bytes' digest.
    pub fn check_file(&self, name: &str, bytes: &[u8]) -> Result<(), SignatureError> {
        match self.files.get(name) {
            None => Err(SignatureError::FileMismatch(format!(
                "{name:?} is not among the signed files"
            ))),
            Some(d) if *d != sha256_hex(bytes) => Err(SignatureError::FileMismatch(format!(
                "{name:?} differs from the signed file (sha256 {}, signed {d})",
                sha256_hex(bytes)
            ))),
            Some(_) => Ok(()),
        }
    }

    fn root_digest(&self) -> Result<String, SignatureError> {
        let mut h = Sha256::new();
        for (name, digest) in &self.files {
            h.update(unhex(digest).ok_or_else(|| {
                SignatureError::Inconsistent(format!("the digest of {name:?} is not sha256 hex"))
            })?);
        }
        Ok(hex(&h.finalize()))
    }

    /// The in-toto statement, as the bytes a DSSE envelope carries.
    pub fn to_payload(&self) -> Vec<u8> {
        let resources: Vec<Value> = self
            .files
            .iter()
            .map(|(name, digest)| json!({"name": name, "algorithm": "sha256", "digest": digest}))
            .collect();
        let mut serialization =
            json!({"method": "files", "hash_type": "sha256", "allow_symlinks": false});
        if !self.ignore_paths.is_empty() {
            serialization["ignore_paths"] = json!(self.ignore_paths);
        }
        let statement = json!({
            "_type": STATEMENT_TYPE,
            "subject": [{"name": self.model_name, "digest": {"sha256": self.root_digest().expect("digests we computed")}}],
            "predicateType": PREDICATE_TYPE,
            "predicate": {"serialization": serialization, "resources": resources},
        });
        serde_json::to_vec(&statement).expect("a JSON value always serializes")
    }

    /// The manifest a verified payload states, checked for consistency.
    pub fn from_payload(payload: &[u8]) -> Result<Self, SignatureError> {
        let bad = |what: &str| SignatureError::Malformed(format!("the statement {what}"));
        let v: Value =
            serde_json::from_slice(payload).map_err(|e| bad(&format!("is not JSON ({e})")))?;
        if v["_type"] != STATEMENT_TYPE {
            return Err(bad(&format!(
                "is not an in-toto v1 statement (_type {})",
                v["_type"]
            )));
        }
        if v["predicateType"] != PREDICATE_TYPE {
            return Err(bad(&format!(
                "has predicateType {} (this build reads {PREDICATE_TYPE})",
                v["predicateType"]
            )));
        }
        let serialization = &v["predicate"]["serialization"];
        if serialization["method"] != "files" || serialization["hash_type"] != "sha256" {
            return Err(bad(&format!(
                "serializes by {} with {} (this build reads method files, hash sha256)",
                serialization["method"], serialization["hash_type"]
            )));
        }
        let subjects = v["subject"]
            .as_array()
            .ok_or_else(|| bad("has no subject"))?;
        let [subject] = subjects.as_slice() else {
            return Err(bad(&format!("has {} subjects, not one", subjects.len())));
        };
        let mut manifest = Manifest::new(subject["name"].as_str().unwrap_or_default());
        manifest.ignore_paths = serialization["ignore_paths"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let resources = v["predicate"]["resources"]
            .as_array()
            .ok_or_else(|| bad("has no resources"))?;
        // The subject digest is over the resources in their listed order.
        let mut h = Sha256::new();
        for r in resources {
            let (Some(name), Some(digest)) = (r["name"].as_str(), r["digest"].as_str()) else {
                return Err(bad("lists a resource without a name or digest"));
            };
            if r["algorithm"] != "sha256" {
                return Err(bad(&format!(
                    "hashes {name:?} with {} (not sha256)",
                    r["algorithm"]
                )));
            }
            let raw = unhex(digest)
                .ok_or_else(|| bad(&format!("has a digest of {name:?} that is not sha256 hex")))?;
            h.update(&raw);
            if manifest
                .files
                .insert(name.to_string(), digest.to_ascii_lowercase())
                .is_some()
            {
                return Err(bad(&format!("lists {name:?} twice")));
            }
        }
        let stated = subject["digest"]["sha256"].as_str().unwrap_or_default();
        let computed = hex(&h.finalize());
        if stated != computed {
            return Err(SignatureError::Inconsistent(format!(
                "the subject digest is {stated} but the listed files hash to {computed}"
            )));
        }
        Ok(manifest)
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}
