//! Session threads (ADR 0022 §8, §9): a session's primary thread and the child threads its
//! agent spawns — finding one for a route, listing them, archiving a child, the interrupt
//! of one thread or of every one, and which events the session-level view shows. Every
//! surface that reaches a thread (the managed thread routes, `events.send`, the adapters'
//! interrupt) comes here; a change that reaches past one thread is one
//! `RunStore::handoff`, published here.

use agentd_schema::events::{call_event_id, cross_posted};
use agentd_schema::{EventType, HandedOff, Handoff, NewEvent, Session, SessionThread, StoredEvent, ThreadQuery, live};

use super::error::{DomainError, DomainResult};
use super::sessions;
use crate::AppState;
use crate::admission::Tenant;

/// The statuses a thread can be in (`statuses[]` of the list).
pub const STATUSES: &[&str] = &["running", "idle", "rescheduling", "terminated"];

/// Whether an event of `kind` on `thread_id` shows in the session-level view of session
/// `session_id` (events list, stream, the adapters' follower): the primary's events and
/// the child events of `events::CROSS_POSTED` (ADR 0022 §6; the store's
/// `EventQuery::primary_view` is the same rule). A single-agent session shows everything.
pub fn in_session_view(session_id: &str, thread_id: &str, kind: &str) -> bool {
    thread_id == session_id || cross_posted(kind)
}

/// A session of the tenant and its thread `thread_id` (the primary's id is the
/// session's); a thread of another session, or none, is a 404.
pub async fn load(
    state: &AppState,
    tenant: &Tenant,
    session_id: &str,
    thread_id: &str,
) -> DomainResult<(Session, SessionThread)> {
    let session = sessions::load(state, tenant, session_id).await?;
    let thread = state.backends.store.get_thread(&session.id, thread_id).await?.ok_or_else(|| {
        DomainError::NotFound(format!("session thread not found: {thread_id} in session {session_id}"))
    })?;
    Ok((session, thread))
}

/// A page of the session's threads in id order (the primary first), `statuses` (each
/// one of [`STATUSES`]) filtering, after the thread `after_id`; `limit + 1` rows are read
/// so the caller knows whether a page follows.
pub async fn list(
    state: &AppState,
    session: &Session,
    statuses: Vec<String>,
    after_id: Option<String>,
    limit: i64,
) -> DomainResult<Vec<SessionThread>> {
    if let Some(status) = statuses.iter().find(|s| !STATUSES.contains(&s.as_str())) {
        return Err(DomainError::invalid(format!("statuses[]: must be one of {STATUSES:?}, got {status:?}")));
    }
    let query = ThreadQuery { statuses, after_id, limit: limit + 1 };
    Ok(state.backends.store.list_threads(&session.id, &query).await?)
}

/// Archives child thread `thread_id` (ADR 0022 §8): the primary is archived with its
/// session, and a running thread must be interrupted first. One handoff commits
/// `session.thread_status_terminated` on the child and archives it; if its parent awaits
/// its reply, the parent's call gets an error result, is released and the parent's run
/// wakes. An archived thread is returned as it is.
pub async fn archive(
    state: &AppState,
    tenant: &Tenant,
    session_id: &str,
    thread_id: &str,
) -> DomainResult<(Session, SessionThread)> {
    let (session, thread) = load(state, tenant, session_id, thread_id).await?;
    if thread.is_primary() {
        return Err(DomainError::invalid(format!(
            "session_thread_id: {thread_id} is the session's primary thread; archive the session instead"
        )));
    }
    if thread.archived_at_ms.is_some() {
        return Ok((session, thread));
    }
    if session.archived_at_ms.is_some() {
        return Err(DomainError::Archived(format!("session {session_id} is archived and its threads take no change")));
    }
    if session.status == "terminated" {
        return Err(DomainError::Terminated(format!("session {session_id} is terminated and so are its threads")));
    }
    if matches!(thread.status.as_str(), "running" | "rescheduling") {
        return Err(DomainError::invalid(format!(
            "session_thread_id: thread {thread_id} is {}; interrupt it first (user.interrupt with its \
             session_thread_id), then archive it once it is idle",
            thread.status
        )));
    }
    let agent_name = thread.agent_name.clone().unwrap_or_default();
    let mut handoff = Handoff {
        session_id: session.id.clone(),
        events: vec![NewEvent::thread_status_terminated(thread_id, thread_id, &agent_name)],
        archive: vec![thread_id.to_owned()],
        ..Handoff::default()
    };
    if let (Some(call), Some(parent)) = (&thread.awaited_by, &thread.parent_id) {
        let why = format!("thread {thread_id} was archived before it replied");
        let result = NewEvent::synthetic_result(parent, EventType::AgentToolUse, call, &why)
            .with_id(call_event_id(call, "result"));
        handoff.events.push(result);
        handoff.releases.push((thread_id.to_owned(), call.clone()));
        handoff.wake.push(parent.clone());
    }
    match handoff_and_publish(state, handoff).await {
        Ok(_) => {}
        // The thread is running, has input its run has not taken yet, or replied
        // meanwhile (the store refuses all of these in the archive's transaction): say
        // so from its row as it is now.
        Err(DomainError::Conflict(_)) => {
            let (_, now) = load(state, tenant, session_id, thread_id).await?;
            if now.archived_at_ms.is_none() {
                return Err(DomainError::Conflict(format!(
                    "thread {thread_id} is {} or has input it has not taken yet; interrupt it or wait until it \
                     is idle, then retry",
                    now.status
                )));
            }
        }
        Err(other) => return Err(other),
    }
    let (session, thread) = load(state, tenant, session_id, thread_id).await?;
    Ok((session, thread))
}

/// Checks that `thread_id`, which an event names in `field`, is a thread of the session
/// that is not archived (the primary's id included).
pub async fn require_open(state: &AppState, session: &Session, thread_id: &str, field: &str) -> DomainResult<()> {
    if thread_id == session.id {
        return Ok(());
    }
    let id = &session.id;
    let thread = state
        .backends
        .store
        .get_thread(id, thread_id)
        .await?
        .ok_or_else(|| DomainError::invalid(format!("{field}: {thread_id:?} is not a thread of session {id}")))?;
    if thread.archived_at_ms.is_some() {
        return Err(DomainError::invalid(format!("{field}: thread {thread_id} of session {id} is archived")));
    }
    Ok(())
}

/// The threads an interrupt without `session_thread_id` reaches: every thread of the
/// session that is not archived, the primary first (the primary alone while it has no
/// child threads).
pub async fn interruptible(state: &AppState, session: &Session) -> DomainResult<Vec<String>> {
    if session.child_threads == 0 {
        return Ok(vec![session.id.clone()]);
    }
    let query = ThreadQuery { limit: session.child_threads + 1, ..ThreadQuery::default() };
    let threads = state.backends.store.list_threads(&session.id, &query).await?;
    Ok(threads.into_iter().filter(|t| t.archived_at_ms.is_none()).map(|t| t.id).collect())
}

/// `interrupt` (a `user.interrupt` without `session_thread_id`, on the primary) and its
/// copies, one on each other thread of `threads`, with ids derived from the client's
/// (ADR 0022 §8).
pub fn fan_out(interrupt: NewEvent, threads: &[String]) -> Vec<NewEvent> {
    let suffix = interrupt.event_id.split_once('_').map_or(interrupt.event_id.as_str(), |(_, s)| s).to_owned();
    let mut events = Vec::with_capacity(threads.len());
    for (i, thread) in threads.iter().filter(|t| **t != interrupt.thread_id).enumerate() {
        let mut copy = interrupt.clone();
        copy.thread_id = thread.clone();
        copy.event_id = format!("sevt_int{}_{suffix}", i + 1);
        events.push(copy);
    }
    events.insert(0, interrupt);
    events
}

/// Interrupts every non-archived thread of the session (AG-UI and MCP clients that go
/// away mid-run): one `user.interrupt` on the primary and a copy on each child.
pub async fn interrupt_all(state: &AppState, session: &Session) -> DomainResult<Vec<StoredEvent>> {
    let threads = interruptible(state, session).await?;
    let events = fan_out(NewEvent::user_interrupt(&session.id), &threads);
    commit(state, session, events, Vec::new()).await
}

/// Commits `events`, among them `user.interrupt`s, and makes the runs of `woken` (the
/// threads given run input) runnable: as any submission while the session has no child
/// threads (an interrupt alone is appended: the worker hears it on the bus); after, one
/// handoff that also wakes every interrupted thread, so one parked on its children
/// re-decides (ADR 0022 §8).
pub async fn commit(
    state: &AppState,
    session: &Session,
    events: Vec<NewEvent>,
    mut woken: Vec<String>,
) -> DomainResult<Vec<StoredEvent>> {
    if session.child_threads == 0 {
        return match woken.split_first() {
            Some((thread, also)) => {
                super::commit::submit_to_threads(state, &session.id, thread, also.to_vec(), events).await
            }
            None => super::commit::append_and_publish(state, &session.id, events).await,
        };
    }
    for event in events.iter().filter(|e| e.is(EventType::UserInterrupt)) {
        if !woken.contains(&event.thread_id) {
            woken.push(event.thread_id.clone());
        }
    }
    let handoff = Handoff { session_id: session.id.clone(), events, wake: woken, ..Handoff::default() };
    Ok(handoff_and_publish(state, handoff).await?.events)
}

/// Commits a handoff without a claim, then publishes its woken runs' submissions (the
/// outbox relay covers a failed publish) and its events.
pub async fn handoff_and_publish(state: &AppState, mut handoff: Handoff) -> DomainResult<HandedOff> {
    handoff.trace_context = super::commit::trace_context();
    handoff.max_attempts = Some(state.max_attempts);
    let handed = state.backends.store.handoff(None, handoff).await?;
    super::commit::publish_outbox(state, &handed.outbox).await;
    if let Some(bus) = &state.backends.bus {
        live::publish_committed(bus.as_ref(), &handed.events).await;
    }
    Ok(handed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_is_copied_to_every_other_thread_with_derived_ids() {
        let interrupt = NewEvent::user_interrupt("sesn_a").with_id("sevt_01jd0000000000000000000000".to_owned());
        let threads = ["sesn_a".to_owned(), "sthr_b".to_owned(), "sthr_c".to_owned()];
        let events = fan_out(interrupt.clone(), &threads);
        let placed: Vec<(&str, &str)> = events.iter().map(|e| (e.thread_id.as_str(), e.event_id.as_str())).collect();
        assert_eq!(
            placed,
            [
                ("sesn_a", "sevt_01jd0000000000000000000000"),
                ("sthr_b", "sevt_int1_01jd0000000000000000000000"),
                ("sthr_c", "sevt_int2_01jd0000000000000000000000"),
            ]
        );
        assert!(events.iter().all(|e| e.is(EventType::UserInterrupt)));
        assert_eq!(fan_out(interrupt, &threads[..1]).len(), 1, "the primary alone");
    }

    #[test]
    fn the_session_view_shows_the_primary_and_cross_posted_child_events() {
        assert!(in_session_view("sesn_a", "sesn_a", "agent.message"));
        assert!(in_session_view("sesn_a", "sthr_b", "agent.tool_use"));
        assert!(in_session_view("sesn_a", "sthr_b", "session.thread_status_idle"));
        assert!(!in_session_view("sesn_a", "sthr_b", "agent.message"));
        assert!(!in_session_view("sesn_a", "sthr_b", "span.model_request_end"));
    }
}
