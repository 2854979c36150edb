//! Secrets at rest: AES-256-GCM with a random 96-bit nonce per seal. The owner's id is
//! bound in as associated data, so a sealed value copied onto another row does not
//! open. Sealed values are `v1.<base64url(nonce ‖ ciphertext)>`.
//!
//! Key rotation (ADR 0004): a box seals with its current key and opens with the current
//! key or any previous one (`AGENTD_SECRET_KEY_PREVIOUS`); GCM's tag tells the keys
//! apart, so the sealed format needs no key id. `agentd keys rotate-secret`
//! ([`crate::rotation`]) re-seals what only a previous key opens.

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

/// Seals secret JSON values with its current key; opens them with the current key or a
/// previous one.
#[derive(Clone)]
pub struct SecretBox {
    cipher: Aes256Gcm,
    /// Keys that still open values sealed before a rotation, never used to seal.
    previous: Vec<Aes256Gcm>,
    /// The key bytes, current first, then the previous keys: only ever an HMAC key for
    /// [`SecretBox::derive_key`], never used raw for anything else.
    roots: Vec<[u8; 32]>,
}

/// Which key opened a sealed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedWith {
    /// The current key: nothing to re-seal.
    Current,
    /// A previous key: re-seal under the current one.
    Previous,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

impl SecretBox {
    /// A box from a 32-byte key given as base64 (standard or URL-safe) or hex.
    pub fn from_encoded(encoded: &str) -> Result<Self, SecretError> {
        let root = key_bytes(encoded)?;
        Ok(Self { cipher: cipher_of(&root)?, previous: Vec::new(), roots: vec![root] })
    }

    /// Also opens values sealed with `encoded` (a previous key, base64 or hex); a
    /// comma-separated list adds several. Sealing still uses the current key only.
    pub fn with_previous(mut self, encoded: &str) -> Result<Self, SecretError> {
        for key in encoded.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let root = key_bytes(key)?;
            self.previous.push(cipher_of(&root)?);
            self.roots.push(root);
        }
        Ok(self)
    }

    /// Whether previous keys are configured (a rotation may be in progress).
    pub fn has_previous(&self) -> bool {
        !self.previous.is_empty()
    }

    /// A 32-byte key for another use than sealing (signing links, say), derived from the
    /// current key and `label`: HMAC-SHA256(key, "agentd-subkey-v1:" ‖ label). Distinct
    /// labels give independent keys; none of them reveals the sealing key.
    pub fn derive_key(&self, label: &str) -> [u8; 32] {
        derive(&self.roots[0], label)
    }

    /// [`SecretBox::derive_key`] under the current key, then under each previous one:
    /// what a signature made before a rotation verifies with.
    pub fn derived_keys(&self, label: &str) -> Vec<[u8; 32]> {
        self.roots.iter().map(|root| derive(root, label)).collect()
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

    /// Opens a value sealed for `owner` with the current key or a previous one.
    pub fn open(&self, owner: &str, sealed: &str) -> Result<Value, SecretError> {
        self.open_reporting(owner, sealed).map(|(value, _)| value)
    }

    /// Opens a value and says which key opened it.
    pub fn open_reporting(&self, owner: &str, sealed: &str) -> Result<(Value, OpenedWith), SecretError> {
        let bytes = sealed
            .strip_prefix("v1.")
            .and_then(|encoded| URL_SAFE_NO_PAD.decode(encoded).ok())
            .filter(|bytes| bytes.len() > 12)
            .ok_or(SecretError::Unopenable)?;
        let (nonce, ciphertext) = bytes.split_at(12);
        let keys = std::iter::once((&self.cipher, OpenedWith::Current))
            .chain(self.previous.iter().map(|cipher| (cipher, OpenedWith::Previous)));
        for (cipher, which) in keys {
            if let Ok(plaintext) =
                cipher.decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad: owner.as_bytes() })
            {
                let value = serde_json::from_slice(&plaintext).map_err(|_| SecretError::Unopenable)?;
                return Ok((value, which));
            }
        }
        Err(SecretError::Unopenable)
    }

    /// The value re-sealed under the current key, or `None` when the current key
    /// already opens it.
    pub fn reseal(&self, owner: &str, sealed: &str) -> Result<Option<String>, SecretError> {
        match self.open_reporting(owner, sealed)? {
            (_, OpenedWith::Current) => Ok(None),
            (value, OpenedWith::Previous) => Ok(Some(self.seal(owner, &value))),
        }
    }
}

/// A 32-byte key given as base64 (standard or URL-safe) or hex.
fn key_bytes(encoded: &str) -> Result<[u8; 32], SecretError> {
    let encoded = encoded.trim();
    hex::decode(encoded)
        .ok()
        .or_else(|| STANDARD.decode(encoded).ok())
        .or_else(|| URL_SAFE_NO_PAD.decode(encoded.trim_end_matches('=')).ok())
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or(SecretError::BadKey)
}

/// The AES-256-GCM cipher of a key.
fn cipher_of(key: &[u8; 32]) -> Result<Aes256Gcm, SecretError> {
    Aes256Gcm::new_from_slice(key).map_err(|_| SecretError::BadKey)
}

/// HMAC-SHA256(root, "agentd-subkey-v1:" ‖ label).
fn derive(root: &[u8; 32], label: &str) -> [u8; 32] {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(root).expect("HMAC takes keys of any length");
    mac.update(b"agentd-subkey-v1:");
    mac.update(label.as_bytes());
    mac.finalize().into_bytes().into()
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

    #[test]
    fn a_rotated_box_opens_old_values_and_reseals_them_under_the_new_key() {
        let (old_key, new_key) = (SecretBox::generate_key(), SecretBox::generate_key());
        let old = SecretBox::from_encoded(&old_key).unwrap();
        let value = serde_json::json!({ "token": "hunter2" });
        let sealed = old.seal("vcrd_1", &value);
        let rotated = SecretBox::from_encoded(&new_key).unwrap().with_previous(&old_key).unwrap();
        assert!(rotated.has_previous());
        assert_eq!(rotated.open_reporting("vcrd_1", &sealed).unwrap(), (value.clone(), OpenedWith::Previous));
        let resealed = rotated.reseal("vcrd_1", &sealed).unwrap().expect("sealed with the old key");
        assert_eq!(rotated.open_reporting("vcrd_1", &resealed).unwrap(), (value.clone(), OpenedWith::Current));
        assert_eq!(rotated.reseal("vcrd_1", &resealed).unwrap(), None, "idempotent");
        let new_only = SecretBox::from_encoded(&new_key).unwrap();
        assert_eq!(new_only.open("vcrd_1", &resealed).unwrap(), value);
        assert!(new_only.open("vcrd_1", &sealed).is_err(), "the old key is gone once dropped");
        assert!(rotated.open("vcrd_2", &sealed).is_err(), "still bound to its owner");
        assert!(SecretBox::from_encoded(&new_key).unwrap().with_previous("short").is_err());
    }

    #[test]
    fn derived_keys_are_stable_distinct_per_label_and_follow_rotation() {
        let (old_key, new_key) = (SecretBox::generate_key(), SecretBox::generate_key());
        let old = SecretBox::from_encoded(&old_key).unwrap();
        let link = old.derive_key("consent-links");
        assert_eq!(SecretBox::from_encoded(&old_key).unwrap().derive_key("consent-links"), link, "stable");
        assert_ne!(old.derive_key("another-use"), link, "one key per label");
        let raw = STANDARD.decode(&old_key).unwrap();
        assert_ne!(link.as_slice(), raw.as_slice(), "never the sealing key itself");
        let rotated = SecretBox::from_encoded(&new_key).unwrap().with_previous(&old_key).unwrap();
        assert_ne!(rotated.derive_key("consent-links"), link, "the current key derives");
        assert_eq!(rotated.derived_keys("consent-links")[1], link, "a previous key still verifies");
    }
}
