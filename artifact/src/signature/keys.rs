//! PEM keys: a signer's private key, the trust policy's public keys, and the
//! hint a bundle names its key by (sha256 hex of the public key's SPKI PEM with
//! LF line endings, as the model signing library computes it).

use p256::ecdsa::{SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey, LineEnding};

use super::SignatureError;
use crate::sha256_hex;

/// An ECDSA P-256 signing key.
pub struct PrivateKey {
    pub(crate) key: SigningKey,
}

impl PrivateKey {
    /// A PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`) or SEC1 (`BEGIN EC
    /// PRIVATE KEY`, what `openssl ecparam -genkey` writes). Encrypted keys are
    /// refused with a hint.
    pub fn from_pem(pem: &str) -> Result<Self, SignatureError> {
        if pem.contains("ENCRYPTED") {
            return Err(SignatureError::BadKey(
                "an encrypted private key; decrypt it first (openssl pkey -in KEY -out PLAIN)"
                    .into(),
            ));
        }
        let key = if pem.contains("BEGIN EC PRIVATE KEY") {
            p256::SecretKey::from_sec1_pem(pem)
                .map(SigningKey::from)
                .map_err(|e| {
                    SignatureError::BadKey(format!("a SEC1 key that is not P-256 ({e})"))
                })?
        } else if pem.contains("BEGIN PRIVATE KEY") {
            SigningKey::from_pkcs8_pem(pem).map_err(|e| {
                SignatureError::BadKey(format!("a PKCS#8 key that is not ECDSA P-256 ({e})"))
            })?
        } else {
            return Err(SignatureError::BadKey(
                "no PEM private key (expected BEGIN PRIVATE KEY or BEGIN EC PRIVATE KEY); \
                 make one with: openssl ecparam -name prime256v1 -genkey -noout -out key.pem"
                    .into(),
            ));
        };
        Ok(Self { key })
    }

    /// The public half, as a verifier would hold it.
    pub fn public(&self) -> TrustedKey {
        TrustedKey::new(*self.key.verifying_key(), String::new())
    }
}

/// A public key the trust policy holds, with a label (its file) for messages.
#[derive(Clone)]
pub struct TrustedKey {
    pub(crate) key: VerifyingKey,
    hint: String,
    pub label: String,
}

impl TrustedKey {
    fn new(key: VerifyingKey, label: String) -> Self {
        let pem = key
            .to_public_key_pem(LineEnding::LF)
            .expect("a P-256 point always encodes");
        Self {
            key,
            hint: sha256_hex(pem.as_bytes()),
            label,
        }
    }

    /// An SPKI PEM public key (`BEGIN PUBLIC KEY`, what `openssl ec -pubout` writes).
    pub fn from_pem(pem: &str, label: &str) -> Result<Self, SignatureError> {
        let key = VerifyingKey::from_public_key_pem(pem).map_err(|e| {
            SignatureError::BadKey(format!(
                "{label}: not a PEM ECDSA P-256 public key ({e}); export one with: \
                 openssl ec -in key.pem -pubout -out pub.pem"
            ))
        })?;
        Ok(Self::new(key, label.to_string()))
    }

    /// The hint a bundle signed by this key carries.
    pub fn hint(&self) -> &str {
        &self.hint
    }
}
