//! User profiles (docs/api/user-profiles.md): create, retrieve, update, list, delete, and
//! the enrollment and action URLs of the consent page. The rules are
//! `domain::user_profiles`; this module parses the wire into [`ProfileInput`] (each
//! field absent, `null` or its JSON value) and renders `BetaUserProfile` in the shape the
//! request's `anthropic-beta` selects ([`dialect`]), with agentd's `consent` alongside.
//!
//! No selector is required: the SDK's GA client (`client.user_profiles`) sends none, its
//! beta client (`client.beta.user_profiles`) sends `user-profiles-2026-08-18`.

use agentd_schema::capture::Purpose;
use agentd_schema::ids::UserProfileId;
use agentd_schema::store::{UserProfileCursor, UserProfileOrder, UserProfileQuery, UserProfileRow};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::body::{self, as_object, kind, tag};
use super::query::{Query, cursor_page, decode_cursor, rfc3339};
use crate::AppState;
use crate::admission::{Tenant, beta};
use crate::domain::consent_links::LinkKind;
use crate::domain::user_profiles::{self, DEFAULT_PAGE, DetailsInput, Dialect, Field, MAX_PAGE, ProfileInput};
use crate::error::{ApiError, ApiResult};

const FIELDS: &[&str] =
    &["access_type", "external_id", "external_user_details", "external_user_onboarded_at", "metadata", "name"];
/// `enforcement_status` values; agentd opens no enforcement action, so every profile is
/// `unrestricted`.
const ENFORCEMENT_STATUSES: &[&str] = &["unrestricted", "pending", "restricted", "banned"];
const DETAILS_FIELDS: &[&str] =
    &["account_status", "country", "email_hash", "entity_type", "name_hash", "onboarded_at", "reference_id"];

/// The shape a request's `anthropic-beta` selects: `user-profiles-2026-08-18` (what the
/// SDK's beta client sends) and `user-profiles-2026-03-24` the legacy ones,
/// `user-profiles-2026-09-04` the current one with `trust_grants`, none (the SDK's GA
/// client) the current one with programs and enforcement.
pub fn dialect(headers: &HeaderMap) -> Dialect {
    if beta::has(headers, beta::USER_PROFILES) {
        Dialect::Legacy20260818
    } else if beta::has(headers, beta::USER_PROFILES_2026_03_24) {
        Dialect::Legacy20260324
    } else if beta::has(headers, beta::USER_PROFILES_2026_09_04) {
        Dialect::Beta20260904
    } else {
        Dialect::Current
    }
}

/// The profile's consent as agentd serves it: per purpose `{"status","updated_at"}`, or
/// `null` while unanswered.
pub fn render_consent(row: &UserProfileRow) -> Value {
    let mut out = Map::new();
    for purpose in Purpose::ALL {
        let answer = row.consent.get(purpose).map(|granted| {
            json!({
                "status": if granted { "granted" } else { "withdrawn" },
                "updated_at": row.consent_at_ms.get(purpose).map(rfc3339),
            })
        });
        out.insert(purpose.as_str().to_owned(), answer.unwrap_or(Value::Null));
    }
    Value::Object(out)
}

/// `BetaUserProfile` (or, without a selector, `UserProfile`) in `dialect`'s shape.
/// agentd takes part in no Anthropic program and opens no enforcement action: its
/// `trust_grants` are `{}`, its `programs` `null`, its enforcement `unrestricted`.
pub fn render(row: &UserProfileRow, dialect: Dialect) -> Value {
    let f = &row.fields;
    let e = &f.external;
    let mut out = json!({
        "type": "user_profile",
        "id": row.id,
        "name": f.name,
        "metadata": f.metadata,
        "consent": render_consent(row),
        "created_at": rfc3339(row.created_at_ms),
        "updated_at": rfc3339(row.updated_at_ms),
    });
    if dialect.serves_programs() {
        out["programs"] = json!({ "cyber": null, "efs": null });
        out["enforcement_status"] = json!("unrestricted");
        out["enforcement_actions"] = json!([]);
    } else {
        out["trust_grants"] = json!({});
    }
    if dialect.serves_access_type() {
        out["access_type"] = json!(f.access_type.as_str());
    }
    if dialect.legacy() {
        out["external_id"] = json!(e.reference_id);
    } else {
        out["external_user_details"] = json!({
            "account_status": e.account_status.map(|s| s.as_str()),
            "country": e.country,
            "email_hash": e.email_hash,
            "entity_type": e.entity_type.map(|t| t.as_str()),
            "name_hash": e.name_hash,
            "onboarded_at": e.onboarded_at_ms.map(rfc3339),
            "reference_id": e.reference_id,
        });
    }
    if dialect.takes_onboarded_at() {
        out["external_user_onboarded_at"] = json!(e.onboarded_at_ms.map(rfc3339));
    }
    out
}

/// A text field: absent, `null`, or a string.
fn text(map: &Map<String, Value>, key: &str, path: &str) -> ApiResult<Field<String>> {
    match map.get(key) {
        None => Ok(Field::Absent),
        Some(Value::Null) => Ok(Field::Null),
        Some(Value::String(text)) => Ok(Field::Value(text.clone())),
        Some(other) => {
            Err(ApiError::invalid(format!("{}: expected a string, got {}", body::join(path, key), kind(other))))
        }
    }
}

fn details(value: Option<&Value>) -> ApiResult<Field<DetailsInput>> {
    let path = "external_user_details";
    let map = match value {
        None => return Ok(Field::Absent),
        Some(Value::Null) => return Ok(Field::Null),
        Some(value) => as_object(value, path)?,
    };
    body::only_known(map, DETAILS_FIELDS, path)?;
    Ok(Field::Value(DetailsInput {
        account_status: text(map, "account_status", path)?,
        country: text(map, "country", path)?,
        email_hash: text(map, "email_hash", path)?,
        entity_type: text(map, "entity_type", path)?,
        name_hash: text(map, "name_hash", path)?,
        onboarded_at: text(map, "onboarded_at", path)?,
        reference_id: text(map, "reference_id", path)?,
    }))
}

/// A create or update body as sent.
fn input(bytes: &Bytes, headers: &HeaderMap) -> ApiResult<ProfileInput> {
    let map = body::object(bytes)?;
    body::only_known(&map, FIELDS, "")?;
    let metadata = match map.get("metadata") {
        None => Field::Absent,
        Some(Value::Null) => Field::Null,
        Some(value) => Field::Value(as_object(value, "metadata")?.clone()),
    };
    Ok(ProfileInput {
        dialect: dialect(headers),
        name: text(&map, "name", "")?,
        access_type: text(&map, "access_type", "")?,
        external_id: text(&map, "external_id", "")?,
        external_user_onboarded_at: text(&map, "external_user_onboarded_at", "")?,
        external_user_details: details(map.get("external_user_details"))?,
        metadata,
    })
}

/// `POST /v1/user_profiles`.
pub async fn create(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let input = input(&bytes, &headers)?;
    let dialect = input.dialect;
    Ok(Json(render(&user_profiles::create(&state, &tenant, input).await?, dialect)))
}

/// `GET /v1/user_profiles/{user_profile_id}`.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<UserProfileId>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    Ok(Json(render(&user_profiles::get(&state, &tenant, &id).await?, dialect(&headers))))
}

/// `POST /v1/user_profiles/{user_profile_id}`: each sent field replaces the stored one,
/// `metadata` merges.
pub async fn update(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<UserProfileId>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let input = input(&bytes, &headers)?;
    let dialect = input.dialect;
    Ok(Json(render(&user_profiles::update(&state, &tenant, &id, input).await?, dialect)))
}

/// `DELETE /v1/user_profiles/{user_profile_id}` → `BetaDeletedUserProfile`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<UserProfileId>,
) -> ApiResult<Json<Value>> {
    let deleted = user_profiles::delete(&state, &tenant, &id).await?;
    Ok(Json(json!({ "id": deleted.id, "type": "user_profile_deleted" })))
}

/// A page cursor: the listing's order and where it stopped, so a cursor of another
/// order is refused rather than misread.
fn cursor_key(order_by: UserProfileOrder, descending: bool, row: &UserProfileRow) -> String {
    json!([order_name(order_by), if descending { "desc" } else { "asc" }, row.id, row.name_key()]).to_string()
}

fn order_name(order_by: UserProfileOrder) -> &'static str {
    match order_by {
        UserProfileOrder::CreatedAt => "created_at",
        UserProfileOrder::Name => "name",
    }
}

fn parse_cursor(page: &str, order_by: UserProfileOrder, descending: bool) -> ApiResult<UserProfileCursor> {
    let invalid = || ApiError::invalid(format!("page: invalid or expired cursor {page:?}"));
    let text = decode_cursor(page)?;
    let parts: Vec<Value> = serde_json::from_str(&text).map_err(|_| invalid())?;
    let [order, direction, Value::String(id), name_key] = parts.as_slice() else { return Err(invalid()) };
    let name_key = match name_key {
        Value::Null => None,
        Value::String(key) => Some(key.clone()),
        _ => return Err(invalid()),
    };
    if order != order_name(order_by) || direction != if descending { "desc" } else { "asc" } {
        return Err(ApiError::invalid(
            "page: the cursor belongs to a listing in another order; send the same order and order_by",
        ));
    }
    Ok(UserProfileCursor { id: id.clone(), name_key })
}

/// `GET /v1/user_profiles`: `order` (asc|desc, default desc), `order_by` (created_at or
/// name; nameless profiles last), `limit` 1–100 (default 20), cursor pages, and the GA
/// client's `enforcement_status[]` (every agentd profile is `unrestricted`).
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let descending = query.descending(true)?;
    let order_by = match query.string("order_by") {
        None | Some("created_at") => UserProfileOrder::CreatedAt,
        Some("name") => UserProfileOrder::Name,
        Some(other) => {
            return Err(ApiError::invalid(format!("order_by: expected created_at or name, got {other:?}")));
        }
    };
    let after = query.string("page").map(|page| parse_cursor(page, order_by, descending)).transpose()?;
    let enforcement = query.list("enforcement_status");
    if let Some(bad) = enforcement.iter().find(|s| !ENFORCEMENT_STATUSES.contains(s)) {
        return Err(ApiError::invalid(format!(
            "enforcement_status: expected {}, got {bad:?}",
            ENFORCEMENT_STATUSES.join(", ")
        )));
    }
    if !enforcement.is_empty() && !enforcement.contains(&"unrestricted") {
        return Ok(Json(json!({ "data": [], "next_page": null })));
    }
    let profile_query = UserProfileQuery { order_by, descending, after, limit: limit + 1 };
    let rows = user_profiles::list(&state, &tenant, &profile_query).await?;
    let dialect = dialect(&headers);
    Ok(Json(cursor_page(rows, limit, |row| cursor_key(order_by, descending, row), |row| render(row, dialect))))
}

/// The URL of the consent page for a signed link.
fn link_json(state: &AppState, headers: &HeaderMap, kind: &str, link: user_profiles::SignedLink) -> Value {
    let base = crate::adapters::a2a::card::base_url(state, headers);
    json!({
        "type": kind,
        "url": format!("{base}{}", crate::consent_page::path(&link.token)),
        "expires_at": rfc3339(link.expires_at_ms),
    })
}

/// `POST /v1/user_profiles/{user_profile_id}/enrollment_url` (empty body) →
/// `BetaUserProfileEnrollmentURL`.
pub async fn enrollment_url(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<UserProfileId>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    body::only_known(&body::object(&bytes)?, &[], "")?;
    let link = user_profiles::link(&state, &tenant, &id, LinkKind::Enrollment).await?;
    Ok(Json(link_json(&state, &headers, "enrollment_url", link)))
}

/// `POST /v1/user_profiles/{user_profile_id}/action_urls` with
/// `{"action":{"type":"enroll_end_user"}}` → `BetaUserProfileActionURL`.
pub async fn action_url(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(id): Path<UserProfileId>,
    headers: HeaderMap,
    bytes: Bytes,
) -> ApiResult<Json<Value>> {
    let map = body::object(&bytes)?;
    body::only_known(&map, &["action"], "")?;
    let action = match map.get("action") {
        None | Some(Value::Null) => return Err(ApiError::invalid("action: required")),
        Some(value) => as_object(value, "action")?,
    };
    body::only_known(action, &["type"], "action")?;
    let kind = match tag(action, "action")? {
        "enroll_end_user" => LinkKind::EnrollEndUser,
        other => return Err(ApiError::invalid(format!("action.type: expected enroll_end_user, got {other:?}"))),
    };
    let link = user_profiles::link(&state, &tenant, &id, kind).await?;
    Ok(Json(link_json(&state, &headers, "user_profile_action_url", link)))
}
