//! User profiles (docs/api/user-profiles.md): the entities a platform serves through the
//! API, the details the platform states about them, and the consent each gives on the
//! consent page.
//!
//! A deleted profile stays as a tombstone: [`UserProfileStore::get_user_profile`] returns
//! it (with `deleted_at_ms`), nothing lists or changes it. A change of the caller's
//! fields is a compare-and-swap on the `revision` it read; a consent answer is one
//! UPDATE of its purpose's columns, so neither loses a concurrent change.

use async_trait::async_trait;
use serde_json::Value;

use crate::capture::{Consent, Purpose};
use crate::error::StoreResult;

/// Declares a closed set of wire names (`as_str`, `parse`, `ALL`).
macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $wire:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)+
                }
            }

            /// Parses a wire name.
            pub fn parse(value: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.as_str() == value)
            }
        }
    };
}

wire_enum! {
    /// How the platform uses the API for the entity.
    AccessType {
        /// An individual end user of the platform's product (the default).
        Application = "application",
        /// A company the platform resells Claude access to.
        Passthrough = "passthrough",
    }
}

wire_enum! {
    /// The entity's account on the platform.
    AccountStatus {
        /// Neither restricted nor barred.
        Active = "active",
        /// Restricted, may be restored.
        Suspended = "suspended",
        /// Barred.
        Blocked = "blocked",
    }
}

wire_enum! {
    /// What kind of entity a profile represents.
    EntityType {
        /// A person.
        Individual = "individual",
        /// A company.
        Business = "business",
        /// A non-profit organization.
        NonProfit = "non_profit",
        /// A government body.
        Government = "government",
    }
}

/// `external_user_details`: what the platform states about the entity (each `None` until
/// it supplies one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalUserDetails {
    /// The platform's own reference (the legacy top-level `external_id`).
    pub reference_id: Option<String>,
    /// When the entity opened its account, epoch ms (the legacy
    /// `external_user_onboarded_at`).
    pub onboarded_at_ms: Option<i64>,
    /// The account's status.
    pub account_status: Option<AccountStatus>,
    /// ISO 3166-1 alpha-2, upper case.
    pub country: Option<String>,
    /// An opaque hash of the entity's email address.
    pub email_hash: Option<String>,
    /// The kind of entity.
    pub entity_type: Option<EntityType>,
    /// An opaque hash of the entity's name.
    pub name_hash: Option<String>,
}

/// What a caller writes of a profile (whole, on insert and on update).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserProfileFields {
    /// The entity's real-world name.
    pub name: Option<String>,
    /// How the platform uses the API for it.
    pub access_type: AccessType,
    /// What the platform states about it.
    pub external: ExternalUserDetails,
    /// Metadata (a JSON object of strings).
    pub metadata: Value,
}

/// When each purpose's consent was last answered, epoch ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsentTimes {
    /// `conversation_content`.
    pub conversation_content: Option<i64>,
    /// `activity_record`.
    pub activity_record: Option<i64>,
}

impl ConsentTimes {
    /// When `purpose` was last answered.
    pub fn get(self, purpose: Purpose) -> Option<i64> {
        match purpose {
            Purpose::ConversationContent => self.conversation_content,
            Purpose::ActivityRecord => self.activity_record,
        }
    }
}

/// A user profile.
#[derive(Debug, Clone, PartialEq)]
pub struct UserProfileRow {
    /// `uprof_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The workspace's organization.
    pub organization_id: String,
    /// What the caller wrote.
    pub fields: UserProfileFields,
    /// What the entity answered on the consent page.
    pub consent: Consent,
    /// When it answered, per purpose.
    pub consent_at_ms: ConsentTimes,
    /// Moves on every change (the compare-and-swap of [`UserProfileStore::update_user_profile`]).
    pub revision: i64,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// When it was deleted (a tombstone), epoch ms.
    pub deleted_at_ms: Option<i64>,
}

impl UserProfileRow {
    /// The `order_by=name` key of this profile (`None`: nameless, listed last).
    pub fn name_key(&self) -> Option<String> {
        self.fields.name.as_deref().map(profile_name_key)
    }
}

/// The `order_by=name` key of a name: ASCII letters lowercased, every other character
/// as it is; keys compare byte by byte.
pub fn profile_name_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// A profile to insert.
#[derive(Debug, Clone)]
pub struct NewUserProfile {
    /// `uprof_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The workspace's organization.
    pub organization_id: String,
    /// What the caller wrote.
    pub fields: UserProfileFields,
}

/// What a profile list is ordered by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UserProfileOrder {
    /// Creation (by id, which sorts by creation time).
    #[default]
    CreatedAt,
    /// [`profile_name_key`], then id; nameless profiles last in either direction.
    Name,
}

/// Where a page starts: strictly after this profile in the listing's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserProfileCursor {
    /// The last profile listed.
    pub id: String,
    /// Its [`profile_name_key`] (`None`: nameless); read under [`UserProfileOrder::Name`] only.
    pub name_key: Option<String>,
}

/// A page of live (not deleted) profiles.
#[derive(Debug, Clone, Default)]
pub struct UserProfileQuery {
    /// The order.
    pub order_by: UserProfileOrder,
    /// Newest (or last by name) first.
    pub descending: bool,
    /// Strictly after this one.
    pub after: Option<UserProfileCursor>,
    /// At most this many.
    pub limit: i64,
}

/// User profiles. Every method commits before it returns.
#[async_trait]
pub trait UserProfileStore: Send + Sync {
    /// Inserts a profile (revision 1, no consent answered).
    async fn insert_user_profile(&self, new: NewUserProfile) -> StoreResult<UserProfileRow>;

    /// A profile of the workspace, deleted ones included (`deleted_at_ms` set).
    async fn get_user_profile(&self, workspace_id: &str, id: &str) -> StoreResult<Option<UserProfileRow>>;

    /// Live profiles of the workspace in the query's order.
    async fn list_user_profiles(
        &self,
        workspace_id: &str,
        query: &UserProfileQuery,
    ) -> StoreResult<Vec<UserProfileRow>>;

    /// Writes a live profile's fields whole if it is still at `expected_revision`.
    /// `Ok(None)`: no such profile, or it is deleted. `Err(StoreError::Conflict)`: it
    /// changed since it was read (read it again); nothing was written.
    async fn update_user_profile(
        &self,
        workspace_id: &str,
        id: &str,
        expected_revision: i64,
        fields: UserProfileFields,
    ) -> StoreResult<Option<UserProfileRow>>;

    /// Records the entity's answer for one purpose (and when) on a live profile, in one
    /// UPDATE whatever else changes meanwhile. `Ok(None)`: no such profile, or deleted.
    async fn set_user_profile_consent(
        &self,
        workspace_id: &str,
        id: &str,
        purpose: Purpose,
        granted: bool,
    ) -> StoreResult<Option<UserProfileRow>>;

    /// Deletes a live profile (a tombstone). `Ok(None)`: no such profile, or it was
    /// deleted already.
    async fn delete_user_profile(&self, workspace_id: &str, id: &str) -> StoreResult<Option<UserProfileRow>>;
}
