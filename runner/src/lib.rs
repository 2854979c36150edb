//! `agentd runner`: the hands of `cloud` environments. Polls work items over the
//! self-hosted environment work protocol, runs each session's built-in tool calls in a
//! per-session sandbox, and answers them over the same HTTP API a customer's
//! `EnvironmentWorker` uses (results as `user.tool_result`, which the gateway commits as
//! `agent.tool_result` for a cloud environment's hands).
//!
//! Per work item: ack, heartbeat at a third of the TTL (412 → walk away), read the
//! session's history once and then follow its live stream, run allowed calls one at a
//! time, and stop the item once the session has been idle (not awaiting anything) for
//! `idle_stop`. A runner that is stopped abandons its items: their leases expire and
//! another runner gets them (an item is never stopped with calls still open); it kills
//! every sandbox's processes first. A session that is deleted, terminated or archived
//! loses its sandbox: processes, workdir and all.
//!
//! The sandbox shell's environment carries the session's vault `environment_variable`
//! credentials, read with the item's sessions token (`GET
//! /v1/ext/sessions/{id}/sandbox-environment`); a credential whose `networking` is
//! `limited` is injected only into a sandbox without network, since the runner cannot
//! confine a value the shell holds to `allowed_hosts`.

pub mod client;
pub mod egress;
pub mod memory;
pub mod mounts;
pub mod policy;
pub mod sandbox;
pub mod tools;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use client::{Api, Beat};
use sandbox::{Networking, Sandbox, SandboxConfig, SecretEnv};

/// Runner settings.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The gateway, e.g. `http://127.0.0.1:8080`.
    pub gateway_url: String,
    /// A runner key (`agentd keys create --runner`).
    pub key: String,
    /// Sandboxes (root, isolation, limits, uids); networking comes from each environment,
    /// variables from each session's vaults.
    pub sandbox: SandboxConfig,
    /// Sessions served at once.
    pub max_sessions: usize,
    /// How long a session may sit idle before its work item is stopped.
    pub idle_stop: Duration,
}

/// Polls and serves work until `stop` fires.
pub async fn run(config: RunnerConfig, stop: CancellationToken) -> Result<()> {
    let api = Api::new(&config.gateway_url)?;
    let config = Arc::new(config);
    let permits = Arc::new(Semaphore::new(config.max_sessions));
    let sessions = Arc::new(Sessions::default());
    tokio::spawn(sweep(api.clone(), config.clone(), sessions.clone(), stop.clone()));
    tracing::info!(gateway = %config.gateway_url, "runner polling cloud work");
    let mut backoff = Duration::from_millis(500);
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else { return Ok(()) };
        let polled = tokio::select! {
            () = stop.cancelled() => break,
            polled = api.poll(&config.key) => polled,
        };
        let item = match polled {
            Ok(Some(item)) => item,
            Ok(None) => continue,
            Err(error) => {
                tracing::warn!(%error, "runner poll failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        backoff = Duration::from_millis(500);
        let (api, config, stop, sessions) = (api.clone(), config.clone(), stop.clone(), sessions.clone());
        tokio::spawn(async move {
            let work = item["id"].as_str().unwrap_or_default().to_owned();
            let session = item["data"]["id"].as_str().unwrap_or_default().to_owned();
            sessions.enter(&session);
            if let Err(error) = serve(&api, &config, &item, stop).await {
                tracing::warn!(%work, %error, "work item ended with an error");
            }
            sessions.leave(&session);
            drop(permit);
        });
    }
    // Every item sees the stop and closes its sandbox, killing what runs there; wait for
    // that (a bounded time) so no process outlives the runner.
    let all = u32::try_from(config.max_sessions).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(10), permits.acquire_many(all)).await;
    Ok(())
}

/// The sessions this runner has served: those with an item open now, and those whose
/// workdir stayed behind when their item stopped, to remove if they go away.
#[derive(Default)]
struct Sessions {
    state: std::sync::Mutex<SessionsState>,
}

#[derive(Default)]
struct SessionsState {
    /// Items open per session.
    open: std::collections::HashMap<String, usize>,
    /// Sessions whose last item ended, and when; oldest checked first.
    left: std::collections::VecDeque<(String, tokio::time::Instant)>,
}

/// How long after its last item a session's workdir is still watched for removal; a
/// session deleted later keeps its workdir until an operator clears it.
const SWEEP_HORIZON: Duration = Duration::from_secs(3600);
/// Sessions checked per sweep, so a runner that served many stays far below the read limit.
const SWEEP_BATCH: usize = 8;

impl Sessions {
    fn enter(&self, session: &str) {
        if let Ok(mut state) = self.state.lock() {
            *state.open.entry(session.to_owned()).or_default() += 1;
            state.left.retain(|(s, _)| s != session);
        }
    }

    fn leave(&self, session: &str) {
        if let Ok(mut state) = self.state.lock() {
            let open = state.open.get_mut(session).map(|n| {
                *n -= 1;
                *n
            });
            if open == Some(0) {
                state.open.remove(session);
                state.left.push_back((session.to_owned(), tokio::time::Instant::now()));
            }
        }
    }

    /// The next few sessions to check (taken off the list; [`Sessions::keep`] puts one back).
    fn next_batch(&self) -> Vec<(String, tokio::time::Instant)> {
        let Ok(mut state) = self.state.lock() else { return Vec::new() };
        state.left.retain(|(_, since)| since.elapsed() < SWEEP_HORIZON);
        let take = state.left.len().min(SWEEP_BATCH);
        state.left.drain(..take).collect()
    }

    /// Puts a session that still exists back at the end of the list.
    fn keep(&self, session: String, since: tokio::time::Instant) {
        if let Ok(mut state) = self.state.lock()
            && !state.open.contains_key(&session)
        {
            state.left.push_back((session, since));
        }
    }
}

/// Removes the workdirs of served sessions that were deleted or archived after their item
/// stopped (no item will come to tell), a few sessions every `idle_stop` (at least 10 s).
async fn sweep(api: Api, config: Arc<RunnerConfig>, sessions: Arc<Sessions>, stop: CancellationToken) {
    let every = config.idle_stop.max(Duration::from_secs(10));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        for (session, since) in sessions.next_batch() {
            if !gone_or_archived(&api, &config.key, &session).await {
                sessions.keep(session, since);
                continue;
            }
            let root = config.sandbox.root.clone();
            let id = session.clone();
            match tokio::task::spawn_blocking(move || sandbox::remove_workdir(&root, &id)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%session, %error, "cannot remove the workdir of a session that ended"),
                Err(error) => tracing::warn!(%session, %error, "removing a workdir failed internally"),
            }
        }
    }
}

/// Serves one work item to its end.
async fn serve(api: &Api, config: &RunnerConfig, item: &Value, stop: CancellationToken) -> Result<()> {
    let work = item["id"].as_str().unwrap_or_default();
    let environment = item["environment_id"].as_str().unwrap_or_default();
    let session = item["data"]["id"].as_str().unwrap_or_default();
    let token = client::sessions_token(item["secret"].as_str().unwrap_or_default())?;
    // The session's pinned sandbox execution policy, before the item is taken: hands that
    // cannot meet it refuse the item (the session is told why) rather than run weaker.
    let given = api.sandbox_environment(&token, session).await;
    let applied = match &given {
        Ok(given) => match policy::apply(&given.policy, &config.sandbox, policy::Host::current()) {
            Ok(applied) => Some(applied),
            Err(refused) => {
                tracing::warn!(%work, %session, reason = %refused, "refusing the work item: its sandbox execution policy cannot be met");
                return api.refuse(&token, environment, work, &refused).await;
            }
        },
        Err(_) => None,
    };
    api.ack(&config.key, environment, work).await?;
    let lease = CancellationToken::new();
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let heartbeat = tokio::spawn(heartbeats(
        api.clone(),
        token.clone(),
        environment.into(),
        work.into(),
        lease.clone(),
        lost.clone(),
    ));
    let span = tracing::info_span!("work", %work, %session);
    let outcome = tracing::Instrument::instrument(
        tools_loop(api, config, Item { token: &token, environment, session }, (given, applied), &lease, &stop),
        span,
    )
    .await;
    lease.cancel();
    let _ = heartbeat.await;
    let lease_lost = lost.load(std::sync::atomic::Ordering::Relaxed);
    match outcome {
        // Done serving: stop the item unless the lease was lost or the runner is stopping
        // (then the lease expires and the item is offered to another runner).
        Ok(()) if !lease_lost && !stop.is_cancelled() => api.stop(&token, environment, work).await,
        Ok(()) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Renews the lease until `lease` is cancelled; cancels it on 412 or a stop request.
async fn heartbeats(
    api: Api,
    token: String,
    environment: String,
    work: String,
    lease: CancellationToken,
    lost: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut expected = "NO_HEARTBEAT".to_owned();
    let mut interval = Duration::from_secs(10);
    loop {
        match api.heartbeat(&token, &environment, &work, &expected).await {
            Ok(Beat::Extended { last_heartbeat, ttl_seconds }) => {
                expected = last_heartbeat;
                interval = Duration::from_millis((ttl_seconds * 1000 / 3).max(500));
            }
            Ok(Beat::Stop) => return lease.cancel(),
            Ok(Beat::LeaseLost) => {
                tracing::warn!(%work, "lease lost to another worker; abandoning the item");
                lost.store(true, std::sync::atomic::Ordering::Relaxed);
                return lease.cancel();
            }
            Err(error) => tracing::warn!(%work, %error, "heartbeat failed; retrying"),
        }
        tokio::select! {
            () = lease.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// What the session's history says about its built-in calls.
#[derive(Default)]
struct Calls {
    /// Calls in commit order: id → (name, input, evaluated permission).
    uses: Vec<(String, String, Value, String)>,
    answered: HashSet<String>,
    allowed: HashSet<String>,
    /// The session ended or idles awaiting nothing.
    idle: bool,
    terminated: bool,
}

impl Calls {
    fn see(&mut self, event: &Value) {
        let id = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
        match event["type"].as_str().unwrap_or_default() {
            "agent.tool_use" => {
                self.idle = false;
                let permission = event["evaluated_permission"].as_str().unwrap_or("allow").to_owned();
                let name = event["name"].as_str().unwrap_or_default().to_owned();
                // A call of a tool this sandbox does not provide belongs to another
                // executor (the worker's `a2a_agent` tools): leave it to its owner, as the
                // SDK's EnvironmentWorker does.
                if tools::TOOL_NAMES.contains(&name.as_str()) {
                    self.uses.push((id("id"), name, event["input"].clone(), permission));
                }
            }
            "agent.tool_result" | "user.tool_result" => {
                self.answered.insert(id("tool_use_id"));
            }
            "user.tool_confirmation" if event["result"] == "allow" => {
                self.allowed.insert(id("tool_use_id"));
            }
            "user.tool_confirmation" => {
                self.answered.insert(id("tool_use_id"));
            }
            "session.status_idle" => self.idle = event["stop_reason"]["type"] != "requires_action",
            "session.status_running" | "user.message" => self.idle = false,
            "session.status_terminated" | "session.deleted" => self.terminated = true,
            _ => {}
        }
    }

    /// The next call to run: allowed (or confirmed) and not answered.
    fn next(&self) -> Option<(String, String, Value)> {
        self.uses
            .iter()
            .find(|(id, _, _, permission)| {
                !self.answered.contains(id) && (permission == "allow" || self.allowed.contains(id))
            })
            .map(|(id, name, input, _)| (id.clone(), name.clone(), input.clone()))
    }
}

/// The session's sandbox variables and policy as read before the ack, and the runner's
/// sandbox settings with that policy applied (`None` when they could not be read).
type Given = (Result<client::SandboxEnvironment>, Option<SandboxConfig>);

/// The work item being served: its sessions token, environment and session.
struct Item<'a> {
    token: &'a str,
    environment: &'a str,
    session: &'a str,
}

async fn tools_loop(
    api: &Api,
    config: &RunnerConfig,
    Item { token, environment, session }: Item<'_>,
    (given, applied): Given,
    lease: &CancellationToken,
    stop: &CancellationToken,
) -> Result<()> {
    let networking = networking_of(&api.environment(&config.key, environment).await?);
    // The session says what its sandbox mounts (its memory stores: which ones are writable).
    let body = api.session(token, session).await;
    // Without its variables the session's tools would run in a different environment than
    // configured: every call then fails, saying why.
    let mut sandbox: Result<Sandbox, String> = match (&body, given, applied) {
        (Ok(body), Ok(given), Some(applied)) => {
            let environment = sandbox_variables(given.variables, &networking);
            let mounts = memory::mounts_of(body);
            let sandbox_config = SandboxConfig { networking, environment, mounts, ..applied };
            let session = session.to_owned();
            tokio::task::spawn_blocking(move || Sandbox::open(&sandbox_config, &session))
                .await?
                .map_err(|error| error.to_string())
        }
        (Err(error), _, _) => Err(format!("the session cannot be read: {error}")),
        (_, Err(error), _) => Err(format!("the session's vault variables cannot be read: {error}")),
        (_, Ok(_), None) => Err("the session's sandbox execution policy cannot be read".to_owned()),
    };
    // The session's files, skills and memory stores under /mnt, before any of its tools runs.
    let mut mounts = None;
    if let (Ok(opened), Ok(body)) = (&sandbox, &body) {
        let (workdir, owner) = (opened.workdir(), opened.owner());
        let placed = match mounts::Mounts::prepare(api, token, body, workdir, owner).await {
            Ok(placed) => memory::MemoryMounts::prepare(api, token, body, &workdir.join(mounts::MNT), owner)
                .await
                .map(|memory| (placed, memory)),
            Err(error) => Err(error),
        };
        match placed {
            Ok(placed) => mounts = Some(placed),
            Err(error) => {
                tracing::warn!(error = format!("{error:#}"), "the session's files, skills and memory cannot be placed");
                sandbox = Err(format!("the session's files, skills and memory stores cannot be placed: {error:#}"));
            }
        }
    }
    // Stream first, then reconcile from history, so nothing falls between the two.
    let mut stream = api.stream(token, session).await?.bytes_stream();
    let mut calls = Calls::default();
    for event in api.events(token, session).await? {
        calls.see(&event);
    }
    let mut buffer = String::new();
    let mut idle_since = tokio::time::Instant::now();
    let mut checked = tokio::time::Instant::now();
    loop {
        while let Some((id, name, input)) = calls.next() {
            if lease.is_cancelled() || stop.is_cancelled() {
                return Ok(());
            }
            let mut output = match &mut sandbox {
                Ok(sandbox) => sandbox.call(&name, &input).await,
                Err(why) => tools::ToolOutput::error(format!("the sandbox for this environment is unavailable: {why}")),
            };
            // What the call wrote under /mnt/session/outputs/ becomes the session's files,
            // and what it changed in its memory stores is written back, before the result
            // is posted: the agent's next turn can name the files, and learns in this
            // result what its memory did not take.
            if let Some((mounts, memory)) = &mut mounts {
                mounts.collect_outputs(api, token, session).await;
                let reports = memory.sync(api, token).await;
                if !reports.is_empty() {
                    tracing::info!(reports = reports.len(), "memory changes not (all) saved; told the agent");
                    output.is_error = true;
                    let text = format!("Memory sync:\n- {}", reports.join("\n- "));
                    output.content.push(tools::text_block(text));
                }
            }
            answer(api, token, session, &id, &output).await?;
            calls.answered.insert(id);
        }
        // Archiving commits no event: look at the session now and then.
        if !calls.terminated && checked.elapsed() >= ARCHIVE_CHECK {
            checked = tokio::time::Instant::now();
            calls.terminated = gone_or_archived(api, token, session).await;
        }
        if calls.terminated {
            if let Ok(sandbox) = sandbox
                && let Err(error) = sandbox.discard().await
            {
                tracing::warn!(%error, "cannot remove the workdir of a session that ended");
            }
            return Ok(());
        }
        if !calls.idle {
            idle_since = tokio::time::Instant::now();
        } else if idle_since.elapsed() >= config.idle_stop {
            break;
        }
        let chunk = tokio::select! {
            () = lease.cancelled() => break,
            () = stop.cancelled() => break,
            chunk = tokio::time::timeout(Duration::from_secs(1), stream.next()) => chunk,
        };
        match chunk {
            Err(_) => {}
            Ok(Some(Ok(bytes))) => {
                buffer.push_str(&String::from_utf8_lossy(&bytes));
                while let Some(end) = buffer.find("\n\n") {
                    let frame: String = buffer.drain(..end + 2).collect();
                    for line in frame.lines() {
                        if let Some(data) = line.strip_prefix("data:")
                            && let Ok(event) = serde_json::from_str::<Value>(data.trim())
                        {
                            calls.see(&event);
                        }
                    }
                }
            }
            // The stream ended: reconnect and reconcile again.
            Ok(_) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                stream = api.stream(token, session).await?.bytes_stream();
                buffer.clear();
                let answered = std::mem::take(&mut calls.answered);
                calls = Calls { answered, ..Calls::default() };
                for event in api.events(token, session).await? {
                    calls.see(&event);
                }
            }
        }
    }
    if let Ok(sandbox) = &mut sandbox {
        sandbox.close().await;
    }
    Ok(())
}

/// How often an open item checks whether its session was archived (between calls).
const ARCHIVE_CHECK: Duration = Duration::from_secs(10);

/// Whether the session is gone (404) or archived; a failed check is neither.
async fn gone_or_archived(api: &Api, token: &str, session: &str) -> bool {
    match api.session(token, session).await {
        Ok(body) => !body["archived_at"].is_null(),
        Err(error) => error.to_string().starts_with("HTTP 404"),
    }
}

/// The variables a sandbox gets: every `unrestricted` credential, and `limited` ones only
/// when the sandbox has no network at all. Names the sandbox sets itself are refused.
fn sandbox_variables(variables: Vec<client::Variable>, networking: &Networking) -> SecretEnv {
    let mut chosen: Vec<(String, String)> = Vec::new();
    for variable in variables {
        let why_not = if sandbox::RESERVED_VARIABLES.contains(&variable.name.as_str()) {
            Some("the sandbox sets this variable itself")
        } else if chosen.iter().any(|(name, _)| *name == variable.name) {
            Some("an earlier credential of the session's vaults has the same name")
        } else if !variable.unrestricted && !networking.is_cut_off() {
            Some("its networking is limited, and the sandbox cannot confine a value it holds to allowed_hosts")
        } else {
            None
        };
        match why_not {
            Some(reason) => tracing::warn!(
                credential = %variable.credential_id, name = %variable.name, reason,
                "a vault environment_variable credential is not injected into the sandbox"
            ),
            None => chosen.push((variable.name, variable.value)),
        }
    }
    SecretEnv(chosen)
}

/// Posts a result, retrying transport failures for a while (duplicates are idempotent).
async fn answer(api: &Api, token: &str, session: &str, id: &str, output: &tools::ToolOutput) -> Result<()> {
    let mut delay = Duration::from_millis(200);
    for attempt in 0.. {
        match api.answer(token, session, id, output).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < 8 => {
                tracing::warn!(%error, tool_use_id = %id, "posting a tool result failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The sandbox networking policy of an environment body.
fn networking_of(environment: &Value) -> Networking {
    let networking = &environment["config"]["networking"];
    if networking["type"] == "limited" {
        let hosts = networking["allowed_hosts"].as_array().into_iter().flatten();
        Networking::Limited {
            allowed_hosts: hosts.filter_map(|h| h.as_str().map(str::to_owned)).collect(),
            allow_package_managers: networking["allow_package_managers"] == true,
        }
    } else {
        Networking::Unrestricted
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Calls;

    #[test]
    fn calls_of_tools_the_sandbox_lacks_are_left_to_their_owner() {
        let mut calls = Calls::default();
        calls.see(&json!({ "type": "agent.tool_use", "id": "t1", "name": "ask_agent", "input": {}, "evaluated_permission": "allow" }));
        assert_eq!(calls.next(), None, "an a2a_agent call is the worker's");
        calls.see(&json!({ "type": "agent.tool_use", "id": "t2", "name": "bash", "input": {}, "evaluated_permission": "allow" }));
        assert_eq!(calls.next().map(|(id, name, _)| (id, name)), Some(("t2".into(), "bash".into())));
    }
}
