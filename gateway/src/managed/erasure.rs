//! `POST /v1/user_profiles/{user_profile_id}/erasure` (a service extension, spec §4.5):
//! erases every record of the profile's data subject and answers with the receipt.

use agentd_schema::ErasureRow;
use agentd_schema::ids::UserProfileId;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::query::rfc3339;
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::erasure;
use crate::error::ApiResult;

/// The receipt of an erasure job.
fn receipt(job: &ErasureRow) -> Value {
    json!({
        "type": "user_profile_erasure",
        "id": job.id,
        "user_profile_id": job.user_profile_id,
        "status": if job.completed { "completed" } else { "running" },
        "records_removed": job.records_removed,
        "created_at": rfc3339(job.created_at_ms),
        "completed_at": job.completed_at_ms.map(rfc3339),
    })
}

/// `POST /v1/user_profiles/{user_profile_id}/erasure`: runs the erasure to its end. A
/// repeat is a new job that finds what is left (nothing, unless sessions were created
/// for the profile since): a receipt with `records_removed: 0` recreates nothing.
pub async fn erase(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<UserProfileId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(receipt(&erasure::erase(&state, &tenant, &id).await?)))
}
