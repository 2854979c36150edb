//! Secrets at rest: AES-256-GCM with a random 96-bit nonce per seal. The owner's id is
//! bound in as associated data, so a sealed value copied onto another row does not
//! open. Sealed values are `v1.<base64url(nonce ‖ ciphertext)>`.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rand::RngCore;
use serde_json::Value;

/// Why a secret could not be sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The configured key is not 32 bytes of base64 or hex.
    #[error("AGENTD_SECRET_KEY must be 32 bytes, base64 or hex encoded")]
    BadKey,
    /// The sealed value is corrupt or was sealed with another key or for another owner.
    #[error("sealed secret cannot be opened (wrong AGENTD_SECRET_KEY, or corrupt)")]
    Unopenable,
}

/// Seals and opens secret JSON values with one key.
#[derive(Clone)]
pub struct SecretBox {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

impl SecretBox {
    /// A box from a 32-byte key given as base64 (standard or URL-safe) or hex.
    pub fn from_encoded(encoded: &str) -> Result<Self, SecretError> {
        let encoded = encoded.trim();
        let bytes = hex::decode(encoded)
            .ok()
            .or_else(|| STANDARD.decode(encoded).ok())
            .or_else(|| URL_SAFE_NO_PAD.decode(encoded.trim_end_matches('=')).ok())
            .filter(|bytes| bytes.len() == 32)
            .ok_or(SecretError::BadKey)?;
        let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|_| SecretError::BadKey)?;
        Ok(Self { cipher })
    }

    /// A fresh random key, base64 encoded (for `agentd dev`'s data dir).
    pub fn generate_key() -> String {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        STANDARD.encode(key)
    }

    /// Seals `value` for `owner`.
    pub fn seal(&self, owner: &str, value: &Value) -> String {
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        let plaintext = value.to_string();
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext.as_bytes(), aad: owner.as_bytes() })
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut sealed = nonce.to_vec();
        sealed.extend(ciphertext);
        format!("v1.{}", URL_SAFE_NO_PAD.encode(sealed))
    }

    /// Opens a value sealed for `owner`.
    pub fn open(&self, owner: &str, sealed: &str) -> Result<Value, SecretError> {
        let bytes = sealed
            .strip_prefix("v1.")
            .and_then(|encoded| URL_SAFE_NO_PAD.decode(encoded).ok())
            .filter(|bytes| bytes.len() > 12)
            .ok_or(SecretError::Unopenable)?;
        let (nonce, ciphertext) = bytes.split_at(12);
        let plaintext = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad: owner.as_bytes() })
            .map_err(|_| SecretError::Unopenable)?;
        serde_json::from_slice(&plaintext).map_err(|_| SecretError::Unopenable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_open_only_for_their_owner_and_key() {
        let key = SecretBox::generate_key();
        let secrets = SecretBox::from_encoded(&key).unwrap();
        let value = serde_json::json!({ "token": "hunter2" });
        let sealed = secrets.seal("vcrd_1", &value);
        assert!(!sealed.contains("hunter2"));
        assert_eq!(secrets.open("vcrd_1", &sealed).unwrap(), value);
        assert!(secrets.open("vcrd_2", &sealed).is_err(), "bound to its owner");
        let other = SecretBox::from_encoded(&SecretBox::generate_key()).unwrap();
        assert!(other.open("vcrd_1", &sealed).is_err(), "bound to its key");
        assert!(SecretBox::from_encoded("short").is_err());
    }
}
