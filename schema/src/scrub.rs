//! The one scrubber of upstream-derived text: every path that turns what a remote
//! server said (an MCP server, an A2A agent, an OAuth token endpoint) into text we store,
//! log or return passes it through a [`Scrubber`] built from the secrets that were sent
//! there, so a server that echoes a credential back cannot leak it into a response,
//! an event or the model's context.
//!
//! A secret is recognised in every encoding a server is likely to echo it in: as sent;
//! percent-encoded (`+` and `%20` for spaces, upper- and lower-case hex, form and
//! RFC 3986 reserved sets); JSON-escaped (with `\/` and with `\uXXXX` escapes); hex
//! (upper and lower case); base64 and base64url, padded and unpadded, alone, as
//! `client_id:secret` (HTTP Basic), and embedded at any offset of a longer base64 text
//! (the run of characters that depends only on the secret's bytes).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

/// What a scrubbed secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Base64 runs shorter than this are not scrubbed when found embedded in longer base64
/// (too short to identify a secret, and likely to match unrelated text).
const MIN_EMBEDDED_BASE64: usize = 8;

/// Replaces every known spelling of a set of secrets with [`REDACTED`].
#[derive(Clone, Default)]
pub struct Scrubber {
    /// Longest first, so a spelling that contains another is replaced whole.
    spellings: Vec<String>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scrubber({} spellings)", self.spellings.len())
    }
}

impl Scrubber {
    /// A scrubber of `secrets` (empty ones are ignored).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut scrubber = Self::default();
        for secret in secrets {
            scrubber.add(secret);
        }
        scrubber
    }

    /// Also scrubs `secret`, alone and as the HTTP Basic pair `user:secret`.
    pub fn with_basic(mut self, user: &str, secret: &str) -> Self {
        if !secret.is_empty() {
            self.add(secret);
            self.add(&format!("{user}:{secret}"));
        }
        self
    }

    /// Adds one secret in every spelling.
    pub fn add(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let bytes = secret.as_bytes();
        let mut out = vec![secret.to_owned()];
        for upper in [true, false] {
            // application/x-www-form-urlencoded (space as `+`), and RFC 3986 strict,
            // JavaScript's encodeURIComponent (space as `%20`).
            out.push(percent(bytes, b"*-._", true, upper));
            out.push(percent(bytes, b"-._~", false, upper));
            out.push(percent(bytes, b"-._~!'()*", false, upper));
            out.push(if upper { hex::encode_upper(bytes) } else { hex::encode(bytes) });
            out.push(json_escaped(secret, true, upper));
        }
        let json = serde_json::to_string(secret).unwrap_or_default();
        let json = json[1..json.len() - 1].to_owned();
        out.push(json.replace('/', "\\/"));
        out.push(json);
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            out.push(engine.encode(bytes));
        }
        // Embedded in a longer base64 text, the secret's characters depend on its offset
        // modulo 3; the characters made only of its bits are the same at any offset.
        for offset in 0..3 {
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(bytes);
            let first = (offset * 8).div_ceil(6);
            let end = (shifted.len() * 8) / 6;
            if end >= first + MIN_EMBEDDED_BASE64 {
                for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                    out.push(engine.encode(&shifted)[first..end].to_owned());
                }
            }
        }
        self.spellings.extend(out);
        self.spellings.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.spellings.dedup();
    }

    /// Merges another scrubber's spellings into this one.
    pub fn extend(&mut self, other: &Scrubber) {
        self.spellings.extend(other.spellings.iter().cloned());
        self.spellings.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.spellings.dedup();
    }

    /// Whether this scrubber knows no secret.
    pub fn is_empty(&self) -> bool {
        self.spellings.is_empty()
    }

    /// `text` with every spelling of every secret replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for spelling in &self.spellings {
            if text.contains(spelling.as_str()) {
                text = text.replace(spelling.as_str(), REDACTED);
            }
        }
        text
    }

    /// Scrubs every string (and object key) inside a JSON value.
    pub fn scrub_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(text) => Value::String(self.scrub(text)),
            Value::Array(items) => Value::Array(items.iter().map(|item| self.scrub_json(item)).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(key, item)| (self.scrub(key), self.scrub_json(item))).collect())
            }
            other => other.clone(),
        }
    }
}

/// Percent-encodes every byte except ASCII alphanumerics and `unreserved`; a space is
/// `+` when `plus_for_space`.
fn percent(bytes: &[u8], unreserved: &[u8], plus_for_space: bool, upper: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &byte in bytes {
        if byte.is_ascii_alphanumeric() || unreserved.contains(&byte) {
            out.push(byte as char);
        } else if byte == b' ' && plus_for_space {
            out.push('+');
        } else if upper {
            out.push_str(&format!("%{byte:02X}"));
        } else {
            out.push_str(&format!("%{byte:02x}"));
        }
    }
    out
}

/// JSON string escaping with every non-ASCII character as `\uXXXX` (UTF-16, as
/// `ensure_ascii` encoders write it); `/` escaped when `solidus`.
fn json_escaped(text: &str, solidus: bool, upper: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if solidus => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if upper {
                        out.push_str(&format!("\\u{unit:04X}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
    }
    out
}

/// The encodings of `secret` a [`Scrubber`] guarantees to remove, each as a server would
/// echo it: raw, form-urlencoded (upper and lower hex), `%20`-encoded (upper and lower
/// hex), base64 and base64url (padded and unpadded), JSON-escaped, hex (lower and upper).
/// Tests make fake servers echo exactly these.
pub fn encodings(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let json = serde_json::to_string(secret).unwrap_or_default();
    let form: String = form_urlencoded::byte_serialize(bytes).collect();
    let lower_form = lower_hex_escapes(&form);
    vec![
        secret.to_owned(),
        form,
        lower_form,
        percent(bytes, b"-._~", false, true),
        percent(bytes, b"-._~", false, false),
        STANDARD.encode(bytes),
        STANDARD_NO_PAD.encode(bytes),
        URL_SAFE.encode(bytes),
        URL_SAFE_NO_PAD.encode(bytes),
        json[1..json.len() - 1].to_owned(),
        hex::encode(bytes),
        hex::encode_upper(bytes),
    ]
}

/// `%AB` escapes as `%ab`, the rest unchanged.
fn lower_hex_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            out.extend(chars.by_ref().take(2).map(|h| h.to_ascii_lowercase()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_of_a_secret_is_scrubbed() {
        // Spaces, `+`, `/`, `"`, `\` and non-ASCII: each encoding differs from the raw.
        let secret = "s3cr?t +/tok\"en\\ é>>~~";
        let scrubber = Scrubber::new([secret]);
        for encoded in encodings(secret) {
            let text = format!("error: got {encoded} here");
            let out = scrubber.scrub(&text);
            assert!(!out.contains(&encoded), "{encoded:?} survived in {out:?}");
            assert!(out.contains(REDACTED), "{out:?}");
        }
        // JSON with \u escapes and an escaped solidus.
        let ascii = json_escaped(secret, true, false);
        assert!(!scrubber.scrub(&ascii).contains(&ascii));
    }

    #[test]
    fn base64_of_a_secret_inside_longer_text_is_scrubbed_at_any_offset() {
        let secret = "refresh-token-0123456789";
        let scrubber = Scrubber::new([secret]);
        for prefix in ["", "a", "ab", "abc", "{\"token\":\""] {
            let whole = format!("{prefix}{secret}\"}}");
            for engine in [&STANDARD, &URL_SAFE_NO_PAD] {
                let encoded = engine.encode(whole.as_bytes());
                let out = scrubber.scrub(&encoded);
                assert!(out.contains(REDACTED), "offset {}: {out}", prefix.len());
            }
        }
    }

    #[test]
    fn basic_pairs_and_json_values_are_scrubbed() {
        let scrubber = Scrubber::new(["r1"]).with_basic("client", "sekret-value");
        let basic = STANDARD.encode("client:sekret-value");
        assert_eq!(scrubber.scrub(&format!("Basic {basic}")), "Basic [redacted]");
        let value = serde_json::json!({ "error": "bad sekret-value", "nested": ["x sekret-value"] });
        assert!(!scrubber.scrub_json(&value).to_string().contains("sekret"));
        assert!(Scrubber::new([""]).is_empty());
        assert_eq!(Scrubber::new(["abc"]).scrub("no secret"), "no secret");
    }
}
