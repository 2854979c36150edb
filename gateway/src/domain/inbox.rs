//! The live inbox (docs/api/live-inbox.md): messages queued for a session's live run.
//! Adding or replacing a message is input, so it passes the same admission as a turn.

use agentd_schema::ids::SessionId;
use agentd_schema::{InboxChange, InboxRefusal, InboxSnapshot};

use super::error::{DomainError, DomainResult};
use super::{input, sessions};
use crate::AppState;
use crate::admission::Tenant;

/// The inbox of a session that is not terminated.
pub async fn snapshot(state: &AppState, tenant: &Tenant, id: &SessionId) -> DomainResult<InboxSnapshot> {
    let session = live_session(state, tenant, id).await?;
    Ok(state.backends.store.inbox(&session).await?)
}

async fn live_session(state: &AppState, tenant: &Tenant, id: &SessionId) -> DomainResult<String> {
    let session = sessions::load(state, tenant, id).await?;
    if session.status == "terminated" {
        return Err(DomainError::Gone(format!("session {id} is terminated")));
    }
    Ok(session.id)
}

/// Applies `change`; enqueueing and replacing are admitted like a new turn.
pub async fn change(
    state: &AppState,
    tenant: &Tenant,
    id: &SessionId,
    change: InboxChange,
) -> DomainResult<InboxSnapshot> {
    let session_id = live_session(state, tenant, id).await?;
    if matches!(change, InboxChange::Enqueue { .. } | InboxChange::Replace { .. }) {
        input::admit_turn(state, tenant, id).await?;
    }
    match state.backends.store.change_inbox(&session_id, change).await? {
        Ok(snapshot) => Ok(snapshot),
        Err(InboxRefusal::NoLiveRun) => {
            Err(DomainError::Gone(format!("session {session_id} has no live run: send a user.message event instead")))
        }
        Err(InboxRefusal::StaleVersion { current }) => Err(DomainError::Conflict(format!(
            "the order was computed from another version; the inbox is at version {current}"
        ))),
        Err(InboxRefusal::NotAPermutation) => {
            Err(DomainError::Conflict("order must name every message of the inbox exactly once".into()))
        }
        Err(InboxRefusal::UnknownMessage) => Err(DomainError::NotFound("no such message in the live inbox".into())),
    }
}
