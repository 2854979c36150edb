//! Live probes behind `mcp_oauth_validate`: an MCP `initialize` with the stored token,
//! and the OAuth refresh-token exchange. Captured responses are truncated and never
//! contain the secrets we sent.

use std::time::Duration;

use serde_json::{Map, Value, json};

const TIMEOUT: Duration = Duration::from_secs(10);
const MAX_BODY: usize = 2048;

/// What the MCP server said to `initialize`.
pub enum Outcome {
    /// A 2xx answer.
    Ok,
    /// An error status; `unauthorized` when it was 401.
    Rejected {
        /// The captured response.
        http_response: Value,
        /// Whether the server answered 401.
        unauthorized: bool,
    },
    /// No HTTP answer (DNS, TLS, connect, timeout).
    Unreachable,
}

fn client() -> Option<reqwest::Client> {
    reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()).build().ok()
}

/// Every spelling in which a secret we sent could come back in a response body: as
/// sent, percent-encoded (form bodies), and base64 (Basic credentials, alone or as
/// `client_id:secret`).
fn spellings(secrets: &[&str], client_id: &str) -> Vec<String> {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    let mut out = Vec::new();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        out.push((*secret).to_owned());
        out.push(form_urlencoded::byte_serialize(secret.as_bytes()).collect());
        out.push(STANDARD.encode(secret));
        out.push(STANDARD.encode(format!("{client_id}:{secret}")));
    }
    // Longest first, so a spelling that contains another is scrubbed whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

async fn capture(response: reqwest::Response, scrub: &[String]) -> Value {
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let mut body = response.text().await.unwrap_or_default();
    for secret in scrub {
        body = body.replace(secret.as_str(), "[redacted]");
    }
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

/// Sends an MCP `initialize` to `server` with `token` as the bearer.
pub async fn initialize(server: &str, token: &str) -> Outcome {
    let Some(client) = client() else { return Outcome::Unreachable };
    let request = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "agentd-credential-validator", "version": env!("CARGO_PKG_VERSION") }
        }
    });
    let sent = client
        .post(server)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&request)
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => Outcome::Ok,
        Ok(response) => {
            let unauthorized = response.status().as_u16() == 401;
            Outcome::Rejected { http_response: capture(response, &spellings(&[token], "")).await, unauthorized }
        }
        Err(_) => Outcome::Unreachable,
    }
}

/// Tries the refresh-token grant described by a credential's public `refresh` config.
pub async fn refresh(config: &Value, secrets: &Map<String, Value>) -> Value {
    let secret = |key: &str| secrets.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (refresh_token, client_secret) = (secret("refresh_token"), secret("client_secret"));
    let Some(client) = client() else { return json!({ "status": "connect_error", "http_response": null }) };
    let endpoint = config["token_endpoint"].as_str().unwrap_or_default();
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
    let sent = request.header("content-type", "application/x-www-form-urlencoded").body(encoded).send().await;
    match sent {
        Ok(response) if response.status().is_success() => json!({ "status": "succeeded", "http_response": null }),
        Ok(response) => {
            let scrub = spellings(&[&refresh_token, &client_secret], client_id);
            json!({ "status": "failed", "http_response": capture(response, &scrub).await })
        }
        Err(_) => json!({ "status": "connect_error", "http_response": null }),
    }
}
