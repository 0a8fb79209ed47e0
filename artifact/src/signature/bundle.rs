//! The Sigstore bundle around a statement: a DSSE envelope (payload type
//! `application/vnd.in-toto+json`) signed over DSSE's pre-authentication
//! encoding with ECDSA P-256/SHA-256 (DER signature), verification material
//! naming the key by hint, no transparency log entries (the key method).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{DerSignature, Signature};
use serde_json::{json, Value};

use super::keys::{PrivateKey, TrustedKey};
use super::statement::Manifest;
use super::SignatureError;

pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// DSSE v1 pre-authentication encoding of an in-toto payload.
fn pae(payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {PAYLOAD_TYPE} {} ",
        PAYLOAD_TYPE.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The signature file's text for `manifest`, signed by `key`.
pub fn sign(key: &PrivateKey, manifest: &Manifest) -> String {
    let payload = manifest.to_payload();
    let sig: DerSignature = key.key.sign(&pae(&payload));
    let bundle = json!({
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": key.public().hint()}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": B64.encode(&payload),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"sig": B64.encode(sig.as_bytes()), "keyid": ""}],
        },
    });
    serde_json::to_string_pretty(&bundle).expect("a JSON value always serializes") + "\n"
}

/// A signature that a trusted key made: what it signed and which key.
#[derive(Debug)]
pub struct Verified {
    pub manifest: Manifest,
    pub key_label: String,
}

/// Checks `bundle` (a signature file's bytes) against the trust policy's keys
/// and returns the manifest it vouches for. The payload is parsed only after a
/// trusted key verified it.
pub fn verify(bundle: &[u8], trusted: &[TrustedKey]) -> Result<Verified, SignatureError> {
    let bad = |what: String| SignatureError::Malformed(what);
    let v: Value = serde_json::from_slice(bundle).map_err(|e| bad(format!("not JSON ({e})")))?;
    if v["mediaType"] != BUNDLE_MEDIA_TYPE {
        return Err(bad(format!(
            "media type {} (expected {BUNDLE_MEDIA_TYPE})",
            v["mediaType"]
        )));
    }
    let material = &v["verificationMaterial"];
    if material.get("publicKey").is_none() {
        return Err(bad(
            "signed with a certificate or Sigstore identity; this build verifies key \
             signatures only (sign with a key: precompile sign --key)"
                .into(),
        ));
    }
    let envelope = &v["dsseEnvelope"];
    if envelope["payloadType"] != PAYLOAD_TYPE {
        return Err(bad(format!(
            "payload type {} (expected {PAYLOAD_TYPE})",
            envelope["payloadType"]
        )));
    }
    let payload = envelope["payload"]
        .as_str()
        .and_then(|p| B64.decode(p).ok())
        .ok_or_else(|| bad("the envelope's payload is not base64".into()))?;
    let sigs: Vec<Vec<u8>> = envelope["signatures"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["sig"].as_str().and_then(|s| B64.decode(s).ok()))
                .collect()
        })
        .unwrap_or_default();
    if sigs.is_empty() {
        return Err(bad("the envelope holds no signature".into()));
    }
    let hint = material["publicKey"]["hint"].as_str().unwrap_or_default();
    let candidates: Vec<&TrustedKey> = trusted
        .iter()
        .filter(|k| hint.is_empty() || k.hint() == hint)
        .collect();
    let Some(first) = candidates.first() else {
        let held: Vec<&str> = trusted.iter().map(|k| k.label.as_str()).collect();
        return Err(SignatureError::UntrustedKey {
            hint: hint.to_string(),
            trusted: if held.is_empty() {
                "no keys".into()
            } else {
                held.join(", ")
            },
        });
    };
    let message = pae(&payload);
    for key in &candidates {
        for raw in &sigs {
            let ok = Signature::from_der(raw)
                .or_else(|_| Signature::from_slice(raw))
                .is_ok_and(|sig| key.key.verify(&message, &sig).is_ok());
            if ok {
                let manifest = Manifest::from_payload(&payload)?;
                return Ok(Verified {
                    manifest,
                    key_label: key.label.clone(),
                });
            }
        }
    }
    Err(SignatureError::BadSignature {
        key: first.label.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PrivateKey {
        // A fixed scalar: the tests need a key, not secrecy.
        let secret = p256::SecretKey::from_slice(&[7u8; 32]).unwrap();
        PrivateKey { key: secret.into() }
    }

    fn manifest() -> Manifest {
        let mut m = Manifest::new("pairs");
        m.add("m.py", b"print(1)\n");
        m.add("m.cache", b"\x00\x01cache");
        m.ignore_paths.push("m.py.sig".into());
        m
    }

    #[test]
    fn a_signature_verifies_with_its_key_and_states_its_files() {
        let k = key();
        let sig = sign(&k, &manifest());
        let v = verify(sig.as_bytes(), &[k.public()]).unwrap();
        assert_eq!(v.manifest, manifest());
        v.manifest.check_file("m.py", b"print(1)\n").unwrap();
        assert!(v.manifest.check_file("m.py", b"print(2)\n").is_err());
        assert!(v.manifest.check_file("other.py", b"print(1)\n").is_err());
    }

    #[test]
    fn another_key_is_untrusted_and_an_altered_payload_does_not_verify() {
        let k = key();
        let other = PrivateKey {
            key: p256::SecretKey::from_slice(&[9u8; 32]).unwrap().into(),
        };
        let sig = sign(&k, &manifest());
        assert!(matches!(
            verify(sig.as_bytes(), &[other.public()]),
            Err(SignatureError::UntrustedKey { .. })
        ));
        // a payload with one more file, the old signature kept
        let mut v: Value = serde_json::from_str(&sig).unwrap();
        let mut m = manifest();
        m.add("evil.py", b"import os");
        v["dsseEnvelope"]["payload"] = json!(B64.encode(m.to_payload()));
        let altered = serde_json::to_vec(&v).unwrap();
        assert!(matches!(
            verify(&altered, &[k.public()]),
            Err(SignatureError::BadSignature { .. })
        ));
        // and re-signed by another key under the trusted key's hint
        let mut resigned: Value = serde_json::from_str(&sign(&other, &m)).unwrap();
        resigned["verificationMaterial"]["publicKey"]["hint"] = json!(k.public().hint());
        let resigned = serde_json::to_vec(&resigned).unwrap();
        assert!(matches!(
            verify(&resigned, &[k.public()]),
            Err(SignatureError::BadSignature { .. })
        ));
    }

    #[test]
    fn keys_load_from_pem_and_garbage_is_named() {
        assert!(matches!(
            PrivateKey::from_pem("hello"),
            Err(SignatureError::BadKey(_))
        ));
        assert!(matches!(
            TrustedKey::from_pem("hello", "k.pem"),
            Err(SignatureError::BadKey(_))
        ));
        assert!(verify(b"{}", &[key().public()]).is_err());
    }
}
