//! Prefixed, sortable, random identifiers (`sesn_…`, `run_…`): a UUIDv7 rendered in
//! Crockford base32, so ids sort by creation time and never collide across processes.

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A new id with the given prefix, e.g. `new_id("sesn")` → `sesn_01jd…` (26 characters after `_`).
pub fn new_id(prefix: &str) -> String {
    let mut value = uuid::Uuid::now_v7().as_u128();
    let mut encoded = [0u8; 26];
    for slot in encoded.iter_mut().rev() {
        *slot = ALPHABET[(value & 31) as usize];
        value >>= 5;
    }
    let mut id = String::with_capacity(prefix.len() + 27);
    id.push_str(prefix);
    id.push('_');
    id.extend(encoded.iter().map(|&b| b as char));
    id
}

/// A new high-entropy secret (256 random bits, URL-safe base64) with a readable prefix,
/// e.g. `new_secret("sk-agentd")`. Only its hash is ever stored.
pub fn new_secret(prefix: &str) -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}-{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// How secrets (API keys, sessions tokens) are stored: hex SHA-256, never the secret.
pub fn secret_hash(secret: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_unique_and_sortable() {
        let a = new_id("sesn");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id("sesn");
        assert!(a.starts_with("sesn_") && a.len() == 31, "{a}");
        assert!(a < b, "{a} should sort before {b}");
    }
}
