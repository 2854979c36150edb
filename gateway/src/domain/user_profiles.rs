//! User profiles (docs/api/user-profiles.md): the entities a platform serves through the
//! API, what the platform states about them, and the consent each gives on agentd's
//! consent page. Every rule is here, once: the 255-character fields, metadata (at most 16
//! keys of 1–64 characters, values of 1–512; `""` removes a key on update), the fields
//! that once set cannot be cleared, timestamps (complete RFC 3339, at most a minute in the
//! future), `country` and the closed sets, which fields each beta selector takes
//! ([`Dialect`]); a deleted profile is a tombstone every operation answers 404 for.
//!
//! Consent: [`consent_bound`] is the highest capture level a profile's consent allows
//! (`agentd_schema::capture`); [`link`] signs the URL of the consent page
//! ([`super::consent_links`]) and [`open_link`] / [`answer_link`] are what the page does
//! with it.
//!
//! An update reads the profile, applies the change and writes it only at the revision it
//! read (`UserProfileStore::update_user_profile`), re-reading after a concurrent change,
//! so a metadata merge never loses another writer's keys.

use agentd_schema::StoreError;
use agentd_schema::capture::{Level, Purpose};
use agentd_schema::ids::UserProfileId;
use agentd_schema::store::{
    AccessType, AccountStatus, EntityType, ExternalUserDetails, NewUserProfile, UserProfileFields, UserProfileQuery,
    UserProfileRow,
};
use serde_json::{Map, Value};

use super::consent_links::{self, LinkClaims, LinkError, LinkKind};
use super::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::managed::query::{now_ms, rfc3339};

/// `name`, `external_id` and the text fields of `external_user_details`, in characters.
pub const MAX_TEXT_CHARS: usize = 255;
/// Metadata keys per profile.
pub const MAX_METADATA_KEYS: usize = 16;
/// A metadata key, in characters.
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// A metadata value, in characters.
pub const MAX_METADATA_VALUE_CHARS: usize = 512;
/// How far in the future a timestamp may be.
pub const MAX_FUTURE_MS: i64 = 60_000;
/// Profiles per page by default and at most.
pub const DEFAULT_PAGE: i64 = 20;
/// See [`DEFAULT_PAGE`].
pub const MAX_PAGE: i64 = 100;
/// How often an update re-reads and retries after a concurrent change.
const UPDATE_ATTEMPTS: usize = 5;

/// Which fields a request may send and a response serves, by its `anthropic-beta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// No selector (the SDK's GA client): `external_user_details`, and the program and
    /// enforcement fields.
    Current,
    /// `user-profiles-2026-09-04`: `external_user_details`, and `trust_grants` instead of
    /// the program and enforcement fields.
    Beta20260904,
    /// `user-profiles-2026-03-24`: top-level `external_id`; no `access_type` served.
    Legacy20260324,
    /// `user-profiles-2026-08-18` (the SDK's beta client): top-level `external_id` and
    /// `external_user_onboarded_at`.
    Legacy20260818,
}

impl Dialect {
    /// Whether the top-level `external_id` is taken and served (instead of
    /// `external_user_details`).
    pub fn legacy(self) -> bool {
        matches!(self, Dialect::Legacy20260324 | Dialect::Legacy20260818)
    }

    /// Whether `programs`, `enforcement_status` and `enforcement_actions` are served
    /// (instead of `trust_grants`).
    pub fn serves_programs(self) -> bool {
        self == Dialect::Current
    }

    /// Whether the top-level `external_user_onboarded_at` is taken and served.
    pub fn takes_onboarded_at(self) -> bool {
        self == Dialect::Legacy20260818
    }

    /// Whether `access_type` is served.
    pub fn serves_access_type(self) -> bool {
        self != Dialect::Legacy20260324
    }
}

/// One field of a request body: absent, `null`, or a value.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Field<T> {
    /// Not sent: keep what is stored.
    #[default]
    Absent,
    /// `null`.
    Null,
    /// A value.
    Value(T),
}

/// `external_user_details` as sent (each field's text, checked here).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DetailsInput {
    /// `account_status`.
    pub account_status: Field<String>,
    /// `country`.
    pub country: Field<String>,
    /// `email_hash`.
    pub email_hash: Field<String>,
    /// `entity_type`.
    pub entity_type: Field<String>,
    /// `name_hash`.
    pub name_hash: Field<String>,
    /// `onboarded_at`.
    pub onboarded_at: Field<String>,
    /// `reference_id`.
    pub reference_id: Field<String>,
}

/// A create or update body, each field as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileInput {
    /// The request's selector.
    pub dialect: Dialect,
    /// `name`.
    pub name: Field<String>,
    /// `access_type`.
    pub access_type: Field<String>,
    /// `external_id` (legacy selectors only).
    pub external_id: Field<String>,
    /// `external_user_onboarded_at` (`user-profiles-2026-08-18` only).
    pub external_user_onboarded_at: Field<String>,
    /// `external_user_details` (no legacy selector only).
    pub external_user_details: Field<DetailsInput>,
    /// `metadata`: the object as sent (a patch on update).
    pub metadata: Field<Map<String, Value>>,
}

impl ProfileInput {
    /// A body that sends nothing, under `dialect`.
    pub fn empty(dialect: Dialect) -> Self {
        Self {
            dialect,
            name: Field::Absent,
            access_type: Field::Absent,
            external_id: Field::Absent,
            external_user_onboarded_at: Field::Absent,
            external_user_details: Field::Absent,
            metadata: Field::Absent,
        }
    }
}

/// A signed consent page link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedLink {
    /// The token (the last segment of the page's URL).
    pub token: String,
    /// When it stops working, epoch ms.
    pub expires_at_ms: i64,
}

fn not_found(id: &str) -> DomainError {
    DomainError::NotFound(format!("user profile not found: {id}"))
}

/// A text field of 1 to 255 characters.
fn text(path: &str, value: String) -> DomainResult<String> {
    let count = value.chars().count();
    if count == 0 || count > MAX_TEXT_CHARS {
        return Err(DomainError::invalid(format!("{path}: must be 1 to {MAX_TEXT_CHARS} characters, got {count}")));
    }
    Ok(value)
}

/// A complete RFC 3339 timestamp (date, time and offset) at most [`MAX_FUTURE_MS`] after
/// now, as epoch ms.
pub fn timestamp(path: &str, value: &str) -> DomainResult<i64> {
    let parsed = chrono::DateTime::parse_from_rfc3339(value).map_err(|_| {
        DomainError::invalid(format!(
            "{path}: expected a complete RFC 3339 timestamp with a time zone, such as 2026-01-01T00:00:00Z, got {:?}",
            value.chars().take(64).collect::<String>()
        ))
    })?;
    let ms = parsed.timestamp_millis();
    if ms > now_ms() + MAX_FUTURE_MS {
        return Err(DomainError::invalid(format!("{path}: must be no more than 1 minute in the future, got {value}")));
    }
    Ok(ms)
}

/// One of a closed set, by its wire name.
fn one_of<T: Copy>(path: &str, value: &str, all: &[T], name: fn(T) -> &'static str) -> DomainResult<T> {
    all.iter().copied().find(|v| name(*v) == value).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|v| name(*v)).collect();
        DomainError::invalid(format!("{path}: expected one of {}, got {value:?}", names.join(", ")))
    })
}

/// `country`: two uppercase ASCII letters (the form of ISO 3166-1 alpha-2).
fn country(path: &str, value: String) -> DomainResult<String> {
    if value.len() == 2 && value.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(value)
    } else {
        Err(DomainError::invalid(format!(
            "{path}: expected an ISO 3166-1 alpha-2 code in upper case, such as US, got {value:?}"
        )))
    }
}

fn metadata_key(key: &str) -> DomainResult<()> {
    let count = key.chars().count();
    if count == 0 || count > MAX_METADATA_KEY_CHARS {
        let shown: String = key.chars().take(MAX_METADATA_KEY_CHARS).collect();
        return Err(DomainError::invalid_with_code(
            "invalid_metadata",
            format!("metadata: key {shown:?} must be 1 to {MAX_METADATA_KEY_CHARS} characters"),
        ));
    }
    Ok(())
}

/// A metadata value: a string of at most 512 characters (`""` only where `allow_empty`).
fn metadata_value<'a>(key: &str, value: &'a Value, allow_empty: bool) -> DomainResult<&'a str> {
    let Value::String(text) = value else {
        return Err(DomainError::invalid_with_code("invalid_metadata", format!("metadata.{key}: expected a string")));
    };
    if text.is_empty() && !allow_empty {
        return Err(DomainError::invalid_with_code(
            "invalid_metadata",
            format!("metadata.{key}: values must be non-empty strings"),
        ));
    }
    if text.chars().count() > MAX_METADATA_VALUE_CHARS {
        return Err(DomainError::invalid_with_code(
            "invalid_metadata",
            format!("metadata.{key}: at most {MAX_METADATA_VALUE_CHARS} characters"),
        ));
    }
    Ok(text)
}

fn metadata_count(map: &Map<String, Value>) -> DomainResult<()> {
    if map.len() > MAX_METADATA_KEYS {
        return Err(DomainError::invalid_with_code(
            "invalid_metadata",
            format!("metadata: at most {MAX_METADATA_KEYS} keys, got {}", map.len()),
        ));
    }
    Ok(())
}

/// Create: every value a non-empty string.
fn new_metadata(map: Map<String, Value>) -> DomainResult<Value> {
    metadata_count(&map)?;
    for (key, value) in &map {
        metadata_key(key)?;
        metadata_value(key, value, false)?;
    }
    Ok(Value::Object(map))
}

/// Update: the patch merged into what is stored (`""` removes a key), then counted.
fn merge_metadata(stored: &Value, patch: &Map<String, Value>) -> DomainResult<Value> {
    let mut merged = stored.as_object().cloned().unwrap_or_default();
    for (key, value) in patch {
        metadata_key(key)?;
        if metadata_value(key, value, true)?.is_empty() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    metadata_count(&merged)?;
    Ok(Value::Object(merged))
}

/// A checked field that, once set, cannot be cleared.
#[derive(Debug, Clone)]
struct Settable<T> {
    path: &'static str,
    field: Field<T>,
}

impl<T: Clone> Settable<T> {
    fn absent(path: &'static str) -> Self {
        Self { path, field: Field::Absent }
    }

    /// Checks the sent text with `check`.
    fn parse(
        path: &'static str,
        sent: Field<String>,
        check: impl Fn(&str, String) -> DomainResult<T>,
    ) -> DomainResult<Self> {
        let field = match sent {
            Field::Absent => Field::Absent,
            Field::Null => Field::Null,
            Field::Value(text) => Field::Value(check(path, text)?),
        };
        Ok(Self { path, field })
    }

    /// The value after the change: `null` clears only what was never set.
    fn apply(&self, stored: &Option<T>) -> DomainResult<Option<T>> {
        match &self.field {
            Field::Absent => Ok(stored.clone()),
            Field::Null if stored.is_some() => Err(DomainError::invalid(format!(
                "{}: once set it cannot be cleared, and null is refused; omit it to keep the stored value",
                self.path
            ))),
            Field::Null => Ok(None),
            Field::Value(value) => Ok(Some(value.clone())),
        }
    }
}

/// A body checked field by field, before it meets what is stored.
#[derive(Debug, Clone)]
struct Change {
    name: Field<String>,
    access_type: Field<AccessType>,
    reference_id: Settable<String>,
    onboarded_at_ms: Settable<i64>,
    account_status: Settable<AccountStatus>,
    country: Settable<String>,
    email_hash: Settable<String>,
    entity_type: Settable<EntityType>,
    name_hash: Settable<String>,
    metadata: Field<Map<String, Value>>,
}

/// Refuses a field the request's selector does not take.
fn refuse_unless<T>(allowed: bool, field: &Field<T>, message: &str) -> DomainResult<()> {
    if allowed || matches!(field, Field::Absent) { Ok(()) } else { Err(DomainError::invalid(message)) }
}

fn check(input: ProfileInput) -> DomainResult<Change> {
    let dialect = input.dialect;
    refuse_unless(
        dialect.legacy(),
        &input.external_id,
        "external_id: accepted only under the user-profiles-2026-03-24 and user-profiles-2026-08-18 betas; send \
         external_user_details.reference_id",
    )?;
    refuse_unless(
        dialect.takes_onboarded_at(),
        &input.external_user_onboarded_at,
        "external_user_onboarded_at: accepted only under the user-profiles-2026-08-18 beta; without a legacy beta, \
         send external_user_details.onboarded_at",
    )?;
    refuse_unless(
        !dialect.legacy(),
        &input.external_user_details,
        "external_user_details: not accepted under the legacy user-profiles-2026-03-24 and user-profiles-2026-08-18 \
         betas, which take the top-level external_id (and external_user_onboarded_at)",
    )?;
    let name = match input.name {
        Field::Value(name) => Field::Value(text("name", name)?),
        other => other,
    };
    let access_type = match input.access_type {
        Field::Value(value) => Field::Value(one_of("access_type", &value, AccessType::ALL, AccessType::as_str)?),
        Field::Null => Field::Null,
        Field::Absent => Field::Absent,
    };
    let stamp = |path: &str, value: String| timestamp(path, &value);
    let mut change = Change {
        name,
        access_type,
        reference_id: Settable::parse("external_id", input.external_id, text)?,
        onboarded_at_ms: Settable::parse("external_user_onboarded_at", input.external_user_onboarded_at, stamp)?,
        account_status: Settable::absent("external_user_details.account_status"),
        country: Settable::absent("external_user_details.country"),
        email_hash: Settable::absent("external_user_details.email_hash"),
        entity_type: Settable::absent("external_user_details.entity_type"),
        name_hash: Settable::absent("external_user_details.name_hash"),
        metadata: input.metadata,
    };
    let details = match input.external_user_details {
        Field::Absent => None,
        // `null`: every detail cleared, which only what was never set allows.
        Field::Null => Some(DetailsInput {
            account_status: Field::Null,
            country: Field::Null,
            email_hash: Field::Null,
            entity_type: Field::Null,
            name_hash: Field::Null,
            onboarded_at: Field::Null,
            reference_id: Field::Null,
        }),
        Field::Value(details) => Some(details),
    };
    if let Some(d) = details {
        change.reference_id = Settable::parse("external_user_details.reference_id", d.reference_id, text)?;
        change.onboarded_at_ms = Settable::parse("external_user_details.onboarded_at", d.onboarded_at, stamp)?;
        change.account_status =
            Settable::parse("external_user_details.account_status", d.account_status, |path, value| {
                one_of(path, &value, AccountStatus::ALL, AccountStatus::as_str)
            })?;
        change.country = Settable::parse("external_user_details.country", d.country, country)?;
        change.email_hash = Settable::parse("external_user_details.email_hash", d.email_hash, text)?;
        change.entity_type = Settable::parse("external_user_details.entity_type", d.entity_type, |path, value| {
            one_of(path, &value, EntityType::ALL, EntityType::as_str)
        })?;
        change.name_hash = Settable::parse("external_user_details.name_hash", d.name_hash, text)?;
    }
    Ok(change)
}

impl Change {
    /// The details after the change.
    fn external(&self, stored: &ExternalUserDetails) -> DomainResult<ExternalUserDetails> {
        Ok(ExternalUserDetails {
            reference_id: self.reference_id.apply(&stored.reference_id)?,
            onboarded_at_ms: self.onboarded_at_ms.apply(&stored.onboarded_at_ms)?,
            account_status: self.account_status.apply(&stored.account_status)?,
            country: self.country.apply(&stored.country)?,
            email_hash: self.email_hash.apply(&stored.email_hash)?,
            entity_type: self.entity_type.apply(&stored.entity_type)?,
            name_hash: self.name_hash.apply(&stored.name_hash)?,
        })
    }

    /// The fields after the change (an update: `stored` is what was read).
    fn applied(&self, stored: &UserProfileFields) -> DomainResult<UserProfileFields> {
        let name = match &self.name {
            Field::Absent => stored.name.clone(),
            Field::Null => None,
            Field::Value(name) => Some(name.clone()),
        };
        let access_type = match self.access_type {
            Field::Absent => stored.access_type,
            Field::Null => {
                return Err(DomainError::invalid(
                    "access_type: cannot be cleared, and null is refused; omit it to keep the stored value",
                ));
            }
            Field::Value(access_type) => access_type,
        };
        let metadata = match &self.metadata {
            Field::Absent => stored.metadata.clone(),
            Field::Null => {
                return Err(DomainError::invalid_with_code(
                    "invalid_metadata",
                    "metadata: expected an object; set a key to \"\" to remove it",
                ));
            }
            Field::Value(patch) => merge_metadata(&stored.metadata, patch)?,
        };
        Ok(UserProfileFields { name, access_type, external: self.external(&stored.external)?, metadata })
    }

    /// The fields of a new profile.
    fn created(&self) -> DomainResult<UserProfileFields> {
        let name = match &self.name {
            Field::Value(name) => Some(name.clone()),
            Field::Absent | Field::Null => None,
        };
        let access_type = match self.access_type {
            Field::Value(access_type) => access_type,
            Field::Absent | Field::Null => AccessType::Application,
        };
        let metadata = match &self.metadata {
            Field::Value(map) => new_metadata(map.clone())?,
            Field::Absent | Field::Null => Value::Object(Map::new()),
        };
        Ok(UserProfileFields { name, access_type, external: self.external(&ExternalUserDetails::default())?, metadata })
    }
}

/// Creates a profile.
pub async fn create(state: &AppState, tenant: &Tenant, input: ProfileInput) -> DomainResult<UserProfileRow> {
    let fields = check(input)?.created()?;
    Ok(state
        .backends
        .store
        .insert_user_profile(NewUserProfile {
            id: agentd_schema::ids::new_id("uprof"),
            workspace_id: tenant.workspace_id.clone(),
            organization_id: tenant.organization_id.clone(),
            fields,
        })
        .await?)
}

/// A live profile of the caller's workspace (a deleted one is 404).
pub async fn get(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<UserProfileRow> {
    live(state, &tenant.workspace_id, id).await
}

async fn live(state: &AppState, workspace_id: &str, id: &str) -> DomainResult<UserProfileRow> {
    match state.backends.store.get_user_profile(workspace_id, id).await? {
        Some(row) if row.deleted_at_ms.is_none() => Ok(row),
        _ => Err(not_found(id)),
    }
}

/// A page of live profiles (`limit` is the caller's, 1 to [`MAX_PAGE`], plus one).
pub async fn list(state: &AppState, tenant: &Tenant, query: &UserProfileQuery) -> DomainResult<Vec<UserProfileRow>> {
    Ok(state.backends.store.list_user_profiles(&tenant.workspace_id, query).await?)
}

/// Updates a profile: each sent field replaces the stored one, `metadata` is merged; a
/// change that changes nothing writes nothing.
pub async fn update(state: &AppState, tenant: &Tenant, id: &str, input: ProfileInput) -> DomainResult<UserProfileRow> {
    let change = check(input)?;
    let store = state.backends.store.as_ref();
    for _ in 0..UPDATE_ATTEMPTS {
        let current = get(state, tenant, id).await?;
        let fields = change.applied(&current.fields)?;
        if fields == current.fields {
            return Ok(current);
        }
        match store.update_user_profile(&tenant.workspace_id, id, current.revision, fields).await {
            Ok(Some(updated)) => return Ok(updated),
            Ok(None) => return Err(not_found(id)),
            // Changed meanwhile: read it again and apply the change to that.
            Err(StoreError::Conflict(_)) => continue,
            Err(other) => return Err(other.into()),
        }
    }
    Err(DomainError::Conflict(format!("user profile {id} kept changing while it was being updated; retry")))
}

/// Deletes a profile (a tombstone: 404 from then on, to every operation).
pub async fn delete(state: &AppState, tenant: &Tenant, id: &str) -> DomainResult<UserProfileRow> {
    state.backends.store.delete_user_profile(&tenant.workspace_id, id).await?.ok_or_else(|| not_found(id))
}

/// The highest capture level the profile's consent allows (`Consent::bound`): `full`
/// with `conversation_content` granted, `off` with `activity_record` withdrawn,
/// `structured` otherwise. An unknown or deleted profile is `NotFound`.
pub async fn consent_bound(state: &AppState, tenant: &Tenant, id: &UserProfileId) -> DomainResult<Level> {
    Ok(get(state, tenant, id).await?.consent.bound())
}

/// Signs a consent page link for a live profile, valid for 15 minutes.
pub async fn link(state: &AppState, tenant: &Tenant, id: &str, kind: LinkKind) -> DomainResult<SignedLink> {
    let profile = get(state, tenant, id).await?;
    let claims = LinkClaims {
        workspace_id: profile.workspace_id,
        profile_id: profile.id,
        kind,
        expires_at_ms: now_ms() + consent_links::ttl_ms(),
    };
    let token = consent_links::sign(&state.secrets.derive_key(consent_links::KEY_LABEL), &claims);
    Ok(SignedLink { token, expires_at_ms: claims.expires_at_ms })
}

/// Verifies a link: an altered or foreign token is `Invalid`, an expired one `Gone`, one
/// whose profile is deleted `NotFound`.
pub async fn open_link(state: &AppState, token: &str) -> DomainResult<(LinkClaims, UserProfileRow)> {
    let keys = state.secrets.derived_keys(consent_links::KEY_LABEL);
    let claims = consent_links::verify(&keys, token, now_ms()).map_err(|error| match error {
        LinkError::Invalid => DomainError::invalid("link: this link is not valid; ask for a new one"),
        LinkError::Expired { at_ms } => {
            DomainError::Gone(format!("link: this link expired at {}; ask for a new one", rfc3339(at_ms)))
        }
    })?;
    let profile = live(state, &claims.workspace_id, &claims.profile_id).await?;
    Ok((claims, profile))
}

/// Records the answer the holder of a valid link gives for `purpose` (refused as
/// [`open_link`] refuses, changing nothing).
pub async fn answer_link(
    state: &AppState,
    token: &str,
    purpose: Purpose,
    granted: bool,
) -> DomainResult<(LinkClaims, UserProfileRow)> {
    let (claims, _) = open_link(state, token).await?;
    let profile = state
        .backends
        .store
        .set_user_profile_consent(&claims.workspace_id, &claims.profile_id, purpose, granted)
        .await?
        .ok_or_else(|| not_found(&claims.profile_id))?;
    tracing::info!(profile = %profile.id, purpose = purpose.as_str(), granted, "consent recorded");
    Ok((claims, profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(dialect: Dialect) -> ProfileInput {
        ProfileInput::empty(dialect)
    }

    fn message(error: DomainError) -> String {
        error.to_string()
    }

    #[test]
    fn each_selector_takes_its_own_fields() {
        let mut legacy = input(Dialect::Current);
        legacy.external_id = Field::Value("u-1".into());
        assert!(message(check(legacy).unwrap_err()).starts_with("external_id:"));
        let mut details = input(Dialect::Legacy20260818);
        details.external_user_details = Field::Value(DetailsInput::default());
        assert!(message(check(details).unwrap_err()).starts_with("external_user_details:"));
        let mut onboarded = input(Dialect::Legacy20260324);
        onboarded.external_user_onboarded_at = Field::Value("2024-01-01T00:00:00Z".into());
        assert!(message(check(onboarded).unwrap_err()).starts_with("external_user_onboarded_at:"));
        let mut fine = input(Dialect::Legacy20260818);
        fine.external_id = Field::Value("u-1".into());
        fine.external_user_onboarded_at = Field::Value("2024-01-01T00:00:00+02:00".into());
        let created = check(fine).unwrap().created().unwrap();
        assert_eq!(created.external.reference_id.as_deref(), Some("u-1"));
        assert_eq!(created.external.onboarded_at_ms, Some(1_704_060_000_000));
        assert_eq!(created.access_type, AccessType::Application, "the default");
    }

    #[test]
    fn timestamps_are_complete_and_not_far_in_the_future() {
        assert!(timestamp("t", "2024-01-01T00:00:00Z").is_ok());
        assert!(timestamp("t", "2024-01-01T00:00:00.123456+05:30").is_ok());
        for bad in ["2024-01-01", "2024-01-01T00:00:00", "2024-01-01T00:00Z", "yesterday", ""] {
            assert!(timestamp("t", bad).is_err(), "{bad}");
        }
        let soon = rfc3339(now_ms() + 30_000);
        assert!(timestamp("t", &soon).is_ok(), "within a minute");
        let later = rfc3339(now_ms() + 5 * 60_000);
        assert!(message(timestamp("t", &later).unwrap_err()).contains("1 minute in the future"));
    }

    #[test]
    fn details_are_checked_and_once_set_cannot_be_cleared() {
        let mut first = input(Dialect::Current);
        first.external_user_details = Field::Value(DetailsInput {
            country: Field::Value("US".into()),
            entity_type: Field::Value("non_profit".into()),
            ..DetailsInput::default()
        });
        let stored = check(first).unwrap().created().unwrap();
        assert_eq!(stored.external.entity_type, Some(EntityType::NonProfit));
        for (field, bad) in [("country", "us"), ("country", "USA"), ("entity_type", "person"), ("email_hash", "")] {
            let mut details = DetailsInput::default();
            let value = Field::Value(bad.to_owned());
            match field {
                "country" => details.country = value,
                "entity_type" => details.entity_type = value,
                _ => details.email_hash = value,
            }
            let mut body = input(Dialect::Current);
            body.external_user_details = Field::Value(details);
            let error = message(check(body).unwrap_err());
            assert!(error.starts_with(&format!("external_user_details.{field}:")), "{error}");
        }
        // `null` on what is set refuses; on what was never set it is nothing.
        let mut clear = input(Dialect::Current);
        clear.external_user_details = Field::Value(DetailsInput { country: Field::Null, ..DetailsInput::default() });
        let error = message(check(clear).unwrap().applied(&stored).unwrap_err());
        assert!(error.starts_with("external_user_details.country: once set"), "{error}");
        let mut unset = input(Dialect::Current);
        unset.external_user_details = Field::Value(DetailsInput { name_hash: Field::Null, ..DetailsInput::default() });
        assert_eq!(check(unset).unwrap().applied(&stored).unwrap(), stored);
        let mut whole = input(Dialect::Current);
        whole.external_user_details = Field::Null;
        assert!(check(whole).unwrap().applied(&stored).is_err(), "null details clear what is set");
        let mut access = input(Dialect::Current);
        access.access_type = Field::Null;
        assert!(message(check(access).unwrap().applied(&stored).unwrap_err()).starts_with("access_type:"));
    }

    #[test]
    fn metadata_merges_and_an_empty_value_removes_a_key() {
        let stored = serde_json::json!({"a": "1", "b": "2"});
        let patch: Map<String, Value> = serde_json::from_value(serde_json::json!({"a": "", "c": "3"})).unwrap();
        assert_eq!(merge_metadata(&stored, &patch).unwrap(), serde_json::json!({"b": "2", "c": "3"}));
        let empty: Map<String, Value> = serde_json::from_value(serde_json::json!({"a": ""})).unwrap();
        assert!(new_metadata(empty).is_err(), "values are non-empty on create");
        let many: Map<String, Value> = (0..17).map(|i| (format!("k{i}"), Value::from("v"))).collect();
        assert!(new_metadata(many.clone()).is_err());
        let full: Value = Value::Object((0..16).map(|i| (format!("k{i}"), Value::from("v"))).collect());
        let one_more: Map<String, Value> = serde_json::from_value(serde_json::json!({"x": "y"})).unwrap();
        assert!(merge_metadata(&full, &one_more).is_err(), "at most 16 keys after the merge");
        let swap: Map<String, Value> = serde_json::from_value(serde_json::json!({"k0": "", "x": "y"})).unwrap();
        assert!(merge_metadata(&full, &swap).is_ok(), "a removal makes room");
        let long: Map<String, Value> = serde_json::from_value(serde_json::json!({"k": "v".repeat(513)})).unwrap();
        assert!(merge_metadata(&full, &long).is_err());
        let number: Map<String, Value> = serde_json::from_value(serde_json::json!({"k": 1})).unwrap();
        assert!(new_metadata(number).is_err());
    }
}
