//! Skills and their immutable versions. A version's files are one archive blob
//! (`crate::blobs`), named by `blob_key`; its file list is kept here for reads.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

/// A skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRow {
    /// `skill_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The immutable kebab-case slug (unique in the workspace).
    pub name: String,
    /// Human-readable label.
    pub display_name: String,
    /// `custom`.
    pub source: String,
    /// The newest version's id.
    pub latest_version_id: String,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
    /// Last change (a version added or removed), epoch ms.
    pub updated_at_ms: i64,
}

/// One version of a skill.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillVersionRow {
    /// The skill.
    pub skill_id: String,
    /// Epoch-microsecond string, increasing within the skill.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The skill's slug (front matter `name`).
    pub name: String,
    /// Front matter `description`.
    pub description: String,
    /// `[{"path": …, "size": …}]`, paths relative to the skill's directory.
    pub files: Value,
    /// Where its archive is.
    pub blob_key: String,
    /// Creation, epoch ms.
    pub created_at_ms: i64,
}

/// A new skill with its first version.
#[derive(Debug, Clone)]
pub struct NewSkill {
    /// `skill_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Human-readable label.
    pub display_name: String,
    /// Its first version (`name` is the skill's slug).
    pub version: NewSkillVersion,
}

/// A new version.
#[derive(Debug, Clone)]
pub struct NewSkillVersion {
    /// Epoch-microsecond id (the store raises it past the latest when needed).
    pub id: String,
    /// Slug from the front matter.
    pub name: String,
    /// Description from the front matter.
    pub description: String,
    /// File list.
    pub files: Value,
    /// Where its archive is.
    pub blob_key: String,
}

/// A page of skills or versions, newest first.
#[derive(Debug, Clone, Default)]
pub struct SkillQuery {
    /// Only this `source`.
    pub source: Option<String>,
    /// Strictly older than this id (the cursor).
    pub before_id: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// Skill metadata. Every method commits before it returns.
#[async_trait]
pub trait SkillStore: Send + Sync {
    /// Creates a skill and its first version. A skill of the same `name` in the
    /// workspace is `StoreError::Conflict`.
    async fn create_skill(&self, new: NewSkill) -> StoreResult<(SkillRow, SkillVersionRow)>;

    /// A skill of the workspace.
    async fn get_skill(&self, workspace_id: &str, id: &str) -> StoreResult<Option<SkillRow>>;

    /// Skills of the workspace, newest first.
    async fn list_skills(&self, workspace_id: &str, query: &SkillQuery) -> StoreResult<Vec<SkillRow>>;

    /// Deletes a skill and its versions; returns the versions' archive keys (to remove).
    /// `None`: no such skill.
    async fn delete_skill(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Vec<String>>>;

    /// Adds a version, which becomes the latest. Its id is raised above the latest's
    /// when the clock has not moved past it. `None`: no such skill.
    async fn add_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        version: NewSkillVersion,
    ) -> StoreResult<Option<SkillVersionRow>>;

    /// One version; `latest` resolves to the skill's latest.
    async fn get_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        version: &str,
    ) -> StoreResult<Option<SkillVersionRow>>;

    /// Versions of a skill, newest first.
    async fn list_skill_versions(
        &self,
        workspace_id: &str,
        skill_id: &str,
        query: &SkillQuery,
    ) -> StoreResult<Vec<SkillVersionRow>>;

    /// Deletes one version; the latest moves to the newest remaining. The only version
    /// of a skill is `StoreError::Conflict` (a skill holds at least one). `None`: no
    /// such version.
    async fn delete_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        version: &str,
    ) -> StoreResult<Option<SkillVersionRow>>;
}
