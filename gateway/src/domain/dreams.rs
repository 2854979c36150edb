//! Dreams (docs/api/dreams.md, ADR 0016): a dream reads a memory store and the
//! committed transcripts of some sessions and writes a reorganized store. It runs as a
//! session of its own — the built-in dream agent with one worker-run `memory` tool — so
//! it has the queue, fencing, retry budget, streaming and crash recovery of any turn.
//!
//! Lifecycle, each step a compare-and-swap in the store (`DreamStore`):
//! `pending` (the row is written) → `running` ([`start`]: the output store and the
//! session are created with ids derived from the dream's, the store copied, the first
//! message submitted, then `session_id` and `outputs` recorded) → `completed | failed |
//! canceled` ([`settle`]: decided from the session's committed idle, or [`cancel`]).
//! Every step of a start is idempotent, so a gateway that dies mid-start leaves a dream
//! that the next one starts from where it stopped. The [`spawn_reconciler`] task of every
//! gateway starts pending dreams, settles running ones and runs the dream policies'
//! scheduler ([`schedule`]); reads settle lazily too.

use std::time::Duration;

use agentd_schema::ids::derived_id;
use agentd_schema::store::{
    DreamEnd, DreamPolicyRow, DreamQuery, DreamRow, DreamStatus, MemoryActor, MemoryContent, MemoryListItem,
    MemoryQuery, MemoryWrite, NewDream, NewMemory, NewMemoryStore, ScheduleOutcome,
};
use agentd_schema::{EventQuery, EventType, NewEvent, NewSession, Session, StopReason, StoreError};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::commit;
use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::managed::query::now_ms;

/// The most sessions one dream reads.
pub const MAX_DREAM_SESSIONS: usize = 100;
/// A dream's `instructions`, in characters.
pub const MAX_INSTRUCTIONS_CHARS: usize = 4096;
/// A model id, in characters.
pub const MAX_MODEL_ID_CHARS: usize = 256;
/// The shortest interval of a dream policy (unless the tests-only setting lowers it).
pub const MIN_POLICY_INTERVAL_SECS: i64 = 60;
/// Tests only: lowers [`MIN_POLICY_INTERVAL_SECS`] and the reconciler's tick.
pub const TEST_MIN_INTERVAL_ENV: &str = "AGENTD_TEST_DREAM_MIN_INTERVAL_SECS";
/// The id the dream agent's snapshot carries. No agent resource has it, so input
/// admission refuses new turns on a dream's session (only the dream service starts one).
pub const DREAM_AGENT_ID: &str = "agentd_builtin_dream_agent";
/// The name of the dream agent's memory tool. The snapshot lists it as a `custom` tool
/// (the wire's shape); the worker runs it itself in a session marked `_dream`.
pub const MEMORY_TOOL: &str = "memory";
/// How long a gateway holds the start of a pending dream before another may take over.
const START_LEASE_MS: i64 = 60_000;
/// How often the reconciler ticks.
const TICK: Duration = Duration::from_secs(1);

/// A dream to create, each field parsed from the wire.
#[derive(Debug, Clone)]
pub struct CreateDream {
    /// The `memory_store` input's store and the input's index in `inputs`.
    pub memory_store: (String, usize),
    /// The `sessions` input's ids (unique) and the input's index.
    pub sessions: (Vec<String>, usize),
    /// `{"id", "speed": "standard"}`.
    pub model: Value,
    /// Guidance for the dream agent.
    pub instructions: Option<String>,
    /// `output_behavior` is `update_existing`.
    pub update_existing: bool,
}

/// A dream with its token counts (frozen when it ended, else its session's so far).
#[derive(Debug, Clone)]
pub struct Dream {
    /// The stored dream.
    pub row: DreamRow,
    /// `{input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens}`.
    pub usage: Value,
}

fn not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("dream not found: {id}"))
}

/// The smallest interval a dream policy accepts (60 s; lower only under the tests-only
/// [`TEST_MIN_INTERVAL_ENV`]).
pub fn min_policy_interval_secs() -> i64 {
    std::env::var(TEST_MIN_INTERVAL_ENV)
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|v| *v >= 1)
        .map_or(MIN_POLICY_INTERVAL_SECS, |v| v.min(MIN_POLICY_INTERVAL_SECS))
}

/// Creates a dream (`pending`); the reconciler (or the task spawned here) starts it.
pub async fn create(state: &AppState, tenant: &Tenant, request: CreateDream) -> DomainResult<Dream> {
    let store = state.backends.store.as_ref();
    let ws = &tenant.workspace_id;
    let (store_id, store_index) = &request.memory_store;
    let input = store.get_memory_store(ws, store_id).await?.ok_or_else(|| {
        DomainError::invalid(format!(
            "inputs[{store_index}].memory_store_id: no memory store {store_id} in this workspace"
        ))
    })?;
    if input.archived_at_ms.is_some() {
        return Err(DomainError::invalid(format!(
            "inputs[{store_index}].memory_store_id: memory store {store_id} is archived"
        )));
    }
    let (session_ids, sessions_index) = &request.sessions;
    for (i, id) in session_ids.iter().enumerate() {
        if store.get_session(ws, id).await?.is_none() {
            return Err(DomainError::invalid(format!(
                "inputs[{sessions_index}].session_ids[{i}]: no session {id} in this workspace"
            )));
        }
    }
    let mut sorted = session_ids.clone();
    sorted.sort();
    let new = NewDream {
        id: agentd_schema::ids::new_id("drm"),
        workspace_id: ws.clone(),
        memory_store_id: store_id.clone(),
        session_ids: sorted,
        model: request.model,
        instructions: request.instructions,
        update_existing: request.update_existing,
    };
    let row = match store.insert_dream(new).await {
        Ok(row) => row,
        Err(StoreError::Conflict(_)) => {
            return Err(DomainError::Conflict(format!(
                "output_behavior: memory store {store_id} already has an update_existing dream that is pending or \
                 running; wait for it to end or cancel it"
            )));
        }
        Err(error) => return Err(error.into()),
    };
    // Start it now rather than at the reconciler's next tick; if this fails, the tick does it.
    let (background, dream) = (state.clone(), row.clone());
    tokio::spawn(async move {
        if let Err(error) = advance(&background, dream).await {
            tracing::warn!(%error, "starting a dream failed; the reconciler retries");
        }
    });
    Ok(Dream { usage: zero_usage(), row })
}

/// A dream of the workspace, settled first if its session has ended.
pub async fn retrieve(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<Dream> {
    let row = state.backends.store.get_dream(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))?;
    let row = if row.status == DreamStatus::Running { settle(state, row).await? } else { row };
    with_usage(state, row).await
}

/// A page of the workspace's dreams, newest first (running ones settled first).
pub async fn list(state: &AppState, tenant: &Tenant, query: &DreamQuery) -> DomainResult<Vec<Dream>> {
    let rows = state.backends.store.list_dreams(&tenant.workspace_id, query).await?;
    let mut dreams = Vec::with_capacity(rows.len());
    for row in rows {
        let row = if row.status == DreamStatus::Running { settle(state, row).await? } else { row };
        dreams.push(with_usage(state, row).await?);
    }
    Ok(dreams)
}

/// Cancels a pending or running dream (idempotent on `canceled`); its session's turn is
/// interrupted. A completed or failed dream cannot be canceled.
pub async fn cancel(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<Dream> {
    let store = state.backends.store.as_ref();
    let row = store.get_dream(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))?;
    let row = match row.status {
        DreamStatus::Canceled => row,
        DreamStatus::Completed | DreamStatus::Failed => {
            return Err(DomainError::invalid(format!(
                "dream {id} is {} and cannot be canceled; only pending or running dreams can",
                row.status.as_str()
            )));
        }
        DreamStatus::Pending | DreamStatus::Running => {
            let usage = match &row.session_id {
                Some(session) => store.get_session(&tenant.workspace_id, session).await?.map(|s| usage_of(&s)),
                None => Some(zero_usage()),
            };
            let end = DreamEnd { status: DreamStatus::Canceled, error: None, usage };
            match store.finish_dream(id, end).await? {
                Some(row) => row,
                // It ended meanwhile: answer by its final status, as a new request would.
                None => return Box::pin(cancel(state, tenant, id)).await,
            }
        }
    };
    if let Some(session) = &row.session_id {
        interrupt(state, session).await;
    }
    with_usage(state, row).await
}

/// Archives a dream that has ended (idempotent); a pending or running one is refused.
pub async fn archive(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<Dream> {
    let store = state.backends.store.as_ref();
    let row = store.get_dream(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))?;
    if !row.status.is_final() {
        return Err(DomainError::invalid(format!(
            "dream {id} is {} and cannot be archived; only completed, failed or canceled dreams can",
            row.status.as_str()
        )));
    }
    let row = store.archive_dream(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))?;
    with_usage(state, row).await
}

async fn with_usage(state: &AppState, row: DreamRow) -> DomainResult<Dream> {
    let usage = match (&row.usage, &row.session_id) {
        (Some(usage), _) => usage.clone(),
        (None, Some(session)) => state
            .backends
            .store
            .get_session(&row.workspace_id, session)
            .await?
            .map_or_else(zero_usage, |s| usage_of(&s)),
        (None, None) => zero_usage(),
    };
    Ok(Dream { row, usage })
}

fn zero_usage() -> Value {
    json!({ "input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0 })
}

/// A dream's token counts from its session's usage projection.
fn usage_of(session: &Session) -> Value {
    let usage = &session.usage;
    let count = |value: &Value| value.as_i64().unwrap_or(0);
    let created = count(&usage["cache_creation"]["ephemeral_5m_input_tokens"])
        + count(&usage["cache_creation"]["ephemeral_1h_input_tokens"]);
    json!({
        "input_tokens": count(&usage["input_tokens"]),
        "output_tokens": count(&usage["output_tokens"]),
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": count(&usage["cache_read_input_tokens"]),
    })
}

/// Interrupts a dream's session; a failure is logged (the session's turn then ends on
/// its own, and the dream is already canceled).
async fn interrupt(state: &AppState, session_id: &str) {
    if let Err(error) = super::runs::interrupt(state, session_id).await {
        tracing::warn!(%error, session = session_id, "interrupting a canceled dream's session failed");
    }
}

/// Moves an open dream along: starts a pending one, settles a running one.
pub async fn advance(state: &AppState, row: DreamRow) -> DomainResult<DreamRow> {
    match row.status {
        DreamStatus::Pending => start(state, row).await,
        DreamStatus::Running => settle(state, row).await,
        DreamStatus::Completed | DreamStatus::Failed | DreamStatus::Canceled => Ok(row),
    }
}

/// The output store's name: the input's with " (dream)", within the name limit.
fn output_store_name(input: &str) -> String {
    const SUFFIX: &str = " (dream)";
    let room = super::memory::MAX_STORE_NAME_CHARS - SUFFIX.chars().count();
    let head: String = input.chars().take(room).collect();
    format!("{head}{SUFFIX}")
}

/// Starts a pending dream, idempotently: every step finds what an earlier, interrupted
/// attempt did (ids derived from the dream's id; `Conflict` on create = already there;
/// the copy skips paths present), and `pending` → `running` is the last step.
async fn start(state: &AppState, row: DreamRow) -> DomainResult<DreamRow> {
    let store = state.backends.store.as_ref();
    if !store.claim_dream_start(&row.id, now_ms(), START_LEASE_MS).await? {
        return Ok(row);
    }
    let id = row.id.clone();
    let started = start_claimed(state, row).await;
    if started.is_err()
        && let Err(error) = store.release_dream_start(&id).await
    {
        tracing::warn!(%error, dream = %id, "releasing a failed dream start; it is retried once its claim expires");
    }
    started
}

/// The steps of [`start`] once claimed.
async fn start_claimed(state: &AppState, row: DreamRow) -> DomainResult<DreamRow> {
    let store = state.backends.store.as_ref();
    let ws = &row.workspace_id;
    let session_id = derived_id(&row.id, "sesn");
    let output_store_id =
        if row.update_existing { row.memory_store_id.clone() } else { derived_id(&row.id, "memstore") };
    let Some(input) = store.get_memory_store(ws, &row.memory_store_id).await? else {
        let error = json!({ "type": "memory_store_not_found",
                            "message": format!("the input memory store {} was deleted", row.memory_store_id) });
        return finish(state, row, DreamStatus::Failed, Some(error), Some(zero_usage())).await;
    };
    let session_exists = store.get_session(ws, &session_id).await?.is_some();
    if !row.update_existing {
        let new = NewMemoryStore {
            id: output_store_id.clone(),
            workspace_id: ws.clone(),
            name: output_store_name(&input.name),
            description: input.description.clone(),
            metadata: json!({}),
        };
        match store.create_memory_store(new).await {
            Ok(_) | Err(StoreError::Conflict(_)) => {}
            Err(error) => return Err(error.into()),
        }
        // Once the session exists the copy was complete (and the agent may have changed
        // the copy since): it is not made again.
        if !session_exists {
            copy_memories(store, ws, &input.id, &output_store_id, &session_id).await?;
        }
    }
    if !session_exists {
        let new = NewSession {
            id: session_id.clone(),
            workspace_id: ws.clone(),
            status: "idle".into(),
            body: session_body(&*state.catalogs.of(ws)?, &row, &session_id, &output_store_id, &input.name),
            agent_id: None,
            agent_version: None,
        };
        match store.create_session(new).await {
            Ok(_) | Err(StoreError::Conflict(_)) => {}
            Err(error) => return Err(error.into()),
        }
    }
    let message =
        NewEvent::user_message(&session_id, &first_message(&row, &input.name)).with_id(derived_id(&row.id, "sevt"));
    match commit::submit_and_publish(state, &session_id, vec![message]).await {
        Ok(_) | Err(DomainError::Conflict(_)) => {}
        Err(error) => return Err(error),
    }
    match store.start_dream(&row.id, &session_id, &output_store_id).await? {
        Some(started) => Ok(started),
        None => {
            // Canceled while it started: the session must not go on dreaming.
            let now = store.get_dream(ws, &row.id).await?.ok_or_else(|| not_found(&row.id))?;
            if now.status == DreamStatus::Canceled {
                interrupt(state, &session_id).await;
            }
            Ok(now)
        }
    }
}

/// Copies the input store's memories into the output store as the dream's session;
/// paths already there (an earlier, interrupted copy) are skipped.
async fn copy_memories(
    store: &dyn agentd_schema::Store,
    ws: &str,
    from: &str,
    to: &str,
    session_id: &str,
) -> DomainResult<()> {
    let mut after = None;
    loop {
        let query = MemoryQuery { after: after.clone(), limit: 100, with_content: true, ..MemoryQuery::default() };
        let page = store.list_memories(ws, from, &query).await?;
        let Some(last) = page.last() else { return Ok(()) };
        after = Some(last.path().to_owned());
        for item in page {
            let MemoryListItem::Memory(memory) = item else { continue };
            let text = memory.content.unwrap_or_default();
            let new = NewMemory {
                workspace_id: ws.to_owned(),
                memory_store_id: to.to_owned(),
                id: agentd_schema::ids::new_id("mem"),
                version_id: agentd_schema::ids::new_id("memver"),
                path: memory.path,
                content: MemoryContent { sha256: memory.content_sha256, size_bytes: text.len() as i64, text },
                actor: MemoryActor::Session(session_id.to_owned()),
            };
            match store.create_memory(new).await? {
                MemoryWrite::Written(_) | MemoryWrite::PathTaken => {}
                other => return Err(DomainError::Internal(format!("copying into memory store {to}: {other:?}"))),
            }
        }
    }
}

/// The dream agent's system prompt.
fn system_prompt(row: &DreamRow, store_name: &str) -> String {
    let start = if row.update_existing {
        format!("It is the memory store \"{store_name}\" itself: your changes are its new contents.")
    } else {
        format!(
            "It starts as a copy of the memory store \"{store_name}\"; the original is not changed, your result \
             is this new store."
        )
    };
    let mut prompt = format!(
        "You are a dream: a background job that consolidates an agent's memory. You read the transcripts of past \
         sessions and the current memories, and you rewrite the memory so that future sessions find what they need \
         quickly.\n\n\
         You have one tool, `memory`, over two directories:\n\
         - /memories/ — the memory store you write (read-write). {start}\n\
         - /transcripts/ — one read-only file per session to read, named after the session.\n\n\
         Commands: `view` (a directory lists its files; a file shows its lines, numbered), `create` (a new file \
         with `file_text`), `str_replace` (replace `old_str`, which must occur exactly once, by `new_str`), \
         `delete`, `rename` (`old_path` to `new_path`). Paths start with /memories/ or /transcripts/.\n\n\
         How to work: view /transcripts/ and read every transcript; view /memories/ and read what is there; then \
         merge. Keep what is still true, record durable facts, decisions, preferences and lessons the sessions \
         show, remove duplicates and what is outdated, one topic per file with a clear name. Do not copy \
         transcripts verbatim. When the memory is consolidated, answer with a short summary of what you changed \
         and stop."
    );
    if let Some(instructions) = &row.instructions {
        prompt.push_str("\n\nInstructions for this dream:\n");
        prompt.push_str(instructions);
    }
    prompt
}

/// The first message of the dream's session: what to read.
fn first_message(row: &DreamRow, store_name: &str) -> String {
    let mut text =
        format!("Dream {}: consolidate the memory store \"{store_name}\" using these sessions' transcripts:\n", row.id);
    for id in &row.session_ids {
        text.push_str(&format!("- /transcripts/{id}.md\n"));
    }
    text
}

/// The body of a dream's session: the built-in dream agent on the dream's model, no
/// environment (the memory tool runs in the worker; `environment_id` is the empty
/// string, since the wire's session type requires a string), and the `_dream` marker the
/// worker reads (underscore fields are internal: never rendered).
fn session_body(
    catalog: &agentd_schema::catalog::Catalog,
    row: &DreamRow,
    session_id: &str,
    output_store_id: &str,
    store_name: &str,
) -> Value {
    let model_id = row.model["id"].as_str().unwrap_or_default();
    let agent = json!({
        "type": "agent",
        "id": DREAM_AGENT_ID,
        "version": 1,
        "name": "dream",
        "description": "The built-in dream agent: consolidates a memory store from session transcripts.",
        "system": system_prompt(row, store_name),
        "model": { "id": model_id, "speed": "standard" },
        "tools": [{
            "type": "custom",
            "name": MEMORY_TOOL,
            "description": "The dream's memory, run by agentd's worker: view, create, str_replace, delete and \
                            rename over /memories/ (the output store) and /transcripts/ (read-only).",
            "input_schema": { "type": "object", "properties": { "command": { "type": "string" } },
                              "required": ["command"] },
        }],
        "mcp_servers": [],
        "skills": [],
        "multiagent": null,
        "execution_identity": { "type": "service_account" },
    });
    json!({
        "type": "session",
        "id": session_id,
        "agent": agent,
        "environment_id": "",
        "metadata": {},
        "title": format!("Dream {}", row.id),
        "vault_ids": [],
        "budget": null,
        "resources": [],
        "outcome_evaluations": [],
        "deployment_id": null,
        "created_at": agentd_schema::live::rfc3339(now_ms()),
        "_price_snapshot": agentd_schema::budget::snapshot(catalog, model_id),
        "_dream": {
            "dream_id": row.id,
            "input_store_id": row.memory_store_id,
            "output_store_id": output_store_id,
            "session_ids": row.session_ids,
        },
    })
}

/// Settles a running dream from its session's committed state: an idle that ends the
/// turn (`end_turn`) completes it; any other idle, a terminated or deleted session fails
/// it. A session still at work leaves it running. The session's idle is committed once,
/// under fencing, and the transition is a compare-and-swap: a dream ends exactly once.
pub async fn settle(state: &AppState, row: DreamRow) -> DomainResult<DreamRow> {
    let store = state.backends.store.as_ref();
    let Some(session_id) = row.session_id.clone() else { return Ok(row) };
    let Some(session) = store.get_session(&row.workspace_id, &session_id).await? else {
        let error =
            json!({ "type": "session_deleted", "message": format!("the dream's session {session_id} was deleted") });
        return finish(state, row, DreamStatus::Failed, Some(error), None).await;
    };
    let query = EventQuery {
        types: vec![EventType::SessionStatusIdle.as_str().into(), EventType::SessionStatusTerminated.as_str().into()],
        limit: 1,
        descending: true,
        ..EventQuery::default()
    };
    let Some(last) = store.query_events(&session_id, &query).await?.pop() else { return Ok(row) };
    let usage = Some(usage_of(&session));
    if last.kind == EventType::SessionStatusTerminated.as_str() {
        let error = json!({ "type": "session_terminated", "message": format!("the dream's session {session_id} was terminated") });
        return finish(state, row, DreamStatus::Failed, Some(error), usage).await;
    }
    match StopReason::of(&last.body) {
        Some(StopReason::EndTurn) => finish(state, row, DreamStatus::Completed, None, usage).await,
        stop => {
            let kind = stop.as_ref().map_or("internal_error", StopReason::as_str);
            let message = last_error(state, &session_id).await?.unwrap_or_else(|| {
                format!("the dream's session {session_id} stopped with {kind} before the dream was done")
            });
            let error = json!({ "type": kind, "message": message });
            finish(state, row, DreamStatus::Failed, Some(error), usage).await
        }
    }
}

/// The message of the session's last `session.error`, if any.
async fn last_error(state: &AppState, session_id: &str) -> DomainResult<Option<String>> {
    let query = EventQuery {
        types: vec![EventType::SessionError.as_str().into()],
        limit: 1,
        descending: true,
        ..EventQuery::default()
    };
    let events = state.backends.store.query_events(session_id, &query).await?;
    Ok(events.first().and_then(|e| e.body["error"]["message"].as_str()).map(str::to_owned))
}

async fn finish(
    state: &AppState,
    row: DreamRow,
    status: DreamStatus,
    error: Option<Value>,
    usage: Option<Value>,
) -> DomainResult<DreamRow> {
    let store = state.backends.store.as_ref();
    match store.finish_dream(&row.id, DreamEnd { status, error, usage }).await? {
        Some(ended) => {
            tracing::info!(dream = %ended.id, status = ended.status.as_str(), "dream ended");
            Ok(ended)
        }
        None => Ok(store.get_dream(&row.workspace_id, &row.id).await?.unwrap_or(row)),
    }
}

/// One tick of the reconciler: fire the due dream policies, then start pending dreams
/// and settle running ones.
pub async fn tick(state: &AppState) -> DomainResult<()> {
    let store = state.backends.store.as_ref();
    let now = now_ms();
    for (ws, memory_store_id) in store.due_dream_policies(now, 50).await? {
        let dream_id = agentd_schema::ids::new_id("drm");
        match store.schedule_dream(&ws, &memory_store_id, now, &dream_id).await {
            Ok(ScheduleOutcome::Dreamed(row)) => {
                tracing::info!(dream = %row.id, store = %memory_store_id, "dream policy fired");
            }
            Ok(ScheduleOutcome::Advanced | ScheduleOutcome::NotDue) => {}
            Err(error) => tracing::warn!(%error, store = %memory_store_id, "dream policy tick failed"),
        }
    }
    for row in store.open_dreams(200).await? {
        let id = row.id.clone();
        if let Err(error) = advance(state, row).await {
            tracing::warn!(%error, dream = %id, "advancing a dream failed; retrying at the next tick");
        }
    }
    Ok(())
}

/// The reconciler and dream scheduler of this gateway: a tick every second (less under
/// the tests-only setting) until `stop`.
pub fn spawn_reconciler(state: AppState, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let every = TICK.min(Duration::from_secs(min_policy_interval_secs().max(1) as u64));
    tokio::spawn(async move {
        loop {
            if let Err(error) = tick(&state).await {
                tracing::warn!(%error, "dream reconciler tick failed; retrying");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    })
}

/// A dream policy as written by `PUT` (validated by the handler).
#[derive(Debug, Clone)]
pub struct PolicyChange {
    /// Whether the scheduler dreams over the store.
    pub enabled: bool,
    /// Seconds between due ticks.
    pub interval_seconds: i64,
    /// At least this many new sessions for a dream.
    pub min_new_sessions: i64,
    /// At most this many sessions per dream.
    pub max_sessions: i64,
    /// `{"id", "speed"}`.
    pub model: Value,
    /// Guidance for the dream agent.
    pub instructions: Option<String>,
}

/// The default policy: disabled, daily, 5 new sessions, at most 100, the default model.
pub fn default_policy(workspace_id: &str, memory_store_id: &str) -> DreamPolicyRow {
    DreamPolicyRow {
        memory_store_id: memory_store_id.to_owned(),
        workspace_id: workspace_id.to_owned(),
        enabled: false,
        interval_seconds: 86_400,
        min_new_sessions: 5,
        max_sessions: MAX_DREAM_SESSIONS as i64,
        model: json!({ "id": "claude-sonnet-4-6", "speed": "standard" }),
        instructions: None,
        next_due_at_ms: None,
        last_completed_cutoff_ms: None,
    }
}

/// The store's dream policy, or the disabled default (no row is written).
pub async fn get_policy(state: &AppState, tenant: &Tenant, memory_store_id: &str) -> DomainResult<DreamPolicyRow> {
    let store = state.backends.store.as_ref();
    super::memory::load_store(store, &tenant.workspace_id, memory_store_id).await?;
    Ok(store
        .get_dream_policy(&tenant.workspace_id, memory_store_id)
        .await?
        .unwrap_or_else(|| default_policy(&tenant.workspace_id, memory_store_id)))
}

/// Writes the store's dream policy.
pub async fn put_policy(
    state: &AppState,
    tenant: &Tenant,
    memory_store_id: &str,
    change: PolicyChange,
) -> DomainResult<DreamPolicyRow> {
    let store = state.backends.store.as_ref();
    super::memory::load_store(store, &tenant.workspace_id, memory_store_id).await?;
    let policy = DreamPolicyRow {
        memory_store_id: memory_store_id.to_owned(),
        workspace_id: tenant.workspace_id.clone(),
        enabled: change.enabled,
        interval_seconds: change.interval_seconds,
        min_new_sessions: change.min_new_sessions,
        max_sessions: change.max_sessions,
        model: change.model,
        instructions: change.instructions,
        next_due_at_ms: None,
        last_completed_cutoff_ms: None,
    };
    Ok(store.put_dream_policy(policy).await?)
}
