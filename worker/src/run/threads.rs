//! Session threads in an attempt (ADR 0022 §5): the primary dispatches its thread calls
//! to child threads and waits for their replies without holding anything in memory
//! (the wait is `awaited_by` on the child's row plus the open call in history); a
//! child's turn that ends replies to the call that started it; a primary's turn that
//! ends without its replies closes its waits. Each is one `RunStore::handoff` under the
//! attempt's claim, which also makes the other thread's run runnable.

use agentd_schema::events::thread_id_for;
use agentd_schema::{
    EventType, HandedOff, Handoff, NewEvent, RunStatus, Session, SessionThread, Settlement, StopReason, StoreError,
    ThreadQuery, live,
};

use super::{Attempt, Stop};
use crate::agent_loop::{self, ThreadCall, Waiting};
use crate::threads::{self, Child, Dispatch, Planned, Replying, Roster};

/// The most thread rows a dispatch reads (above the most a session may have).
const ROWS: i64 = 1_000;

/// A child's row as a dispatch plans with it.
fn child_of(row: &SessionThread) -> Child {
    Child {
        id: row.id.clone(),
        agent_name: row.agent_name.clone().unwrap_or_default(),
        status: row.status.clone(),
        stop_reason: row.stop_reason.as_ref().and_then(|stop| stop["type"].as_str()).map(str::to_owned),
        awaited: row.awaited_by.is_some(),
        archived: row.archived_at_ms.is_some(),
    }
}

/// A message call the store would not await (its thread was archived, or messaged,
/// since the rows were read) is refused when the rows read again show nothing new.
const GONE: &str = "the thread is no longer available to message (it was archived or messaged meanwhile)";

impl Attempt<'_> {
    /// Dispatches the primary's thread calls (`Decision::CallThreads`) in one handoff:
    /// `before`, the refused calls' error results, the new threads, the messages on both
    /// sides, the awaits, the children woken. A `Conflict` (a target archived or
    /// messaged meanwhile) reads the rows again and plans again, which refuses that call.
    pub(super) async fn call_threads(
        &mut self,
        session: &Session,
        before: Vec<NewEvent>,
        calls: Vec<ThreadCall>,
    ) -> Result<(), Stop> {
        let store = self.ctx.store.as_ref();
        let primary = &session.body["agent"];
        let roster = Roster::of(primary).unwrap_or_default();
        let priced_models = session.body["_price_snapshot"].get("models");
        let mut last: Option<Vec<Planned>> = None;
        for _ in 0..3 {
            let query = ThreadQuery { limit: ROWS, ..ThreadQuery::default() };
            let rows = store.list_threads(&session.id, &query).await?;
            let children: Vec<Child> = rows.iter().filter(|row| !row.is_primary()).map(child_of).collect();
            let dispatch = Dispatch { roster: &roster, primary, priced_models, children: &children };
            let mut planned = threads::plan(&dispatch, &calls, thread_id_for);
            if last.as_ref() == Some(&planned) {
                // Nothing changed that the rows show: the store's condition that failed is
                // a message's await; refuse the messages rather than retry blindly.
                for step in &mut planned {
                    if let Planned::Message { call_id, .. } = step {
                        *step = Planned::Refused { call_id: call_id.clone(), why: GONE.to_owned() };
                    }
                }
            }
            let handoff = threads::dispatch_handoff(&session.id, &self.claim.thread_id, before.clone(), &planned);
            let spawned = handoff.new_threads.len();
            match self.handoff(handoff).await {
                Ok(()) => {
                    metrics::counter!("agentd_threads_spawned_total").increment(spawned as u64);
                    tracing::info!(run = %self.claim.run_id, calls = calls.len(), spawned, "thread calls dispatched");
                    return Ok(());
                }
                Err(StoreError::Conflict(why)) => {
                    tracing::info!(run = %self.claim.run_id, %why, "a thread call's target changed; planning again");
                    last = Some(planned);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(Stop::Abandoned("thread calls could not be dispatched: their targets kept changing".to_owned()))
    }

    /// Parks the primary while its dispatched calls wait for replies
    /// (`Decision::AwaitThreads`): the session stays `running`, and a reply's handoff
    /// makes the run runnable again. When every awaited child waits on the client
    /// (`requires_action`), the primary idles `requires_action` with the union of their
    /// calls, so the session goes idle until the client answers them.
    pub(super) async fn await_threads(&self, events: Vec<NewEvent>, waiting: Vec<Waiting>) -> Result<RunStatus, Stop> {
        let store = self.ctx.store.as_ref();
        let mut blocking: Vec<String> = Vec::new();
        let mut all_blocked = true;
        for wait in &waiting {
            let row = store.get_thread(&self.claim.session_id, &wait.thread_id).await?;
            let stop = row.as_ref().filter(|row| row.status == "idle").and_then(|row| row.stop_reason.as_ref());
            match stop.and_then(|stop| serde_json::from_value(stop.clone()).ok()) {
                Some(StopReason::RequiresAction { event_ids }) => blocking.extend(event_ids),
                _ => all_blocked = false,
            }
        }
        if !all_blocked || blocking.is_empty() {
            return self.settle(events).await;
        }
        let stop = StopReason::RequiresAction { event_ids: blocking };
        let mut events: Vec<NewEvent> = events.into_iter().filter(|e| !e.is(EventType::SessionStatusRunning)).collect();
        if !agent_loop::idled_with(&self.history, &stop) {
            events.push(NewEvent::status_idle(&self.claim.thread_id, stop));
        }
        self.settle(events).await
    }

    /// The handoff that settles the attempt with `events` (already on its thread) when
    /// the settlement reaches past it, else `None`:
    ///
    /// - a child whose turn on its parent's request has ended replies (its idle, the
    ///   reply and the call's result, the wait released, the parent woken); one that
    ///   idles waiting on the client wakes the parent (which may idle the session);
    /// - a primary whose turn ends (an idle other than `requires_action`) with calls
    ///   still waiting closes them: an error result each, the waits released. Which
    ///   calls still wait is the rows' to say (a reply releases its wait in the
    ///   transaction that answers the call), so a reply committed since the history was
    ///   read is not answered twice.
    pub(super) async fn settle_handoff(&self, events: &[NewEvent]) -> Result<Option<Handoff>, Stop> {
        let session_id = self.claim.session_id.as_str();
        let store = self.ctx.store.as_ref();
        if self.primary {
            let Some(idle) = events.iter().rev().find(|e| e.is(EventType::SessionStatusIdle)) else { return Ok(None) };
            if matches!(StopReason::of(&idle.body), Some(StopReason::RequiresAction { .. }))
                || agent_loop::awaiting(&self.history).is_empty()
            {
                return Ok(None);
            }
            let waiting = threads::open_waits(store, session_id).await?;
            if waiting.is_empty() {
                return Ok(None);
            }
            tracing::info!(run = %self.claim.run_id, calls = waiting.len(), "the turn ended with thread calls unanswered");
            return Ok(Some(threads::close_awaiting(session_id, &self.claim.thread_id, events.to_vec(), &waiting)));
        }
        let Some(row) = store.get_thread(session_id, &self.claim.thread_id).await? else { return Ok(None) };
        let (Some(call_id), Some(parent)) = (row.awaited_by.as_deref(), row.parent_id.as_deref()) else {
            return Ok(None);
        };
        let Some(owed) = threads::owed_reply(&self.history, events, call_id) else { return Ok(None) };
        if owed.replies() {
            let to = Replying {
                session_id,
                primary: parent,
                thread_id: &self.claim.thread_id,
                agent_name: &self.agent_name,
                call_id,
            };
            return Ok(Some(threads::reply_handoff(to, &owed, events.to_vec())));
        }
        // Waiting on the client: the parent decides whether the session idles. Only when
        // this settlement is what idles the child, not on every later claim of it.
        if !events.iter().any(|e| e.is(EventType::SessionThreadStatusIdle)) {
            return Ok(None);
        }
        Ok(Some(Handoff {
            session_id: session_id.to_owned(),
            events: events.to_vec(),
            wake: vec![parent.to_owned()],
            ..Handoff::default()
        }))
    }

    /// Commits a handoff under the claim (see [`Attempt::commit_handoff`]). Its events
    /// are on several threads: the next step reads the store.
    async fn handoff(&mut self, handoff: Handoff) -> Result<(), StoreError> {
        self.commit_handoff(handoff).await?;
        self.unread = true;
        Ok(())
    }

    /// Commits a handoff under the claim, announces its events and publishes the woken
    /// runs' submissions (a publish that fails is left to the outbox relay).
    pub(super) async fn commit_handoff(&self, handoff: Handoff) -> Result<HandedOff, StoreError> {
        let handed = self.ctx.store.handoff(Some(self.claim), handoff).await?;
        live::publish_committed(self.ctx.bus.as_ref(), &handed.events).await;
        if let Some(queue) = self.queue {
            for message in &handed.outbox {
                if let Err(error) = agentd_schema::outbox::publish(self.ctx.store.as_ref(), queue, message).await {
                    tracing::warn!(%error, msg_id = %message.msg_id, "thread wake deferred to the outbox relay");
                }
            }
        }
        Ok(handed)
    }

    /// Settles with `events` through the handoff they need, if any (see
    /// [`Attempt::settle_handoff`]). A `Conflict` means a wait was released meanwhile:
    /// a child settles without its reply (the parent's turn ended, or the child was
    /// archived); a primary reads its rows again (a reply came in).
    pub(super) async fn settle_threads(&self, events: Vec<NewEvent>) -> Result<Option<RunStatus>, Stop> {
        for _ in 0..3 {
            let Some(mut handoff) = self.settle_handoff(&events).await? else { return Ok(None) };
            handoff.settlement = Some(Settlement::Awaiting);
            match self.commit_handoff(handoff).await {
                Ok(handed) => return Ok(Some(handed.status)),
                Err(StoreError::Conflict(why)) if self.primary => {
                    tracing::info!(run = %self.claim.run_id, %why, "a thread replied meanwhile; closing the other waits");
                }
                Err(StoreError::Conflict(why)) => {
                    tracing::info!(run = %self.claim.run_id, %why, "the thread wait was released meanwhile; settling without it");
                    return Ok(None);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(Stop::Abandoned("the waits of the ending turn kept changing".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_childs_row_plans_with_its_stop_reason_type() {
        let row = SessionThread {
            id: "sthr_a".into(),
            session_id: "sesn_1".into(),
            parent_id: Some("sesn_1".into()),
            status: "idle".into(),
            stop_reason: Some(json!({ "type": "requires_action", "event_ids": ["sevt_x"] })),
            agent_name: Some("researcher".into()),
            agent: None,
            awaited_by: Some("sevt_c".into()),
            usage: json!({}),
            active_ms: 0,
            running_since_ms: None,
            created_at_ms: 0,
            updated_at_ms: 0,
            archived_at_ms: None,
        };
        let child = child_of(&row);
        assert_eq!(child.stop_reason.as_deref(), Some("requires_action"));
        assert!(child.awaited && !child.archived);
    }
}
