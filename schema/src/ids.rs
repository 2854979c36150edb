//! Prefixed, sortable, random identifiers (`sesn_…`, `run_…`): a UUIDv7 rendered in
//! Crockford base32, so ids sort by creation time and never collide across processes.
//! Ids that arrive from outside are parsed into the typed ids below once, from the
//! decoded path, and that one value is what authorization checks and handlers use.

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

/// Why a path segment is not an id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid {kind} id")]
pub struct InvalidId {
    /// The kind expected, e.g. `session`.
    pub kind: &'static str,
}

/// Whether `value` is `<prefix>_` followed by exactly the 26 lowercase Crockford base32
/// characters [`new_id`] writes. Nothing else is an id: no other case, no padding, no
/// separators, no look-alike characters.
pub fn is_id(prefix: &str, value: &str) -> bool {
    let Some(rest) = value.strip_prefix(prefix).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    rest.len() == 26 && rest.bytes().all(|b| ALPHABET.contains(&b))
}

/// Declares a typed id: parsed once (prefix and alphabet checked), then carried as is.
/// It dereferences to `&str`, displays and serializes as its text, and deserializes
/// only from text that parses.
macro_rules! typed_ids {
    ($($(#[$doc:meta])* $name:ident = $kind:literal, $($prefix:literal)|+;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// What the id names, for messages.
            pub const KIND: &'static str = $kind;

            /// Parses `value`, which must carry one of the kind's prefixes.
            pub fn parse(value: &str) -> Result<Self, InvalidId> {
                if [$($prefix),+].iter().any(|prefix| is_id(prefix, value)) {
                    Ok(Self(value.to_owned()))
                } else {
                    Err(InvalidId { kind: $kind })
                }
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidId;
            fn from_str(value: &str) -> Result<Self, InvalidId> {
                Self::parse(value)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                Self::parse(&value).map_err(serde::de::Error::custom)
            }
        }
    )*};
}

typed_ids! {
    /// `agent_…`
    AgentId = "agent", "agent";
    /// `env_…`
    EnvironmentId = "environment", "env";
    /// `sesn_…`
    SessionId = "session", "sesn";
    /// A session thread: the primary thread carries its session's id (`sesn_…`);
    /// other threads are `sthr_…`.
    ThreadId = "thread", "sesn" | "sthr";
    /// `sres_…`
    SessionResourceId = "session resource", "sres";
    /// `vlt_…`
    VaultId = "vault", "vlt";
    /// `vcrd_…`
    CredentialId = "credential", "vcrd";
    /// `work_…`
    WorkId = "work item", "work";
    /// `apikey_…`
    ApiKeyId = "key", "apikey";
    /// `inbox_…`
    InboxMessageId = "live inbox message", "inbox";
    /// `run_…`
    RunId = "run", "run";
    /// `file_…`
    FileId = "file", "file";
    /// `skill_…`
    SkillId = "skill", "skill";
    /// `memstore_…`
    MemoryStoreId = "memory store", "memstore";
    /// `mem_…`
    MemoryId = "memory", "mem";
    /// `memver_…`
    MemoryVersionId = "memory version", "memver";
    /// `drm_…`
    DreamId = "dream", "drm";
    /// `depl_…`
    DeploymentId = "deployment", "depl";
    /// `drun_…`
    DeploymentRunId = "deployment run", "drun";
    /// `uprof_…`
    UserProfileId = "user profile", "uprof";
    /// `aat_…`
    ApplicationAccessTokenId = "application access token", "aat";
    /// `pcrd_…`: a model provider's credential (`/v1/config/credentials`).
    ProviderCredentialId = "provider credential", "pcrd";
    /// `tnl_…`
    TunnelId = "tunnel", "tnl";
    /// `tcrt_…`
    TunnelCertificateId = "tunnel certificate", "tcrt";
}

/// A webhook subscription: a name its creator chose on the control plane, or `whep_…`
/// minted by the organization endpoint API; 1 to 64 letters, digits, `_` and `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct WebhookSubscriptionId(String);

impl WebhookSubscriptionId {
    /// What the id names, for messages.
    pub const KIND: &'static str = "webhook subscription";

    /// Parses `value`: 1 to 64 ASCII letters, digits, `_` and `-`.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        if (1..=64).contains(&value.len()) && value.bytes().all(allowed) {
            Ok(Self(value.to_owned()))
        } else {
            Err(InvalidId { kind: Self::KIND })
        }
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for WebhookSubscriptionId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::parse(&value).map_err(serde::de::Error::custom)
    }
}

/// The id of kind `prefix` that shares `id`'s suffix: an id derived from another one,
/// so a retry of a step that creates it finds what an earlier attempt created (a
/// dream's session and output store are derived from the dream's id).
pub fn derived_id(id: &str, prefix: &str) -> String {
    let suffix = id.split_once('_').map_or(id, |(_, suffix)| suffix);
    format!("{prefix}_{suffix}")
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

    #[test]
    fn typed_ids_accept_exactly_what_new_id_writes() {
        let id = new_id("sesn");
        assert_eq!(SessionId::parse(&id).unwrap().as_str(), id);
        let upper = id.to_uppercase();
        let mixed = format!("sesn_{}", &upper[5..]);
        let rest = &id[5..];
        for bad in [
            "".to_owned(),
            "sesn_".to_owned(),
            "sesn".to_owned(),
            upper,
            mixed,
            format!("sesn-{rest}"),
            format!("sesn_{rest}."),
            format!("sesn_{rest}/"),
            format!("sesn_{}", &rest[1..]),
            format!("sesn_{rest}0"),
            format!("sesn_{}\u{0430}", &rest[1..]),
            format!("sesn_{}u", &rest[1..]),
            format!("sesn%5F{rest}"),
            format!("../sesn_{rest}"),
            format!("agent_{rest}"),
        ] {
            assert!(SessionId::parse(&bad).is_err(), "{bad:?} parsed");
        }
        assert!(ThreadId::parse(&id).is_ok(), "a session id names its primary thread");
        assert!(AgentId::parse(&id).is_err());
    }

    #[test]
    fn typed_ids_deserialize_only_when_they_parse() {
        let id = new_id("env");
        let parsed: EnvironmentId = serde_json::from_value(serde_json::json!(id)).unwrap();
        assert_eq!(parsed, id);
        assert!(serde_json::from_value::<EnvironmentId>(serde_json::json!("env_nope")).is_err());
    }
}
