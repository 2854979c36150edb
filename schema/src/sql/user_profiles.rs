//! User profiles (`user_profiles`, migration 0019).

use async_trait::async_trait;
use sqlx::FromRow;

use super::{JsonText, SqlStore};
use crate::capture::{Consent, Purpose};
use crate::error::{StoreError, StoreResult};
use crate::store::{
    AccessType, AccountStatus, ConsentTimes, EntityType, ExternalUserDetails, NewUserProfile, UserProfileFields,
    UserProfileOrder, UserProfileQuery, UserProfileRow, UserProfileStore, profile_name_key,
};

const COLUMNS: &str = "id, workspace_id, organization_id, name, access_type, reference_id, onboarded_at_ms, \
                       account_status, country, email_hash, entity_type, name_hash, metadata, \
                       consent_conversation_content, consent_conversation_content_at_ms, consent_activity_record, \
                       consent_activity_record_at_ms, revision, created_at_ms, updated_at_ms, deleted_at_ms";

/// A `user_profiles` row as stored.
#[derive(Debug, FromRow)]
struct Row {
    id: String,
    workspace_id: String,
    organization_id: String,
    name: Option<String>,
    access_type: String,
    reference_id: Option<String>,
    onboarded_at_ms: Option<i64>,
    account_status: Option<String>,
    country: Option<String>,
    email_hash: Option<String>,
    entity_type: Option<String>,
    name_hash: Option<String>,
    #[sqlx(try_from = "String")]
    metadata: JsonText,
    consent_conversation_content: Option<i64>,
    consent_conversation_content_at_ms: Option<i64>,
    consent_activity_record: Option<i64>,
    consent_activity_record_at_ms: Option<i64>,
    revision: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
    deleted_at_ms: Option<i64>,
}

/// A stored wire name parsed back into its closed set.
fn parse_column<T>(
    id: &str,
    column: &str,
    value: Option<String>,
    parse: fn(&str) -> Option<T>,
) -> StoreResult<Option<T>> {
    value
        .map(|text| {
            parse(&text).ok_or_else(|| StoreError::Backend(format!("user profile {id}: corrupt {column} {text:?}")))
        })
        .transpose()
}

impl TryFrom<Row> for UserProfileRow {
    type Error = StoreError;

    fn try_from(row: Row) -> StoreResult<Self> {
        let id = row.id;
        let access_type = parse_column(&id, "access_type", Some(row.access_type), AccessType::parse)?
            .ok_or_else(|| StoreError::Backend(format!("user profile {id}: no access_type")))?;
        let external = ExternalUserDetails {
            reference_id: row.reference_id,
            onboarded_at_ms: row.onboarded_at_ms,
            account_status: parse_column(&id, "account_status", row.account_status, AccountStatus::parse)?,
            country: row.country,
            email_hash: row.email_hash,
            entity_type: parse_column(&id, "entity_type", row.entity_type, EntityType::parse)?,
            name_hash: row.name_hash,
        };
        Ok(UserProfileRow {
            fields: UserProfileFields { name: row.name, access_type, external, metadata: row.metadata.0 },
            consent: Consent {
                conversation_content: row.consent_conversation_content.map(|flag| flag != 0),
                activity_record: row.consent_activity_record.map(|flag| flag != 0),
            },
            consent_at_ms: ConsentTimes {
                conversation_content: row.consent_conversation_content_at_ms,
                activity_record: row.consent_activity_record_at_ms,
            },
            revision: row.revision,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
            deleted_at_ms: row.deleted_at_ms,
            workspace_id: row.workspace_id,
            organization_id: row.organization_id,
            id,
        })
    }
}

fn profile(row: Option<Row>) -> StoreResult<Option<UserProfileRow>> {
    row.map(UserProfileRow::try_from).transpose()
}

/// Binds a profile's fields, in the column order `insert_profile.sql` and
/// `update_profile.sql` share (name … metadata).
fn bind_fields<'q, O>(
    statement: sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>>,
    f: &'q UserProfileFields,
) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>> {
    let e = &f.external;
    statement
        .bind(f.name.clone())
        .bind(f.name.as_deref().map(profile_name_key))
        .bind(f.access_type.as_str())
        .bind(e.reference_id.clone())
        .bind(e.onboarded_at_ms)
        .bind(e.account_status.map(AccountStatus::as_str))
        .bind(e.country.clone())
        .bind(e.email_hash.clone())
        .bind(e.entity_type.map(EntityType::as_str))
        .bind(e.name_hash.clone())
        .bind(f.metadata.to_string())
}

/// A purpose's column stem (`consent_<stem>`, `consent_<stem>_at_ms`).
fn consent_column(purpose: Purpose) -> &'static str {
    match purpose {
        Purpose::ConversationContent => "conversation_content",
        Purpose::ActivityRecord => "activity_record",
    }
}

#[async_trait]
impl UserProfileStore for SqlStore {
    async fn insert_user_profile(&self, new: NewUserProfile) -> StoreResult<UserProfileRow> {
        let sql = include_str!("../../queries/user_profiles/insert_profile.sql").replace("{columns}", COLUMNS);
        let statement = sqlx::query_as(&sql).bind(&new.id).bind(&new.workspace_id).bind(&new.organization_id);
        let row: Row = bind_fields(statement, &new.fields).bind(self.now()).fetch_one(&self.primary).await?;
        row.try_into()
    }

    async fn get_user_profile(&self, workspace_id: &str, id: &str) -> StoreResult<Option<UserProfileRow>> {
        let sql = format!("SELECT {COLUMNS} FROM user_profiles WHERE workspace_id = $1 AND id = $2");
        profile(sqlx::query_as(&sql).bind(workspace_id).bind(id).fetch_optional(&self.readers).await?)
    }

    async fn list_user_profiles(
        &self,
        workspace_id: &str,
        query: &UserProfileQuery,
    ) -> StoreResult<Vec<UserProfileRow>> {
        let (direction, after_op) = if query.descending { ("DESC", "<") } else { ("ASC", ">") };
        let order = match query.order_by {
            UserProfileOrder::CreatedAt => format!("id {direction}"),
            // Nameless last whichever the direction.
            UserProfileOrder::Name => {
                format!("CASE WHEN name_key IS NULL THEN 1 ELSE 0 END, name_key {direction}, id {direction}")
            }
        };
        // The cursor's values follow $1 (workspace) and $2 (limit).
        let mut values: Vec<String> = Vec::new();
        let after = match (&query.after, query.order_by) {
            (None, _) => String::new(),
            (Some(cursor), UserProfileOrder::CreatedAt) => {
                values.push(cursor.id.clone());
                format!("AND id {after_op} $3")
            }
            (Some(cursor), UserProfileOrder::Name) => match &cursor.name_key {
                // After a named profile: later names, the same name's later ids, and
                // every nameless profile.
                Some(key) => {
                    values.extend([key.clone(), cursor.id.clone()]);
                    format!("AND (name_key IS NULL OR name_key {after_op} $3 OR (name_key = $3 AND id {after_op} $4))")
                }
                // After a nameless profile: only nameless ones remain.
                None => {
                    values.push(cursor.id.clone());
                    format!("AND name_key IS NULL AND id {after_op} $3")
                }
            },
        };
        let sql = include_str!("../../queries/user_profiles/select_profiles.sql")
            .replace("{columns}", COLUMNS)
            .replace("{after}", &after)
            .replace("{order}", &order);
        let mut statement = sqlx::query_as::<_, Row>(&sql).bind(workspace_id).bind(query.limit.max(0));
        for value in values {
            statement = statement.bind(value);
        }
        statement.fetch_all(&self.readers).await?.into_iter().map(UserProfileRow::try_from).collect()
    }

    async fn update_user_profile(
        &self,
        workspace_id: &str,
        id: &str,
        expected_revision: i64,
        fields: UserProfileFields,
    ) -> StoreResult<Option<UserProfileRow>> {
        let sql = include_str!("../../queries/user_profiles/update_profile.sql").replace("{columns}", COLUMNS);
        let statement = sqlx::query_as(&sql).bind(workspace_id).bind(id).bind(expected_revision);
        let row: Option<Row> = bind_fields(statement, &fields).bind(self.now()).fetch_optional(&self.primary).await?;
        if let Some(row) = profile(row)? {
            return Ok(Some(row));
        }
        match self.get_user_profile(workspace_id, id).await? {
            None => Ok(None),
            Some(current) if current.deleted_at_ms.is_some() => Ok(None),
            Some(current) => Err(StoreError::Conflict(format!(
                "user profile {id} is at revision {}, not {expected_revision}",
                current.revision
            ))),
        }
    }

    async fn set_user_profile_consent(
        &self,
        workspace_id: &str,
        id: &str,
        purpose: Purpose,
        granted: bool,
    ) -> StoreResult<Option<UserProfileRow>> {
        let sql = include_str!("../../queries/user_profiles/set_consent.sql")
            .replace("{purpose}", consent_column(purpose))
            .replace("{columns}", COLUMNS);
        profile(
            sqlx::query_as(&sql)
                .bind(workspace_id)
                .bind(id)
                .bind(i64::from(granted))
                .bind(self.now())
                .fetch_optional(&self.primary)
                .await?,
        )
    }

    async fn delete_user_profile(&self, workspace_id: &str, id: &str) -> StoreResult<Option<UserProfileRow>> {
        let sql = include_str!("../../queries/user_profiles/delete_profile.sql").replace("{columns}", COLUMNS);
        profile(sqlx::query_as(&sql).bind(workspace_id).bind(id).bind(self.now()).fetch_optional(&self.primary).await?)
    }
}
