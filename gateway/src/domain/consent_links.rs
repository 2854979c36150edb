//! The signed links of the consent page (docs/api/user-profiles.md, "Enrollment and
//! action URLs"): a token that names a workspace, a user profile, what the link was
//! issued for and when it expires, signed with HMAC-SHA256. The token is the only
//! credential of the page: whoever holds it may answer for the profile until it expires.
//!
//! Tokens are `v1.<payload>.<mac>`: the payload a base64url JSON object, the MAC
//! HMAC-SHA256 over `v1.<payload>` (the bytes as sent, so nothing is re-serialized before
//! it is checked) under a key derived from the server's sealing key for this use only
//! (`SecretBox::derive_key`); a key rotated out still verifies links it signed.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// How long a link works: 15 minutes.
pub const LINK_TTL_MS: i64 = 15 * 60 * 1000;
/// Tests only: a shorter lifetime of new links in milliseconds (a longer one is ignored,
/// so this can only shorten the production rule, never lengthen it).
pub const TEST_TTL_ENV: &str = "AGENTD_TEST_CONSENT_LINK_TTL_MS";
/// The label of the signing key derived from the sealing key.
pub const KEY_LABEL: &str = "consent-links";
/// Tokens longer than this are refused unread.
const MAX_TOKEN_CHARS: usize = 1024;
const VERSION: &str = "v1";

/// What a link was issued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// `POST /v1/user_profiles/{id}/enrollment_url`.
    Enrollment,
    /// `POST /v1/user_profiles/{id}/action_urls` with `enroll_end_user`.
    EnrollEndUser,
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkClaims {
    /// The profile's workspace.
    #[serde(rename = "w")]
    pub workspace_id: String,
    /// The profile (`uprof_…`).
    #[serde(rename = "p")]
    pub profile_id: String,
    /// What the link was issued for.
    #[serde(rename = "k")]
    pub kind: LinkKind,
    /// When it stops working, epoch ms.
    #[serde(rename = "x")]
    pub expires_at_ms: i64,
}

/// Why a token does not open the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Not a token of this server: malformed, or signed with another key, or altered.
    #[error("the link is not valid")]
    Invalid,
    /// A valid token past its expiry.
    #[error("the link expired")]
    Expired {
        /// When it expired, epoch ms.
        at_ms: i64,
    },
}

/// The lifetime of a new link: [`LINK_TTL_MS`], or less under [`TEST_TTL_ENV`].
pub fn ttl_ms() -> i64 {
    std::env::var(TEST_TTL_ENV)
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|ms| *ms >= 100)
        .map_or(LINK_TTL_MS, |ms| ms.min(LINK_TTL_MS))
}

fn mac(key: &[u8], signed: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(signed.as_bytes());
    mac
}

/// Signs `claims` with `key`.
pub fn sign(key: &[u8; 32], claims: &LinkClaims) -> String {
    let payload = serde_json::to_vec(claims).expect("claims serialize");
    let signed = format!("{VERSION}.{}", URL_SAFE_NO_PAD.encode(payload));
    let tag = mac(key, &signed).finalize().into_bytes();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// Verifies a token against `keys` (the current key first) at `now_ms`. The signature is
/// checked (in constant time) before anything in the payload is read.
pub fn verify(keys: &[[u8; 32]], token: &str, now_ms: i64) -> Result<LinkClaims, LinkError> {
    if token.len() > MAX_TOKEN_CHARS {
        return Err(LinkError::Invalid);
    }
    let (signed, tag) = token.rsplit_once('.').ok_or(LinkError::Invalid)?;
    let (version, payload) = signed.split_once('.').ok_or(LinkError::Invalid)?;
    if version != VERSION {
        return Err(LinkError::Invalid);
    }
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| LinkError::Invalid)?;
    if !keys.iter().any(|key| mac(key, signed).verify_slice(&tag).is_ok()) {
        return Err(LinkError::Invalid);
    }
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| LinkError::Invalid)?;
    let claims: LinkClaims = serde_json::from_slice(&payload).map_err(|_| LinkError::Invalid)?;
    if now_ms >= claims.expires_at_ms {
        return Err(LinkError::Expired { at_ms: claims.expires_at_ms });
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(expires_at_ms: i64) -> LinkClaims {
        LinkClaims {
            workspace_id: "wrkspc_1".into(),
            profile_id: "uprof_1".into(),
            kind: LinkKind::Enrollment,
            expires_at_ms,
        }
    }

    #[test]
    fn a_signed_link_verifies_until_it_expires() {
        let key = [7u8; 32];
        let token = sign(&key, &claims(1_000));
        assert!(token.starts_with("v1.") && token.matches('.').count() == 2, "{token}");
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)), "URL-safe: {token}");
        assert_eq!(verify(&[key], &token, 999), Ok(claims(1_000)));
        assert_eq!(verify(&[key], &token, 1_000), Err(LinkError::Expired { at_ms: 1_000 }));
    }

    #[test]
    fn another_key_or_any_altered_byte_refuses() {
        let key = [7u8; 32];
        let token = sign(&key, &claims(1_000));
        assert_eq!(verify(&[[8u8; 32]], &token, 0), Err(LinkError::Invalid), "another key");
        assert_eq!(verify(&[[8u8; 32], key], &token, 0), Ok(claims(1_000)), "a previous key still verifies");
        // Every single-character change of the token refuses.
        for at in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(bytes).unwrap();
            if altered != token {
                assert!(verify(&[key], &altered, 0).is_err(), "altered at {at}: {altered}");
            }
        }
        // A payload re-signed by someone without the key: a longer expiry, another profile.
        let (_, tag) = token.rsplit_once('.').unwrap();
        let mut forged = claims(i64::MAX);
        forged.profile_id = "uprof_2".into();
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(verify(&[key], &format!("v1.{payload}.{tag}"), 0), Err(LinkError::Invalid));
        for bad in ["", "v1", "v1.", "v1..", "v2.e30.AAAA", &"a".repeat(MAX_TOKEN_CHARS + 1)] {
            assert_eq!(verify(&[key], bad, 0), Err(LinkError::Invalid), "{bad:?}");
        }
    }

    #[test]
    fn the_test_lifetime_only_shortens_links() {
        assert_eq!(LINK_TTL_MS, 900_000);
        // Not set in unit tests: the production rule.
        if std::env::var(TEST_TTL_ENV).is_err() {
            assert_eq!(ttl_ms(), LINK_TTL_MS);
        }
    }
}
