//! Live probes behind `mcp_oauth_validate`: an MCP `initialize` with the stored token,
//! and the OAuth refresh-token exchange. Captured responses are truncated and never
//! contain the secrets we sent. A refresh made here is real: its tokens are written
//! back to the credential (sealed), like a worker's refresh (`credentials.rs`).

use serde_json::{Map, Value, json};

use agentd_schema::oauth::{self, RefreshFailure, Refreshed, capture};
use agentd_schema::scrub::Scrubber;

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
    /// The egress guard refused the server's URL (the tenant-safe reason).
    Refused(String),
}

/// Sends an MCP `initialize` to `server` with `token` as the bearer, after the egress
/// guard (private addresses only when `allow_private`).
pub async fn initialize(server: &str, token: &str, allow_private: bool) -> Outcome {
    let client = match oauth::client_for(server, allow_private).await {
        Ok(client) => client,
        Err(refused) => return Outcome::Refused(refused),
    };
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
            Outcome::Rejected { http_response: capture(response, &Scrubber::new([token])).await, unauthorized }
        }
        Err(_) => Outcome::Unreachable,
    }
}

/// Tries the refresh-token grant described by a credential's public `refresh` config:
/// the report, and the new tokens when it succeeded. The caller writes them back (an
/// authorization server that rotates refresh tokens has just invalidated the stored
/// one: dropping the new one would break the credential).
pub async fn refresh(config: &Value, secrets: &Map<String, Value>, allow_private: bool) -> (Value, Option<Refreshed>) {
    match oauth::refresh_grant(config, secrets, allow_private).await {
        Ok(refreshed) => (json!({ "status": "succeeded", "http_response": null }), Some(refreshed)),
        Err(RefreshFailure::Rejected(http_response)) => {
            (json!({ "status": "failed", "http_response": http_response }), None)
        }
        Err(RefreshFailure::Unreachable) => (json!({ "status": "connect_error", "http_response": null }), None),
        Err(RefreshFailure::Refused(reason)) => {
            tracing::info!(%reason, "validation refresh: token endpoint refused by the egress guard");
            (json!({ "status": "connect_error", "http_response": null }), None)
        }
    }
}
