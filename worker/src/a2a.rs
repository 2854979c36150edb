//! The A2A client behind `a2a_agent` tools (an agentd extension): one tool call sends
//! one message to a remote A2A 1.0 agent over its JSON-RPC binding and waits for the
//! task to end. Wire facts: the A2A 1.0 specification (ProtoJSON payloads,
//! PascalCase methods, `A2A-Version: 1.0`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use agentd_schema::egress;

use crate::credentials::Bearer;

/// How long a call may wait for the remote task to end.
const TASK_TIMEOUT: Duration = Duration::from_secs(300);
/// One HTTP request's limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The outcome of a call, as the model will read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The text of the task's artifacts (or its status message).
    pub text: String,
    /// The task failed, was rejected or canceled, or the call did not complete.
    pub is_error: bool,
}

impl Answer {
    fn error(text: impl Into<String>) -> Self {
        Self { text: text.into(), is_error: true }
    }
}

/// The remote `contextId` for `tool` in `session_id`: derived rather than remembered,
/// so every call of the session's conversation with that agent (on any worker, after
/// any crash) continues the same remote context with nothing extra to store.
pub fn context_id(session_id: &str, tool: &str, url: &str) -> String {
    let digest = Sha256::digest(format!("agentd-a2a\n{session_id}\n{tool}\n{url}").as_bytes());
    format!("agentd-{}", hex::encode(&digest[..16]))
}

struct Client {
    http: reqwest::Client,
    bearer: Option<Bearer>,
}

impl Client {
    /// A client for `url` after the egress guard: no redirects, no proxy, and the
    /// connection pinned to the address just checked.
    async fn to(url: &str, bearer: Option<Bearer>, allow_private: bool) -> Result<Self, String> {
        let rules = egress::Rules { allow_private, https_only: false };
        let target = egress::check(url, rules).await.map_err(|refused| refused.to_string())?;
        let http = target
            .pin(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()))
            .build()
            .map_err(|error| format!("A2A client: {error}"))?;
        Ok(Self { http, bearer })
    }

    fn request(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let builder = builder.header("A2A-Version", "1.0").timeout(REQUEST_TIMEOUT);
        match self.bearer.as_ref().filter(|b| !b.token.is_empty()) {
            Some(bearer) => builder.bearer_auth(&bearer.token),
            None => builder,
        }
    }

    fn scrubber(&self) -> agentd_schema::scrub::Scrubber {
        self.bearer.as_ref().map(Bearer::scrubber).unwrap_or_default()
    }

    /// One JSON-RPC call; the `result`, or an error message.
    async fn rpc(&self, endpoint: &str, method: &str, params: Value) -> Result<Value, String> {
        let body =
            json!({ "jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": method, "params": params });
        let response = self
            .request(self.http.post(endpoint))
            .header("accept", "application/json")
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("{method} to {endpoint} failed: {}", without_url(&e)))?;
        // A body that is not a JSON-RPC answer is never copied into the result: the URL
        // may be aimed at an internal service, and its response is not the model's to read.
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{method} to {endpoint}: HTTP {}", status.as_u16()));
        }
        let text = response.text().await.unwrap_or_default();
        let reply: Value =
            serde_json::from_str(&text).map_err(|_| format!("{method} to {endpoint}: the answer is not JSON"))?;
        if let Some(error) = reply.get("error") {
            return Err(format!(
                "{method}: error {}: {}",
                error["code"],
                // Scrubbed before truncating: a cut spelling would no longer be recognised.
                truncate(&self.scrubber().scrub(error["message"].as_str().unwrap_or_default()))
            ));
        }
        Ok(reply["result"].clone())
    }
}

fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "");
    }
    text
}

fn truncate(text: &str) -> String {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Sends `message` to the agent at `url` in the remote context `context_id` and waits
/// for its task to end. Never retried: `SendMessage` is not idempotent.
/// The card and the endpoint it names both pass the egress guard (private addresses
/// only when `allow_private`), and each connection is pinned to its checked address.
pub async fn call(url: &str, bearer: Option<Bearer>, context_id: &str, message: &str, allow_private: bool) -> Answer {
    // Everything in the answer came from the remote agent (or its errors): never with
    // the token we sent it, however it was spelled back.
    let scrubber = bearer.as_ref().map(Bearer::scrubber).unwrap_or_default();
    let answer = exchange(url, bearer, context_id, message, allow_private).await;
    Answer { text: scrubber.scrub(&answer.text), is_error: answer.is_error }
}

async fn exchange(url: &str, bearer: Option<Bearer>, context_id: &str, message: &str, allow_private: bool) -> Answer {
    let card_url = match card_url(url) {
        Ok(card_url) => card_url,
        Err(error) => return Answer::error(error),
    };
    let card_client = match Client::to(&card_url, bearer.clone(), allow_private).await {
        Ok(client) => client,
        Err(error) => return Answer::error(error),
    };
    let endpoint = match endpoint(&card_client, &card_url).await {
        Ok(endpoint) => endpoint,
        Err(error) => return Answer::error(error),
    };
    // The endpoint comes from the card; the credential stays bound to the card's origin.
    if bearer.is_some() && crate::credentials::origin(&endpoint) != crate::credentials::origin(url) {
        return Answer::error(format!(
            "the agent card at {url} points to {endpoint}, another origin: the credential is not sent there"
        ));
    }
    let client = match Client::to(&endpoint, bearer, allow_private).await {
        Ok(client) => client,
        Err(error) => return Answer::error(format!("the JSON-RPC endpoint the agent card names: {error}")),
    };
    let params = json!({
        "message": {
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{ "text": message }],
            "contextId": context_id,
        },
        "configuration": { "acceptedOutputModes": ["text/plain"] },
    });
    let result = match client.rpc(&endpoint, "SendMessage", params).await {
        Ok(result) => result,
        Err(error) => return Answer::error(error),
    };
    if let Some(message) = result.get("message") {
        return Answer { text: parts_text(&message["parts"]), is_error: false };
    }
    let mut task = result.get("task").cloned().unwrap_or(result);
    let started = Instant::now();
    let mut pause = Duration::from_millis(200);
    loop {
        let state = task["status"]["state"].as_str().unwrap_or_default();
        if is_settled(state) {
            return answer(&task);
        }
        if started.elapsed() > TASK_TIMEOUT {
            return Answer::error(format!(
                "the remote task did not end within {} s (last state {state})",
                TASK_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
        let id = task["id"].as_str().unwrap_or_default().to_owned();
        match client.rpc(&endpoint, "GetTask", json!({ "id": id })).await {
            Ok(latest) => task = latest,
            Err(error) => return Answer::error(error),
        }
    }
}

/// The JSON-RPC endpoint of the agent's card: the `JSONRPC` interface of protocol 1.0.
async fn endpoint(client: &Client, card_url: &str) -> Result<String, String> {
    let response = client
        .request(client.http.get(card_url))
        .send()
        .await
        .map_err(|e| format!("the agent card at {card_url} could not be fetched: {}", without_url(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the agent card at {card_url}: HTTP {}", status.as_u16()));
    }
    let card: Value = response.json().await.map_err(|_| format!("the agent card at {card_url} is not JSON"))?;
    card["supportedInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["protocolBinding"] == "JSONRPC" && i["protocolVersion"] == "1.0")
        .and_then(|i| i["url"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("the agent card at {card_url} lists no JSONRPC interface of protocol version 1.0"))
}

/// The agent card's URL under the agent's base `url`: the well-known path joined to the
/// URL's path (a query or fragment in `url` cannot swallow it).
fn card_url(url: &str) -> Result<String, String> {
    let mut card = reqwest::Url::parse(url).map_err(|e| format!("the a2a_agent url is not valid ({e})"))?;
    let path = format!("{}/.well-known/agent-card.json", card.path().trim_end_matches('/'));
    card.set_path(&path);
    card.set_fragment(None);
    Ok(card.to_string())
}

/// Terminal or interrupted: the call ends here.
fn is_settled(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
    )
}

fn parts_text(parts: &Value) -> String {
    parts
        .as_array()
        .into_iter()
        .flatten()
        .map(|part| match part.get("text").and_then(Value::as_str) {
            Some(text) => text.to_owned(),
            None => part.get("data").map(Value::to_string).unwrap_or_default(),
        })
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answer of a settled task.
fn answer(task: &Value) -> Answer {
    let state = task["status"]["state"].as_str().unwrap_or_default();
    let artifacts: Vec<String> = task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| parts_text(&a["parts"]))
        .filter(|t| !t.is_empty())
        .collect();
    let status_text = parts_text(&task["status"]["message"]["parts"]);
    let mut text = if artifacts.is_empty() { status_text } else { artifacts.join("\n") };
    let is_error = matches!(state, "TASK_STATE_FAILED" | "TASK_STATE_CANCELED" | "TASK_STATE_REJECTED");
    if is_error || state.ends_with("_REQUIRED") {
        let label = state.trim_start_matches("TASK_STATE_").to_lowercase().replace('_', " ");
        text = if text.is_empty() { format!("the remote task ended: {label}") } else { format!("({label}) {text}") };
    }
    if text.is_empty() {
        text = "(the remote agent returned no text)".into();
    }
    Answer { text, is_error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_from_artifacts_then_the_status_message() {
        let done = json!({ "status": { "state": "TASK_STATE_COMPLETED" },
                           "artifacts": [{ "artifactId": "a", "parts": [{ "text": "echo: hi" }] }] });
        assert_eq!(answer(&done), Answer { text: "echo: hi".into(), is_error: false });
        let failed = json!({ "status": { "state": "TASK_STATE_FAILED",
                             "message": { "role": "ROLE_AGENT", "parts": [{ "text": "boom" }] } } });
        assert_eq!(answer(&failed), Answer { text: "(failed) boom".into(), is_error: true });
        assert!(is_settled("TASK_STATE_INPUT_REQUIRED") && !is_settled("TASK_STATE_WORKING"));
    }

    #[test]
    fn the_card_url_joins_the_path_whatever_follows_it() {
        assert_eq!(card_url("http://h:1/a/").unwrap(), "http://h:1/a/.well-known/agent-card.json");
        assert_eq!(card_url("http://h:1").unwrap(), "http://h:1/.well-known/agent-card.json");
        assert_eq!(card_url("http://h/a?k=v").unwrap(), "http://h/a/.well-known/agent-card.json?k=v");
        assert_eq!(card_url("http://h/a#frag").unwrap(), "http://h/a/.well-known/agent-card.json");
        assert_eq!(card_url("http://h/a?#").unwrap(), "http://h/a/.well-known/agent-card.json?");
    }

    fn crypto() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    #[tokio::test]
    async fn private_targets_are_refused_unless_allowed() {
        crypto();
        let answer = call("http://127.0.0.1:9/agent", None, "ctx", "hi", false).await;
        assert!(answer.is_error);
        assert_eq!(answer.text, egress::NOT_PUBLIC);
        // Allowed, the call goes on to fetch the card (nothing listens on port 9).
        let answer = call("http://127.0.0.1:9/agent", None, "ctx", "hi", true).await;
        assert!(answer.is_error && answer.text.contains("could not be fetched"), "{}", answer.text);
    }

    #[tokio::test]
    async fn remote_bodies_are_not_copied_into_results() {
        crypto();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let card = json!({ "supportedInterfaces": [{ "url": format!("http://127.0.0.1:{port}/rpc"),
                           "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }] })
        .to_string();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                // Read the whole request (headers, then content-length bytes) before answering.
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                let request = loop {
                    let read = socket.read(&mut chunk).await.unwrap();
                    buffer.extend_from_slice(&chunk[..read]);
                    let text = String::from_utf8_lossy(&buffer).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if buffer.len() >= end + 4 + length || read == 0 {
                            break text;
                        }
                    } else if read == 0 {
                        break text;
                    }
                };
                let (status, body) = if request.starts_with("GET") {
                    ("200 OK", card.clone())
                } else {
                    ("500 Internal Server Error", "SECRET internal metadata".to_owned())
                };
                let reply =
                    format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                socket.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        let answer = call(&format!("http://127.0.0.1:{port}"), None, "ctx", "hi", true).await;
        assert!(answer.is_error && answer.text.contains("HTTP 500"), "{}", answer.text);
        assert!(!answer.text.contains("SECRET"), "{}", answer.text);
    }

    /// Serves an A2A agent on 127.0.0.1 that echoes the bearer token it received in
    /// every encoding: in a JSON-RPC error when the message is "fail", else in the
    /// completed task's artifact.
    async fn echoing_agent() -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let card = json!({ "supportedInterfaces": [{ "url": format!("http://127.0.0.1:{port}/rpc"),
                           "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }] })
        .to_string();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                let request = loop {
                    let read = socket.read(&mut chunk).await.unwrap();
                    buffer.extend_from_slice(&chunk[..read]);
                    let text = String::from_utf8_lossy(&buffer).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if buffer.len() >= end + 4 + length || read == 0 {
                            break text;
                        }
                    } else if read == 0 {
                        break text;
                    }
                };
                let token = request
                    .lines()
                    .find_map(|l| l.strip_prefix("authorization: Bearer ").map(str::to_owned))
                    .unwrap_or_default();
                let echoed = agentd_schema::scrub::encodings(&token).join(" | ");
                let body = if request.starts_with("GET") {
                    card.clone()
                } else if request.contains("\"fail\"") {
                    json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -32000, "message": format!("bad {echoed}") } })
                        .to_string()
                } else {
                    json!({ "jsonrpc": "2.0", "id": 1, "result": { "task": { "id": "t", "status": { "state": "TASK_STATE_COMPLETED" },
                        "artifacts": [{ "artifactId": "a", "parts": [{ "text": format!("you sent {echoed}") }] }] } } })
                    .to_string()
                };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        port
    }

    #[tokio::test]
    async fn the_bearer_token_never_comes_back_in_any_encoding() {
        crypto();
        let port = echoing_agent().await;
        let token = "tok/en+with spaces&\"quotes\"~";
        let bearer = || {
            Some(Bearer {
                token: token.into(),
                credential_id: "vcrd_1".into(),
                vault_id: "vlt_1".into(),
                refreshable: false,
            })
        };
        let url = format!("http://127.0.0.1:{port}");
        for message in ["fail", "ok"] {
            let answer = call(&url, bearer(), "ctx", message, true).await;
            assert!(answer.text.contains("[redacted]"), "{message}: {}", answer.text);
            for encoded in agentd_schema::scrub::encodings(token) {
                assert!(!answer.text.contains(&encoded), "{message}: {encoded:?} in {}", answer.text);
            }
        }
    }

    #[test]
    fn context_ids_are_stable_per_session_and_tool() {
        let a = context_id("sesn_1", "helper", "http://h/a");
        assert_eq!(a, context_id("sesn_1", "helper", "http://h/a"));
        assert_ne!(a, context_id("sesn_2", "helper", "http://h/a"));
        assert_ne!(a, context_id("sesn_1", "other", "http://h/a"));
    }
}
