//! Erasure of a data subject (docs/api/user-profiles.md, "Erasure"): every record of
//! the sessions attributed to a user profile — their events and threads, queued work,
//! live inbox, adapter bindings, A2A tasks, the files scoped to them with their objects,
//! the memory versions they authored — removed by one durable job.
//!
//! The job is a row (`user_profile_erasures`). The request that starts it carries it
//! through; if that gateway dies, the next request for the profile or this module's
//! sweeper (any gateway, once the job is stale) carries it on. Each step is idempotent:
//! a file already gone or a session already erased removes nothing more.

use std::time::Duration;

use agentd_schema::ids::{UserProfileId, new_id};
use agentd_schema::{ErasureRow, EventType, SessionErasure, StoreError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;

/// Sessions read per step.
const PAGE: i64 = 100;

/// A running job with no progress for this long is taken over by the sweeper.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// Erases every record of the profile's data subject and returns the job's receipt. An
/// unknown profile, or another workspace's, is `NotFound` and nothing is touched; a
/// profile deleted since still has records to erase, so it is erased too.
pub async fn erase(state: &AppState, tenant: &Tenant, id: &UserProfileId) -> DomainResult<ErasureRow> {
    let store = state.backends.store.as_ref();
    if store.get_user_profile(&tenant.workspace_id, id.as_str()).await?.is_none() {
        return Err(DomainError::NotFound(format!("user profile not found: {id}")));
    }
    let job = match store.begin_erasure(&new_id("uperas"), &tenant.workspace_id, id.as_str()).await {
        Err(StoreError::Conflict(_)) => {
            store.begin_erasure(&new_id("uperas"), &tenant.workspace_id, id.as_str()).await?
        }
        other => other?,
    };
    carry_on(state, &job).await
}

/// Runs a job to its end: every session of the subject, page by page, until none is
/// left (a session created meanwhile is found by the next page), then completes it.
async fn carry_on(state: &AppState, job: &ErasureRow) -> DomainResult<ErasureRow> {
    let store = state.backends.store.as_ref();
    loop {
        let sessions = store.subject_sessions(&job.workspace_id, &job.user_profile_id, PAGE).await?;
        if sessions.is_empty() {
            break;
        }
        for session_id in sessions {
            erase_session(state, job, &session_id).await?;
        }
    }
    let done = store.complete_erasure(&job.id).await?;
    tracing::info!(erasure = %done.id, user_profile = %done.user_profile_id, records = done.records_removed,
                   "erasure completed");
    metrics::counter!("agentd_erasure_records_removed_total").increment(done.records_removed.max(0) as u64);
    Ok(done)
}

/// Erases one session: the objects of its files first (a row never outlives the object
/// it names), then every row in one transaction; its open streams end.
async fn erase_session(state: &AppState, job: &ErasureRow, session_id: &str) -> DomainResult<()> {
    let store = state.backends.store.as_ref();
    let mut removed_before = 0;
    // Every file scoped to the session, in any state (an upload under way, an expired
    // file not swept yet): its object first, then its row.
    loop {
        let files = store.scoped_files(&job.workspace_id, session_id, PAGE).await?;
        if files.is_empty() {
            break;
        }
        for file in files {
            let key = agentd_schema::blobs::BlobKey::from_stored(&file.blob_key);
            state
                .backends
                .blobs
                .delete(&key)
                .await
                .map_err(|e| DomainError::Unavailable(format!("blob store: {e}")))?;
            if store.remove_file(&file.id, file.state).await? {
                removed_before += 1;
            }
        }
    }
    store.erase_session(&job.id, &job.workspace_id, session_id, SessionErasure { removed_before }).await?;
    if let Some(bus) = &state.backends.bus {
        let event = json!({
            "type": EventType::SessionDeleted,
            "id": new_id("sevt"),
            "processed_at": agentd_schema::live::rfc3339(crate::managed::query::now_ms()),
        });
        agentd_schema::live::publish_terminal(bus.as_ref(), session_id, &event).await;
    }
    Ok(())
}

/// Carries on jobs whose gateway stopped: every 10 seconds, each running job without
/// progress for a minute, until `stop`.
pub fn spawn_sweeper(state: AppState, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let before = crate::managed::query::now_ms() - STALE_AFTER.as_millis() as i64;
            match state.backends.store.stale_erasures(before, 10).await {
                Ok(jobs) => {
                    for job in jobs {
                        if let Err(error) = carry_on(&state, &job).await {
                            tracing::warn!(%error, erasure = %job.id, "carrying on an erasure failed; retrying");
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "erasure sweep failed; retrying"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(10)) => {}
            }
        }
    })
}
