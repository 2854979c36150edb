//! The store seam: committed truth, run rows and fencing, split by area into narrow
//! traits. Each trait's doc comment states its durability, ordering and preconditions;
//! `SqlStore` implements each next to its SQL (`crate::sql::<area>`).
//!
//! Common to all: every method that returns `Ok` has committed. Compare-and-swap
//! preconditions (an expected version, a claimed epoch) are in the signatures; a failed
//! precondition changes nothing. [`Store`] is every area at once: the handle shared as
//! `Arc<dyn Store>`. Callers holding a concrete store bring the traits into scope with
//! `use agentd_schema::store::prelude::*`.

mod adapters;
mod agent_drafts;
mod app_tokens;
mod deployments;
mod dreams;
mod durable;
mod erasure;
mod files;
mod idempotency;
mod inbox;
mod memory;
mod outbox;
mod protocol_config;
mod providers;
mod resources;
mod runs;
mod sandbox_policies;
mod sealed;
mod session_threads;
mod sessions;
mod skills;
mod tenancy;
mod tool_calls;
mod user_profiles;
mod webhooks;
mod work;
mod workflows;

use async_trait::async_trait;

pub use adapters::{A2aDelivery, A2aPushConfig, A2aTask, A2aWatch, AdapterStore};
pub use agent_drafts::{AgentDraftRow, AgentDraftStore, AgentPublicationRow};
pub use app_tokens::{AppTokenRow, AppTokenStore, NewAppToken, ThreadBinding};
pub use deployments::{
    DeploymentConfig, DeploymentQuery, DeploymentRow, DeploymentRunQuery, DeploymentRunRow, DeploymentStore,
    NewDeployment, NewDeploymentRun, RunTrigger, ScheduleRow, SlotClaim,
};
pub use dreams::{DreamEnd, DreamPolicyRow, DreamQuery, DreamRow, DreamStatus, DreamStore, NewDream, ScheduleOutcome};
pub use durable::DurableStore;
pub use erasure::{ErasureRow, ErasureStore, SessionErasure};
pub use files::{FileQuery, FileRow, FileState, FileStore, NewFile};
pub use idempotency::{IdempotencyBegin, IdempotencyStore};
pub use inbox::{InboxChange, InboxMessage, InboxRefusal, InboxSnapshot, InboxStore};
pub use memory::{
    AgentMemoryStore, MAX_MEMORIES_PER_STORE, MemoryActor, MemoryContent, MemoryDeletion, MemoryListItem,
    MemoryOperation, MemoryQuery, MemoryRow, MemoryStoreQuery, MemoryStoreRow, MemoryStoreUpdate, MemoryUpdate,
    MemoryVersionQuery, MemoryVersionRow, MemoryWrite, NewMemory, NewMemoryStore,
};
pub use outbox::{OutboxMessage, OutboxStore};
pub use protocol_config::{
    AgentMcpConfigRow, ExposedProtocol, ExposureMode, ExposureRow, McpServerRow, ProtocolConfigStore,
};
pub use providers::{
    CredentialPoolRow, CredentialRef, EndpointRow, InferenceProfileRow, ModelAttributesRow, OfferingRow,
    ProviderConfig, ProviderCredentialRow, ProviderKind, ProviderRow, ProviderStore, Written,
};
pub use resources::{ListQuery, NewResource, Resource, ResourceState, ResourceStore, ResourceUpdate};
pub use runs::{
    Claim, ClaimOutcome, DEFAULT_MAX_ATTEMPTS, HandedOff, Handoff, NewThread, Run, RunStatus, RunStore, Settled,
    Settlement, StrandedRun, Submission, Submitted,
};
pub use sandbox_policies::{
    NewSandboxPolicyVersion, SandboxPolicyBindingRow, SandboxPolicyStore, SandboxPolicyVersionRow,
};
pub use sealed::{SealedRow, SealedStore, SealedTable};
pub use session_threads::{SessionThread, SessionThreadStore, ThreadQuery};
pub use sessions::{
    EventQuery, NewEvent, NewSession, ResourcesReplacement, Session, SessionForTurn, SessionQuery, SessionStore,
    StoredEvent, TimeBounds, memory_store_ids,
};
pub use skills::{NewSkill, NewSkillVersion, SkillQuery, SkillRow, SkillStore, SkillVersionRow};
pub use tenancy::{ApiKeyInfo, KeyKind, Organization, Scope, TenancyStore, Workspace};
pub use tool_calls::{Confirmation, ToolCall, ToolCallStore, ToolUseKind};
pub use user_profiles::{
    AccessType, AccountStatus, ConsentTimes, EntityType, ExternalUserDetails, NewUserProfile, UserProfileCursor,
    UserProfileFields, UserProfileOrder, UserProfileQuery, UserProfileRow, UserProfileStore, profile_name_key,
};
pub use webhooks::{
    WebhookAttempt, WebhookDelivery, WebhookPut, WebhookPutOutcome, WebhookPutRequest, WebhookStore,
    WebhookSubscriptionRow,
};
pub use work::{Heartbeat, LostHands, SessionsToken, WorkConflict, WorkItem, WorkSource, WorkStats, WorkStore};
pub use workflows::{
    ClearOutcome, SaveOutcome, SaveWorkflowRevision, SavedWorkflowRevision, WorkflowKey, WorkflowOverrideRow,
    WorkflowRevisionRow, WorkflowStore,
};

use crate::error::StoreResult;

/// Every store trait in scope with one `use agentd_schema::store::prelude::*`.
pub mod prelude {
    pub use super::{
        AdapterStore, AgentDraftStore, AgentMemoryStore, AppTokenStore, DeploymentStore, DreamStore, DurableStore,
        ErasureStore, FileStore, IdempotencyStore, InboxStore, OutboxStore, ProtocolConfigStore, ProviderStore,
        ResourceStore, RunStore, SandboxPolicyStore, SealedStore, SessionStore, SessionThreadStore, SkillStore, Store,
        StoreHealth, TenancyStore, ToolCallStore, UserProfileStore, WebhookStore, WorkStore, WorkflowStore,
    };
}

/// Which SQL backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL (production).
    Postgres,
    /// SQLite (embedded, `agentd dev`).
    Sqlite,
}

impl Backend {
    /// A short name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }
}

/// What the store runs on and whether it answers.
#[async_trait]
pub trait StoreHealth: Send + Sync {
    /// The SQL backend in use.
    fn backend(&self) -> Backend;

    /// Checks that the database answers (used by `/readyz`); reads nothing.
    async fn ping(&self) -> StoreResult<()>;
}

/// The whole store: every area's trait. Implemented for anything that implements them
/// all, so `Arc<dyn Store>` is the one handle roles and handlers share.
pub trait Store:
    StoreHealth
    + TenancyStore
    + ResourceStore
    + SessionStore
    + SessionThreadStore
    + ToolCallStore
    + RunStore
    + OutboxStore
    + IdempotencyStore
    + WorkStore
    + DurableStore
    + InboxStore
    + AdapterStore
    + SealedStore
    + FileStore
    + SkillStore
    + AgentMemoryStore
    + DreamStore
    + DeploymentStore
    + UserProfileStore
    + ErasureStore
    + AppTokenStore
    + ProviderStore
    + AgentDraftStore
    + WebhookStore
    + ProtocolConfigStore
    + SandboxPolicyStore
    + WorkflowStore
    + 'static
{
}

impl<T> Store for T where
    T: StoreHealth
        + TenancyStore
        + ResourceStore
        + SessionStore
        + SessionThreadStore
        + ToolCallStore
        + RunStore
        + OutboxStore
        + IdempotencyStore
        + WorkStore
        + DurableStore
        + InboxStore
        + AdapterStore
        + SealedStore
        + FileStore
        + SkillStore
        + AgentMemoryStore
        + DreamStore
        + DeploymentStore
        + UserProfileStore
        + ErasureStore
        + AppTokenStore
        + ProviderStore
        + AgentDraftStore
        + WebhookStore
        + ProtocolConfigStore
        + SandboxPolicyStore
        + WorkflowStore
        + 'static
{
}
