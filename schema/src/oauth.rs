//! The OAuth refresh-token grant of `mcp_oauth` vault credentials, shared by the
//! gateway (`mcp_oauth_validate`) and the worker (refreshing before an MCP call).
//! Nothing secret is ever returned in an error: response bodies pass the one
//! [`Scrubber`] of upstream text, built from the secrets sent.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::scrub::Scrubber;

const TIMEOUT: Duration = Duration::from_secs(10);
const MAX_BODY: usize = 2048;

/// Tokens from a successful refresh.
pub struct Refreshed {
    /// The new access token.
    pub access_token: String,
    /// A rotated refresh token, when the server sent one.
    pub refresh_token: Option<String>,
    /// Seconds until the access token expires, when the server said.
    pub expires_in: Option<i64>,
}

/// A refresh that did not produce tokens.
pub enum RefreshFailure {
    /// No HTTP answer (DNS, TLS, connect, timeout).
    Unreachable,
    /// The endpoint answered with an error status, or a body without `access_token`;
    /// the captured response (`status_code`, `content_type`, `body`, `body_truncated`)
    /// with every secret replaced by `[redacted]`.
    Rejected(Value),
    /// The egress guard refused the endpoint (the tenant-safe reason).
    Refused(String),
}

/// An HTTP client that follows no redirect (a secret never travels to a second host).
pub fn client() -> Option<reqwest::Client> {
    reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()).build().ok()
}

/// A client for `url` after the egress guard ([`crate::egress`]): no redirect, no proxy,
/// the connection pinned to the checked address. `Err` is the tenant-safe refusal.
pub async fn client_for(url: &str, allow_private: bool) -> Result<reqwest::Client, String> {
    let target = crate::egress::check(url, crate::egress::Rules { allow_private, https_only: false })
        .await
        .map_err(|refused| refused.to_string())?;
    target
        .pin(reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()))
        .build()
        .map_err(|error| error.to_string())
}

/// The response as `{status_code, content_type, body, body_truncated}`, scrubbed.
pub async fn capture(response: reqwest::Response, scrub: &Scrubber) -> Value {
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body = response.text().await.unwrap_or_default();
    captured(status, &content_type, body, scrub)
}

fn captured(status: u16, content_type: &str, body: String, scrub: &Scrubber) -> Value {
    let mut body = scrub.scrub(&body);
    let content_type = scrub.scrub(content_type);
    let truncated = body.len() > MAX_BODY;
    if truncated {
        let mut end = MAX_BODY;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
    }
    json!({ "status_code": status, "content_type": content_type, "body": body, "body_truncated": truncated })
}

/// Runs the refresh-token grant described by a credential's public `refresh` config
/// (`token_endpoint`, `client_id`, `scope?`, `resource?`, `token_endpoint_auth`
/// none | client_secret_basic | client_secret_post) with its opened `secrets`
/// (`refresh_token`, `client_secret`).
/// The endpoint passes the egress guard first (private addresses only when
/// `allow_private`).
pub async fn refresh_grant(
    config: &Value,
    secrets: &Map<String, Value>,
    allow_private: bool,
) -> Result<Refreshed, RefreshFailure> {
    let secret = |key: &str| secrets.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (refresh_token, client_secret) = (secret("refresh_token"), secret("client_secret"));
    let endpoint = config["token_endpoint"].as_str().unwrap_or_default();
    let client = client_for(endpoint, allow_private)
        .await
        .map_err(|refused| RefreshFailure::Refused(format!("token_endpoint: {refused}")))?;
    let client_id = config["client_id"].as_str().unwrap_or_default();
    let mut form: Vec<(&str, String)> = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.clone()),
        ("client_id", client_id.to_owned()),
    ];
    for key in ["scope", "resource"] {
        if let Some(value) = config[key].as_str() {
            form.push((key, value.to_owned()));
        }
    }
    let mut request = client.post(endpoint);
    match config["token_endpoint_auth"]["type"].as_str() {
        Some("client_secret_basic") => request = request.basic_auth(client_id, Some(&client_secret)),
        Some("client_secret_post") => form.push(("client_secret", client_secret.clone())),
        _ => {}
    }
    let encoded = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let sent = request
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(encoded)
        .send()
        .await;
    let scrub = Scrubber::new([refresh_token.as_str()]).with_basic(client_id, &client_secret);
    let response = match sent {
        Ok(response) => response,
        Err(_) => return Err(RefreshFailure::Unreachable),
    };
    if !response.status().is_success() {
        return Err(RefreshFailure::Rejected(capture(response, &scrub).await));
    }
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body = response.text().await.unwrap_or_default();
    let parsed: Value = serde_json::from_str(&body).unwrap_or_default();
    let Some(access_token) = parsed["access_token"].as_str().filter(|t| !t.is_empty()) else {
        let mut scrub = scrub;
        scrub.add(parsed["refresh_token"].as_str().unwrap_or_default());
        return Err(RefreshFailure::Rejected(captured(status, &content_type, body, &scrub)));
    };
    Ok(Refreshed {
        access_token: access_token.to_owned(),
        refresh_token: parsed["refresh_token"].as_str().filter(|t| !t.is_empty()).map(str::to_owned),
        expires_in: parsed["expires_in"].as_i64(),
    })
}

/// Refreshes and describes a failure in one line (status and scrubbed body).
pub async fn refresh(config: &Value, secrets: &Map<String, Value>, allow_private: bool) -> Result<Refreshed, String> {
    refresh_grant(config, secrets, allow_private).await.map_err(|failure| failure.describe())
}

impl RefreshFailure {
    /// The failure in one line (status and scrubbed body).
    pub fn describe(&self) -> String {
        match self {
            RefreshFailure::Unreachable => "the token endpoint could not be reached".to_owned(),
            RefreshFailure::Refused(reason) => reason.clone(),
            RefreshFailure::Rejected(response) => {
                format!("the token endpoint answered HTTP {}: {}", response["status_code"], response["body"])
            }
        }
    }

    /// The endpoint refused the refresh token itself (`invalid_grant`, RFC 6749 §5.2):
    /// it may have been rotated by another refresh.
    pub fn invalid_grant(&self) -> bool {
        let RefreshFailure::Rejected(response) = self else { return false };
        let body = &response["body"];
        body["error"] == "invalid_grant"
            || body.as_str().is_some_and(|text| {
                serde_json::from_str::<Value>(text).is_ok_and(|parsed| parsed["error"] == "invalid_grant")
                    || text.contains("\"invalid_grant\"")
            })
    }
}

/// When a token that expires in `expires_in` seconds from `now_ms` expires, in ms since
/// the epoch: saturating, and capped to a representable timestamp (a hostile or broken
/// endpoint cannot overflow it or turn it into the past).
pub fn expiry_ms(now_ms: i64, expires_in: i64) -> i64 {
    const LATEST: i64 = 253_402_300_799_000; // 9999-12-31T23:59:59Z
    now_ms.saturating_add(expires_in.max(0).saturating_mul(1000)).min(LATEST)
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub use crate::live::rfc3339;

/// Milliseconds since the epoch of an RFC 3339 timestamp.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|at| at.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_bodies_never_hold_a_secret_in_any_spelling() {
        let scrub = Scrubber::new(["r3fresh/tok+en"]).with_basic("client", "r3fresh/tok+en");
        let body = format!(
            "bad {} and {} and {}",
            "r3fresh/tok+en",
            form_urlencoded::byte_serialize(b"r3fresh/tok+en").collect::<String>(),
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "client:r3fresh/tok+en"),
        );
        let out = captured(400, "text/plain", body, &scrub);
        let text = out["body"].as_str().unwrap();
        assert!(!text.contains("r3fresh"), "{text}");
        assert_eq!(text.matches("[redacted]").count(), 3, "{text}");
    }

    #[test]
    fn expiries_saturate_and_stay_representable() {
        assert_eq!(expiry_ms(1_000, 60), 61_000);
        assert_eq!(expiry_ms(1_000, -5), 1_000);
        let far = expiry_ms(now_ms(), i64::MAX);
        assert!(far > now_ms() && parse_rfc3339(&rfc3339(far)) == Some(far), "{}", rfc3339(far));
    }

    #[test]
    fn invalid_grant_is_recognised_in_the_captured_body() {
        let rejected = |body: Value| RefreshFailure::Rejected(json!({ "status_code": 400, "body": body }));
        assert!(rejected(json!("{\"error\":\"invalid_grant\"}")).invalid_grant());
        assert!(rejected(json!({ "error": "invalid_grant" })).invalid_grant());
        assert!(!rejected(json!("{\"error\":\"invalid_client\"}")).invalid_grant());
        assert!(!RefreshFailure::Unreachable.invalid_grant());
    }

    #[test]
    fn timestamps_round_trip() {
        let ms = 1_800_000_000_123;
        assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
    }
}
