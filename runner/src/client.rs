//! The runner's side of the environment work protocol, over HTTP like any customer's
//! `EnvironmentWorker`: poll (runner key), ack, heartbeat and stop, then the session's
//! events with the work item's sessions token.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Value, json};

/// An HTTP client bound to one gateway.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
}

/// How a heartbeat went.
pub enum Beat {
    /// Recorded: echo `last_heartbeat` next time; renew within `ttl_seconds`.
    Extended { last_heartbeat: String, ttl_seconds: u64 },
    /// The item is stopping or stopped: wind down.
    Stop,
    /// 412: another worker holds the lease; walk away without stopping the item.
    LeaseLost,
}

impl Api {
    /// A client for the gateway at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str) -> Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .build()
            .context("building the HTTP client")?;
        Ok(Self { http, base: base.trim_end_matches('/').to_owned() })
    }

    fn request(&self, method: reqwest::Method, path: &str, bearer: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(bearer)
            .header("anthropic-beta", "managed-agents-2026-04-01")
            .header("x-stainless-helper", "agentd-runner")
    }

    async fn json(response: reqwest::Response) -> Result<Value> {
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("HTTP {status}: {}", body["error"]["message"].as_str().unwrap_or("(no message)"));
        }
        Ok(body)
    }

    /// Long-polls the cloud work of the runner key's workspace; `None` when empty.
    pub async fn poll(&self, key: &str) -> Result<Option<Value>> {
        let response = self
            .request(reqwest::Method::GET, "/v1/ext/runner/work/poll?block_ms=999", key)
            .timeout(Duration::from_secs(10))
            .send()
            .await?;
        let body = Self::json(response).await?;
        Ok((!body.is_null()).then_some(body))
    }

    /// Acks an offered item.
    pub async fn ack(&self, key: &str, environment: &str, work: &str) -> Result<()> {
        let path = format!("/v1/environments/{environment}/work/{work}/ack");
        Self::json(self.request(reqwest::Method::POST, &path, key).send().await?).await.map(drop)
    }

    /// One heartbeat, echoing `expected` (`NO_HEARTBEAT` first).
    pub async fn heartbeat(&self, token: &str, environment: &str, work: &str, expected: &str) -> Result<Beat> {
        let path = format!("/v1/environments/{environment}/work/{work}/heartbeat");
        let response = self
            .request(reqwest::Method::POST, &path, token)
            .query(&[("expected_last_heartbeat", expected)])
            .timeout(Duration::from_secs(10))
            .send()
            .await?;
        if response.status() == reqwest::StatusCode::PRECONDITION_FAILED {
            return Ok(Beat::LeaseLost);
        }
        let body = Self::json(response).await?;
        if body["state"] == "stopping" || body["state"] == "stopped" || body["lease_extended"] == false {
            return Ok(Beat::Stop);
        }
        Ok(Beat::Extended {
            last_heartbeat: body["last_heartbeat"].as_str().unwrap_or_default().to_owned(),
            ttl_seconds: body["ttl_seconds"].as_u64().unwrap_or(30),
        })
    }

    /// Force-stops an item (a 409 for one already stopped is fine).
    pub async fn stop(&self, token: &str, environment: &str, work: &str) -> Result<()> {
        let path = format!("/v1/environments/{environment}/work/{work}/stop");
        let response = self.request(reqwest::Method::POST, &path, token).json(&json!({ "force": true })).send().await?;
        if response.status() == reqwest::StatusCode::CONFLICT {
            return Ok(());
        }
        Self::json(response).await.map(drop)
    }

    /// Refuses an item these hands cannot serve: the gateway tells the session `reason`
    /// and stops the item (a 409 for one already stopped is fine).
    pub async fn refuse(&self, token: &str, environment: &str, work: &str, reason: &str) -> Result<()> {
        let path = format!("/v1/ext/environments/{environment}/work/{work}/refuse");
        let response =
            self.request(reqwest::Method::POST, &path, token).json(&json!({ "reason": reason })).send().await?;
        if response.status() == reqwest::StatusCode::CONFLICT {
            return Ok(());
        }
        Self::json(response).await.map(drop)
    }

    /// The session object.
    pub async fn session(&self, token: &str, session: &str) -> Result<Value> {
        Self::json(self.request(reqwest::Method::GET, &format!("/v1/sessions/{session}"), token).send().await?).await
    }

    /// The session's sandbox variables — the `environment_variable` credentials of its
    /// vaults, values included — and the sandbox execution policy it pinned (`Null`:
    /// none). Only the work item's sessions token may read them.
    pub async fn sandbox_environment(&self, token: &str, session: &str) -> Result<SandboxEnvironment> {
        let path = format!("/v1/ext/sessions/{session}/sandbox-environment");
        let body = Self::json(self.request(reqwest::Method::GET, &path, token).send().await?).await?;
        let variables = body["variables"].as_array().context("the sandbox environment has no `variables` list")?;
        let variables = variables
            .iter()
            .map(|v| Variable {
                name: v["name"].as_str().unwrap_or_default().to_owned(),
                value: v["value"].as_str().unwrap_or_default().to_owned(),
                credential_id: v["credential_id"].as_str().unwrap_or_default().to_owned(),
                unrestricted: v["networking"]["type"] == "unrestricted",
            })
            .collect();
        Ok(SandboxEnvironment { variables, policy: body["sandbox_policy"].clone() })
    }

    /// An environment (its networking policy).
    pub async fn environment(&self, key: &str, environment: &str) -> Result<Value> {
        let path = format!("/v1/environments/{environment}");
        Self::json(self.request(reqwest::Method::GET, &path, key).send().await?).await
    }

    /// The session's whole committed history, oldest first.
    pub async fn events(&self, token: &str, session: &str) -> Result<Vec<Value>> {
        let mut events = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let mut request = self
                .request(reqwest::Method::GET, &format!("/v1/sessions/{session}/events"), token)
                .query(&[("limit", "1000")]);
            if let Some(page) = &page {
                request = request.query(&[("page", page.as_str())]);
            }
            let body = Self::json(request.send().await?).await?;
            events.extend(body["data"].as_array().cloned().unwrap_or_default());
            match body["next_page"].as_str() {
                Some(next) => page = Some(next.to_owned()),
                None => return Ok(events),
            }
        }
    }

    /// Opens the session's live stream.
    pub async fn stream(&self, token: &str, session: &str) -> Result<reqwest::Response> {
        let response =
            self.request(reqwest::Method::GET, &format!("/v1/sessions/{session}/events/stream"), token).send().await?;
        if !response.status().is_success() {
            bail!("opening the stream: HTTP {}", response.status());
        }
        Ok(response)
    }

    /// Answers one tool call; retried by the caller on transport errors.
    pub async fn answer(
        &self,
        token: &str,
        session: &str,
        tool_use_id: &str,
        output: &crate::tools::ToolOutput,
    ) -> Result<()> {
        let event = json!({
            "type": "user.tool_result",
            "tool_use_id": tool_use_id,
            "is_error": output.is_error,
            "content": output.content,
        });
        let path = format!("/v1/sessions/{session}/events");
        let response =
            self.request(reqwest::Method::POST, &path, token).json(&json!({ "events": [event] })).send().await?;
        Self::json(response).await.map(drop)
    }
}

impl Api {
    /// A GET whose body is bytes (a file, an archive); a non-2xx answer is an error
    /// carrying the API's message.
    async fn bytes_response(&self, token: &str, path: &str) -> Result<reqwest::Response> {
        let response = self.request(reqwest::Method::GET, path, token).send().await?;
        if !response.status().is_success() {
            return Self::json(response).await.map(|_| unreachable!("a non-2xx answer is an error"));
        }
        Ok(response)
    }

    /// Streams a file the session mounts into `dest` (created or truncated).
    pub async fn download_file(
        &self,
        token: &str,
        session: &str,
        file_id: &str,
        dest: &std::path::Path,
    ) -> Result<u64> {
        use tokio::io::AsyncWriteExt;
        let path = format!("/v1/ext/sessions/{session}/files/{file_id}/content");
        let mut response = self.bytes_response(token, &path).await?;
        let mut file = tokio::fs::File::create(dest).await?;
        let mut written = 0u64;
        while let Some(chunk) = response.chunk().await? {
            written += chunk.len() as u64;
            file.write_all(&chunk).await?;
        }
        file.flush().await?;
        Ok(written)
    }

    /// A skill version (`latest` resolves): `BetaSkillVersion`.
    pub async fn skill_version(&self, token: &str, skill_id: &str, version: &str) -> Result<Value> {
        let path = format!("/v1/skills/{skill_id}/versions/{version}");
        Self::json(self.request(reqwest::Method::GET, &path, token).send().await?).await
    }

    /// A skill version's archive (a zip wrapped in one directory named after the skill).
    pub async fn skill_archive(&self, token: &str, skill_id: &str, version: &str) -> Result<bytes::Bytes> {
        let path = format!("/v1/skills/{skill_id}/versions/{version}/content");
        Ok(self.bytes_response(token, &path).await?.bytes().await?)
    }

    /// Uploads a file the session's tools wrote under its outputs directory; it becomes
    /// a file scoped to the session. Streams from disk.
    pub async fn upload_output(
        &self,
        token: &str,
        session: &str,
        name: &str,
        source: &std::path::Path,
    ) -> Result<Value> {
        let file = tokio::fs::File::open(source).await?;
        let length = file.metadata().await?.len();
        let part =
            reqwest::multipart::Part::stream_with_length(reqwest::Body::from(file), length).file_name(name.to_owned());
        let form = reqwest::multipart::Form::new().part("file", part);
        let path = format!("/v1/ext/sessions/{session}/files");
        Self::json(self.request(reqwest::Method::POST, &path, token).multipart(form).send().await?).await
    }
}

/// The `anthropic-beta` of the memory API.
const MEMORY_BETA: &str = "agent-memory-2026-07-22";

/// How the memory API answered a write or a read of one memory.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryAnswer {
    /// Done: the memory as it is now (for a deletion, the deletion's answer).
    Done(Value),
    /// 404: no such memory (or store).
    Missing,
    /// 409 or 412: someone else changed the memory since it was read, or took its path.
    Conflict(String),
    /// Another 4xx (400, 413, …): refused for good, with the API's message.
    Refused(String),
}

impl Api {
    fn memory_request(&self, method: reqwest::Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("anthropic-beta", MEMORY_BETA)
            .header("x-stainless-helper", "agentd-runner")
            .timeout(Duration::from_secs(30))
    }

    /// A memory answer from a response: 2xx, 404, 409/412 and other 4xx are answers; 429,
    /// 5xx and transport failures are errors (try again later).
    async fn memory_answer(response: reqwest::Response) -> Result<MemoryAnswer> {
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let message = || body["error"]["message"].as_str().unwrap_or("(no message)").to_owned();
        Ok(match status.as_u16() {
            200..=299 => MemoryAnswer::Done(body),
            404 => MemoryAnswer::Missing,
            409 | 412 => MemoryAnswer::Conflict(message()),
            429 => bail!("HTTP {status}: {}", message()),
            400..=499 => MemoryAnswer::Refused(format!("HTTP {}: {}", status.as_u16(), message())),
            _ => bail!("HTTP {status}: {}", message()),
        })
    }

    /// One page of a store's memories: `view=full` pages hold at most 20.
    pub async fn memories_page(&self, token: &str, store: &str, query: &[(&str, &str)]) -> Result<Value> {
        let path = format!("/v1/memory_stores/{store}/memories");
        Self::json(self.memory_request(reqwest::Method::GET, &path, token).query(query).send().await?).await
    }

    /// One memory with its content.
    pub async fn memory(&self, token: &str, store: &str, memory: &str) -> Result<MemoryAnswer> {
        let path = format!("/v1/memory_stores/{store}/memories/{memory}");
        let request = self.memory_request(reqwest::Method::GET, &path, token).query(&[("view", "full")]);
        Self::memory_answer(request.send().await?).await
    }

    /// Creates a memory.
    pub async fn create_memory(&self, token: &str, store: &str, path: &str, content: &str) -> Result<MemoryAnswer> {
        let url = format!("/v1/memory_stores/{store}/memories");
        let request =
            self.memory_request(reqwest::Method::POST, &url, token).json(&json!({ "path": path, "content": content }));
        Self::memory_answer(request.send().await?).await
    }

    /// Replaces a memory's content if it still has the digest `expected`.
    pub async fn update_memory(
        &self,
        token: &str,
        store: &str,
        memory: &str,
        content: &str,
        expected: &str,
    ) -> Result<MemoryAnswer> {
        let url = format!("/v1/memory_stores/{store}/memories/{memory}");
        let body = json!({
            "content": content,
            "precondition": { "type": "content_sha256", "content_sha256": expected },
        });
        Self::memory_answer(self.memory_request(reqwest::Method::POST, &url, token).json(&body).send().await?).await
    }

    /// Deletes a memory if it still has the digest `expected`.
    pub async fn delete_memory(&self, token: &str, store: &str, memory: &str, expected: &str) -> Result<MemoryAnswer> {
        let url = format!("/v1/memory_stores/{store}/memories/{memory}");
        let request =
            self.memory_request(reqwest::Method::DELETE, &url, token).query(&[("expected_content_sha256", expected)]);
        Self::memory_answer(request.send().await?).await
    }
}

/// What a session's sandbox gets from the gateway.
pub struct SandboxEnvironment {
    /// Its vault variables.
    pub variables: Vec<Variable>,
    /// The sandbox execution policy the session pinned (`Null`: none).
    pub policy: Value,
}

/// One `environment_variable` credential of a session's vaults.
pub struct Variable {
    /// The variable's name (`auth.secret_name`).
    pub name: String,
    /// The secret. Never logged.
    pub value: String,
    /// The credential it comes from.
    pub credential_id: String,
    /// Whether the credential may be used toward any host (`auth.networking.type`).
    pub unrestricted: bool,
}

impl std::fmt::Debug for Variable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variable").field("name", &self.name).field("credential_id", &self.credential_id).finish()
    }
}

/// The `sessions_token` inside a work item's `secret` (URL-safe base64 JSON).
pub fn sessions_token(secret: &str) -> Result<String> {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let bytes = engine.decode(secret.trim_end_matches('=')).context("secret is not URL-safe base64")?;
    let payload: Value = serde_json::from_slice(&bytes).context("secret is not JSON")?;
    payload["sessions_token"].as_str().map(str::to_owned).context("secret carries no sessions_token")
}
