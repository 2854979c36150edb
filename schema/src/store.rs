//! The store seam: committed truth, run rows and fencing.
//!
//! Durability: every method that returns `Ok` has committed. Ordering: session events
//! are numbered by the database (`seq`, per session, gap-free, in commit order).
//! Idempotency: noted per method. Compare-and-swap preconditions (an expected version,
//! a claimed epoch) are in the signatures; a failed precondition changes nothing.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::StoreResult;

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

/// An organization: the unit rate limits apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// `org_…`
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
}

/// A workspace: the scope every managed resource lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `wrkspc_…`
    pub id: String,
    /// The owning organization.
    pub organization_id: String,
    /// Unique within the organization.
    pub name: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
}

/// An API key as listed: never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyInfo {
    /// `apikey_…`
    pub id: String,
    /// The workspace the key acts on.
    pub workspace_id: String,
    /// Operator-chosen label.
    pub name: String,
    /// The last characters of the secret, to tell keys apart.
    pub hint: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Set once revoked; a revoked key authenticates nothing.
    pub revoked_at_ms: Option<i64>,
    /// What the key may do.
    pub kind: KeyKind,
}

/// What a key may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// An API key: everything in its workspace.
    Api,
    /// An environment key: that environment's work queue and its sessions.
    Environment(String),
    /// A runner key: the work of every `cloud` environment of its workspace.
    Runner,
}

impl KeyKind {
    /// The stored `kind` column.
    pub fn as_str(&self) -> &'static str {
        match self {
            KeyKind::Api => "api",
            KeyKind::Environment(_) => "environment",
            KeyKind::Runner => "runner",
        }
    }
}

/// The trusted scope a key resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The key that authenticated.
    pub key_id: String,
    /// Its organization (rate limits are per organization).
    pub organization_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// What it may do.
    pub kind: KeyKind,
}

/// A work item of an environment's queue (`environments.work`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    /// `work_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The environment whose queue holds it.
    pub environment_id: String,
    /// The session that needs hands.
    pub session_id: String,
    /// `cloud` (our runner) or `self_hosted` (the customer's worker).
    pub hands: String,
    /// `queued`, `starting`, `active`, `stopping`, `stopped`.
    pub state: String,
    /// User metadata.
    pub metadata: Value,
    /// Offered to a poller (and not acked) since, epoch ms.
    pub offered_at_ms: Option<i64>,
    /// Leases lost after an ack so far.
    pub lost_leases: i64,
    /// The exact heartbeat string a worker must echo; `None` before the first.
    pub last_heartbeat: Option<String>,
    /// Lease length.
    pub ttl_seconds: i64,
    /// Lease expiry, epoch ms.
    pub lease_until_ms: Option<i64>,
    /// Timestamps, epoch ms.
    pub created_at_ms: i64,
    /// Acked.
    pub acknowledged_at_ms: Option<i64>,
    /// First heartbeat.
    pub started_at_ms: Option<i64>,
    /// Latest heartbeat.
    pub latest_heartbeat_at_ms: Option<i64>,
    /// Stop requested.
    pub stop_requested_at_ms: Option<i64>,
    /// Stopped.
    pub stopped_at_ms: Option<i64>,
}

/// Which queue a poll takes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkSource {
    /// One environment's queue.
    Environment(String),
    /// Every `cloud` environment of a workspace (runner keys).
    Cloud {
        /// The workspace.
        workspace_id: String,
    },
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub enum Heartbeat {
    /// Recorded (or, when stopping or stopped, not compared and not extended).
    Recorded {
        /// The item after the heartbeat.
        item: WorkItem,
        /// Whether the lease was extended.
        extended: bool,
    },
    /// `expected_last_heartbeat` did not match: another worker may hold the lease.
    PreconditionFailed(WorkItem),
    /// The item is not in a state that takes heartbeats (queued).
    NotAcked(WorkItem),
}

/// A work transition that did not apply: the state the item is in.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkConflict {
    /// The item's current state.
    pub state: String,
}

/// What a sessions token grants: one session's routes and its work item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsToken {
    /// The work item it came with.
    pub work_id: String,
    /// The session.
    pub session_id: String,
    /// The environment.
    pub environment_id: String,
    /// Workspace and organization of the session.
    pub workspace_id: String,
    /// Organization.
    pub organization_id: String,
}

/// Queue statistics of one environment.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkStats {
    /// Queued and not offered.
    pub depth: i64,
    /// Offered, not acked.
    pub pending: i64,
    /// Oldest queued item, epoch ms.
    pub oldest_queued_at_ms: Option<i64>,
    /// Distinct pollers in the last 30 s.
    pub workers_polling: i64,
}

/// A session whose hands were given up on: its unanswered built-in calls fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostHands {
    /// The work item that was stopped.
    pub work_id: String,
    /// Its session.
    pub session_id: String,
    /// How many leases were lost.
    pub lost_leases: i64,
}

/// A stored resource of one of the generic managed families.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Prefixed id.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Family, e.g. `agent`, `environment`, `vault`.
    pub kind: String,
    /// For sub-resources (a vault's credentials), the parent's id.
    pub parent_id: Option<String>,
    /// Starts at 1, bumped by every update.
    pub version: i64,
    /// The wire body.
    pub body: Value,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last update, epoch ms.
    pub updated_at_ms: i64,
    /// Set once archived.
    pub archived_at_ms: Option<i64>,
}

/// A resource to create.
#[derive(Debug, Clone)]
pub struct NewResource {
    /// Prefixed id (see [`crate::ids::new_id`]).
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Family.
    pub kind: String,
    /// Parent for sub-resources.
    pub parent_id: Option<String>,
    /// The wire body.
    pub body: Value,
    /// Whether each version is kept as an immutable snapshot.
    pub versioned: bool,
}

/// A page request over one family, ordered by id (ids sort by creation time).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this parent's children.
    pub parent_id: Option<String>,
    /// Return ids strictly after this one (in the listing order).
    pub after_id: Option<String>,
    /// Return ids strictly before this one (in the listing order).
    pub before_id: Option<String>,
    /// At most this many rows.
    pub limit: i64,
    /// Newest first when true.
    pub descending: bool,
    /// Include archived rows.
    pub include_archived: bool,
    /// Only rows created at or after this time (epoch ms).
    pub created_gte_ms: Option<i64>,
    /// Only rows created at or before this time (epoch ms).
    pub created_lte_ms: Option<i64>,
}

/// A session row; the wire body holds everything not queried or fenced.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `sesn_…`; also the id of the session's primary thread.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// `idle`, `running`, `rescheduling`, `terminated`.
    pub status: String,
    /// The wire body (agent snapshot, metadata, …). Every read of one session holds
    /// the `agent`; [`Store::list_sessions`] leaves it out (see `agent_snapshot_id`).
    pub body: Value,
    /// The agent the session was created from, for list filters.
    pub agent_id: Option<String>,
    /// That agent's version.
    pub agent_version: Option<i64>,
    /// Cumulative token usage, a projection of committed `span.model_request_end` events.
    pub usage: Value,
    /// The next event sequence number.
    pub next_seq: i64,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last update, epoch ms.
    pub updated_at_ms: i64,
    /// Set once archived.
    pub archived_at_ms: Option<i64>,
    /// Time spent in `running` up to the last status change, ms.
    pub active_ms: i64,
    /// When the current `running` stretch began; `None` unless running.
    pub running_since_ms: Option<i64>,
    /// Changes to the live inbox so far (0: never used, nothing to take).
    pub inbox_version: i64,
    /// Revision of the session's resources (1 at creation, bumped by every change).
    pub resources_revision: i64,
    /// The stored agent snapshot the body's `agent` is (shared by every session of the
    /// same agent configuration; `None` for a body without an agent).
    pub agent_snapshot_id: Option<String>,
}

impl Session {
    /// Cumulative seconds spent in `running`, including a stretch still under way.
    pub fn active_seconds(&self, now_ms: i64) -> f64 {
        let ongoing = self.running_since_ms.map_or(0, |since| (now_ms - since).max(0));
        (self.active_ms + ongoing) as f64 / 1000.0
    }
}

/// A message waiting in a session's live inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxMessage {
    /// `inbox_…`; the committed `user.message` takes the matching `sevt_…` id.
    pub id: String,
    /// Content blocks.
    pub content: Value,
    /// Enqueued at, epoch ms.
    pub created_at_ms: i64,
}

/// A session's live inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxSnapshot {
    /// A run of the session is live (leased).
    pub active: bool,
    /// Changes so far; reorders name the version they were computed from.
    pub version: i64,
    /// In delivery order.
    pub messages: Vec<InboxMessage>,
}

/// A change to a live inbox.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxChange {
    /// Append a message.
    Enqueue {
        /// Content blocks.
        content: Value,
    },
    /// Reorder: `order` must be an exact permutation of the current ids, computed from
    /// `expected_version`.
    Reorder {
        /// The version the order was computed from.
        expected_version: i64,
        /// Every current id, in the new order.
        order: Vec<String>,
    },
    /// Replace one message's content.
    Replace {
        /// The message.
        id: String,
        /// New content.
        content: Value,
    },
    /// Withdraw one message.
    Withdraw {
        /// The message.
        id: String,
    },
}

/// Why an inbox change did not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxRefusal {
    /// No run of the session is live.
    NoLiveRun,
    /// The reorder was computed from another version.
    StaleVersion {
        /// The version now.
        current: i64,
    },
    /// The reorder is not an exact permutation of the current messages.
    NotAPermutation,
    /// No such message in the inbox.
    UnknownMessage,
}

/// A session to create.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// `sesn_…`
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Initial status.
    pub status: String,
    /// The wire body.
    pub body: Value,
    /// The agent it was created from.
    pub agent_id: Option<String>,
    /// That agent's version.
    pub agent_version: Option<i64>,
}

/// A page request over sessions.
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    /// Only these statuses (any when empty).
    pub statuses: Vec<String>,
    /// Only sessions of this agent.
    pub agent_id: Option<String>,
    /// Only this version of `agent_id`.
    pub agent_version: Option<i64>,
    /// Creation time bounds, epoch ms: `(gt, gte, lt, lte)`.
    pub created: TimeBounds,
    /// Include archived sessions.
    pub include_archived: bool,
    /// Return ids strictly after this one in the listing order.
    pub after_id: Option<String>,
    /// Return ids strictly before this one in the listing order (the page is still
    /// returned in listing order).
    pub before_id: Option<String>,
    /// At most this many rows.
    pub limit: i64,
    /// Newest first when true.
    pub descending: bool,
}

/// Exclusive and inclusive bounds on a time column, epoch ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeBounds {
    /// Strictly after.
    pub gt: Option<i64>,
    /// At or after.
    pub gte: Option<i64>,
    /// Strictly before.
    pub lt: Option<i64>,
    /// At or before.
    pub lte: Option<i64>,
}

/// A page request over a session's events.
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    /// Only events of this thread.
    pub thread_id: Option<String>,
    /// Only these types (any when empty).
    pub types: Vec<String>,
    /// `processed_at` bounds.
    pub processed: TimeBounds,
    /// Events with `seq` strictly past this one in the listing order.
    pub after_seq: Option<i64>,
    /// At most this many rows.
    pub limit: i64,
    /// Newest first when true.
    pub descending: bool,
}

/// An event to append to a session's history.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// `sevt_…`; unique across all sessions. Deterministic ids make replays idempotent.
    pub event_id: String,
    /// The thread it belongs to (a session id for the primary thread).
    pub thread_id: String,
    /// The event type, e.g. `user.message`.
    pub kind: String,
    /// The wire body.
    pub body: Value,
}

impl NewEvent {
    /// An event on `thread_id` with a fresh id, its type taken from `body["type"]`.
    pub fn new(thread_id: &str, body: Value) -> Self {
        Self {
            event_id: crate::ids::new_id("sevt"),
            thread_id: thread_id.to_owned(),
            kind: body["type"].as_str().unwrap_or_default().to_owned(),
            body,
        }
    }

    /// A `user.message` with one text block.
    pub fn user_message(thread_id: &str, text: &str) -> Self {
        Self::new(
            thread_id,
            serde_json::json!({ "type": "user.message", "content": [{ "type": "text", "text": text }] }),
        )
    }
}

/// A committed event.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// The session.
    pub session_id: String,
    /// Position in the session's history, from 1, gap-free.
    pub seq: i64,
    /// `sevt_…`
    pub event_id: String,
    /// The thread.
    pub thread_id: String,
    /// The event type.
    pub kind: String,
    /// The wire body.
    pub body: Value,
    /// Commit time, epoch ms.
    pub processed_at_ms: i64,
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Runnable: waiting for a worker to claim it.
    Pending,
    /// Claimed by a worker until `lease_until_ms`.
    Leased,
    /// Parked at a checkpoint, waiting for input.
    Awaiting,
    /// Settled with an outcome.
    Done,
    /// Quarantined by an operator; only an explicit requeue revives it.
    DeadLetter,
    /// Replaced by a newer run of the thread (`supersede`); terminal, never claimed.
    Superseded,
}

impl RunStatus {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Leased => "leased",
            RunStatus::Awaiting => "awaiting",
            RunStatus::Done => "done",
            RunStatus::DeadLetter => "dead_letter",
            RunStatus::Superseded => "superseded",
        }
    }

    /// Parses the stored text.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => RunStatus::Pending,
            "leased" => RunStatus::Leased,
            "awaiting" => RunStatus::Awaiting,
            "done" => RunStatus::Done,
            "dead_letter" => RunStatus::DeadLetter,
            "superseded" => RunStatus::Superseded,
            _ => return None,
        })
    }
}

/// A run row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// `run_…`
    pub id: String,
    /// The session.
    pub session_id: String,
    /// The thread it runs on.
    pub thread_id: String,
    /// Life-cycle state.
    pub status: RunStatus,
    /// Fencing token: bumped by every claim.
    pub epoch: i64,
    /// Bumped by every submission; names the queue message.
    pub generation: i64,
    /// The worker holding the lease.
    pub owner: Option<String>,
    /// Lease expiry, epoch ms.
    pub lease_until_ms: Option<i64>,
    /// Expired-lease recoveries since the last checkpoint.
    pub attempts: i64,
    /// Retry budget.
    pub max_attempts: i64,
    /// A durable cancel intent was recorded.
    pub cancel_requested: bool,
    /// A durable pause intent: the live attempt parks at its next step boundary, and an
    /// awaiting run with it is a paused ticket.
    pub pause_requested: bool,
    /// Set once done.
    pub outcome: Option<String>,
}

/// Proof of holding a run for one attempt; every fenced call presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The claiming worker.
    pub owner: String,
    /// The epoch minted by this claim.
    pub epoch: i64,
    /// The run's session.
    pub session_id: String,
    /// The run's thread.
    pub thread_id: String,
    /// The submission generation at claim time.
    pub generation: i64,
    /// Recoveries since the last checkpoint, including this claim if it was one.
    pub attempts: i64,
    /// The run's retry budget.
    pub max_attempts: i64,
    /// A cancel intent was recorded before the claim.
    pub cancel_requested: bool,
    /// A pause intent was recorded before the claim: park at the first step boundary.
    pub pause_requested: bool,
    /// Lease expiry, epoch ms.
    pub lease_until_ms: i64,
}

/// The result of trying to claim a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This worker holds the run now.
    Claimed(Claim),
    /// Another worker holds a live lease until the given time: try again later.
    Held {
        /// Lease expiry, epoch ms.
        lease_until_ms: i64,
    },
    /// Another run of the same thread is live: try again later.
    ThreadBusy,
    /// The run is settled or unknown: the message that named it is stale.
    Stale,
}

/// Input that makes a thread's run runnable (life of a turn, step 2).
#[derive(Debug, Clone)]
pub struct Submission {
    /// The session.
    pub session_id: String,
    /// The thread.
    pub thread_id: String,
    /// Events to commit with the submission (may be empty, e.g. a wake).
    pub events: Vec<NewEvent>,
    /// Retry budget of a newly created run.
    pub max_attempts: i64,
    /// W3C trace context to carry to the worker.
    pub trace_context: Vec<(String, String)>,
}

/// What a submission committed.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The run that will process the input.
    pub run_id: String,
    /// Its generation after this submission.
    pub generation: i64,
    /// True when the run is leased: the live attempt picks the input up itself.
    pub live: bool,
    /// The committed events.
    pub events: Vec<StoredEvent>,
    /// The outbox row holding the queue message to publish.
    pub outbox: OutboxMessage,
}

/// What settling an attempt committed.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The committed events.
    pub events: Vec<StoredEvent>,
    /// The run's status afterwards: `Pending` when input arrived during the attempt
    /// (the caller should claim it again), else what was asked for.
    pub status: RunStatus,
}

/// A run that may need its submission republished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrandedRun {
    /// The run.
    pub run_id: String,
    /// Its session.
    pub session_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its submission generation.
    pub generation: i64,
    /// Its epoch (changes with every claim).
    pub epoch: i64,
}

/// How an attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Parked at a checkpoint until new input; the retry budget resets.
    Awaiting,
    /// Finished with an outcome (e.g. `completed`, `cancelled`, `indeterminate`).
    Done {
        /// The outcome recorded on the run.
        outcome: String,
    },
}

/// A message waiting in the transactional outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    /// Row id.
    pub id: i64,
    /// Where it goes (`submissions`).
    pub topic: String,
    /// Dedupe id for the queue.
    pub msg_id: String,
    /// Encoded message.
    pub payload: Vec<u8>,
    /// When it was written, epoch ms.
    pub created_at_ms: i64,
}

/// The result of beginning an idempotent request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// First use of the key: proceed, then call `idempotency_complete`.
    Fresh,
    /// The key completed before: replay this response.
    Replay {
        /// The stored status code.
        status_code: i64,
        /// The stored response body.
        response: String,
    },
    /// The key is in use by a request that has not completed.
    InFlight,
    /// The key was used with a different request body.
    Mismatch,
}

/// An A2A task (docs/api/a2a.md): one exchange on a context, bound to a session's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aTask {
    /// The task id.
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// The A2A context (an adapter thread key).
    pub context_id: String,
    /// The session the context is bound to.
    pub session_id: String,
    /// The run the task's first input landed in.
    pub run_id: String,
    /// Sequence of the task's first input event.
    pub first_seq: i64,
    /// Sequence of the task's latest input event.
    pub input_seq: i64,
    /// CancelTask was accepted.
    pub canceled: bool,
    /// The last state whose push notifications were enqueued, `"{input_seq}.{state}"`.
    pub notified_state: Option<String>,
    /// Created at, epoch ms.
    pub created_at_ms: i64,
}

/// A task the push watcher should look at: its session moved past what it last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aWatch {
    /// The task.
    pub task: A2aTask,
    /// The session's last committed sequence when selected.
    pub session_seq: i64,
}

/// A push notification config of an A2A task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aPushConfig {
    /// The task.
    pub task_id: String,
    /// The config id (unique per task).
    pub id: String,
    /// Owning workspace.
    pub workspace_id: String,
    /// Where notifications go.
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`; keys the signature.
    pub token: Option<String>,
    /// `Authorization` scheme.
    pub auth_scheme: Option<String>,
    /// Sealed `Authorization` credentials (write-only).
    pub auth_credentials: Option<String>,
    /// Created at, epoch ms.
    pub created_at_ms: i64,
}

/// A push notification to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aDelivery {
    /// The stable notification id.
    pub id: String,
    /// The task.
    pub task_id: String,
    /// The config it goes to.
    pub config_id: String,
    /// The JSON body.
    pub payload: String,
    /// Attempts made so far, including a claimed one.
    pub attempts: i64,
}

/// The store: committed truth, run rows and fencing.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The SQL backend in use.
    fn backend(&self) -> Backend;

    /// Checks that the database answers (used by `/readyz`).
    async fn ping(&self) -> StoreResult<()>;

    // --- tenancy -------------------------------------------------------------------

    /// Returns the named workspace of the named organization, creating either if
    /// missing. Idempotent; safe to race.
    async fn ensure_workspace(&self, organization: &str, workspace: &str) -> StoreResult<Workspace>;

    /// Looks a workspace up by id or by name.
    async fn find_workspace(&self, id_or_name: &str) -> StoreResult<Option<Workspace>>;

    /// Stores the hash of `secret` as a new key of `workspace_id`. Idempotent when the
    /// same secret is stored twice (returns the existing key).
    async fn insert_api_key(
        &self,
        workspace_id: &str,
        name: &str,
        secret: &str,
        kind: &KeyKind,
    ) -> StoreResult<ApiKeyInfo>;

    /// Resolves a presented secret to its trusted scope; `None` for unknown or revoked.
    async fn resolve_api_key(&self, secret: &str) -> StoreResult<Option<Scope>>;

    /// Lists keys, optionally of one workspace, never with secrets.
    async fn list_api_keys(&self, workspace_id: Option<&str>) -> StoreResult<Vec<ApiKeyInfo>>;

    /// Revokes a key; `false` if it does not exist or was already revoked.
    async fn revoke_api_key(&self, key_id: &str) -> StoreResult<bool>;

    // --- generic resources ---------------------------------------------------------

    /// Creates a resource at version 1 (and its first snapshot if versioned).
    async fn create_resource(&self, new: NewResource) -> StoreResult<Resource>;

    /// Reads a resource of `kind` in `workspace_id`.
    async fn get_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Option<Resource>>;

    /// Replaces the body if the current version is `expected_version`; bumps the
    /// version (and snapshots it if `versioned`). `Conflict` if the version moved.
    async fn update_resource(
        &self,
        workspace_id: &str,
        kind: &str,
        id: &str,
        expected_version: i64,
        body: Value,
        versioned: bool,
    ) -> StoreResult<Resource>;

    /// Marks a resource archived (idempotent; keeps the first archive time).
    async fn archive_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Resource>;

    /// Deletes a resource and its snapshots; `false` if it did not exist.
    async fn delete_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<bool>;

    /// Lists one family of a workspace, ordered by id.
    async fn list_resources(&self, workspace_id: &str, kind: &str, query: &ListQuery) -> StoreResult<Vec<Resource>>;

    /// Reads one immutable snapshot of a versioned resource.
    async fn get_resource_version(&self, resource_id: &str, version: i64) -> StoreResult<Option<Value>>;

    /// Snapshots of a versioned resource as `(version, body)`, ordered by version,
    /// strictly past `after_version` in the listing order, at most `limit`.
    async fn list_resource_versions(
        &self,
        resource_id: &str,
        after_version: Option<i64>,
        limit: i64,
        descending: bool,
    ) -> StoreResult<Vec<(i64, Value)>>;

    // --- sessions and events -------------------------------------------------------

    /// Creates a session (its primary thread shares its id).
    async fn create_session(&self, new: NewSession) -> StoreResult<Session>;

    /// Reads a session of a workspace.
    async fn get_session(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Session>>;

    /// Reads a session by id alone, for workers (which hold a claim, not a workspace).
    async fn load_session(&self, id: &str) -> StoreResult<Option<Session>>;

    /// Appends events outside any run (e.g. `session.updated`); sequence numbers are
    /// allocated by the database. Idempotent per event id: a repeated id is a `Conflict`
    /// and nothing of the batch is written.
    async fn append_events(&self, session_id: &str, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>>;

    /// Events of a session with `seq > after_seq`, ascending, at most `limit`.
    async fn list_events(&self, session_id: &str, after_seq: i64, limit: i64) -> StoreResult<Vec<StoredEvent>>;

    /// Events of a session filtered and paged as `query` says.
    async fn query_events(&self, session_id: &str, query: &EventQuery) -> StoreResult<Vec<StoredEvent>>;

    /// Replaces a session's wire body and commits `events` (e.g. `session.updated`) in
    /// one transaction.
    async fn update_session(
        &self,
        workspace_id: &str,
        id: &str,
        body: Value,
        events: Vec<NewEvent>,
    ) -> StoreResult<(Session, Vec<StoredEvent>)>;

    /// Replaces the body after a change to the session's resources (bumping their
    /// revision) when `expected` is the current revision or `None`; `Ok(Err(current))`
    /// when the precondition fails. `events` are committed with it.
    async fn replace_session_resources(
        &self,
        workspace_id: &str,
        id: &str,
        expected: Option<i64>,
        body: Value,
        events: Vec<NewEvent>,
    ) -> StoreResult<Result<(Session, Vec<StoredEvent>), i64>>;

    /// The session an adapter thread is bound to.
    async fn thread_session(&self, workspace_id: &str, thread_key: &str) -> StoreResult<Option<String>>;

    /// Binds an adapter thread to `session_id` unless it is bound already; returns the
    /// session it is bound to (the first binding wins a race).
    async fn bind_thread(&self, workspace_id: &str, thread_key: &str, session_id: &str) -> StoreResult<String>;

    /// Lists sessions of a workspace. The bodies come **without** their `agent`: a page
    /// of sessions of one large agent would otherwise hold a copy per session. Load it
    /// once per distinct `agent_snapshot_id` with [`Store::agent_snapshot`].
    async fn list_sessions(&self, workspace_id: &str, query: &SessionQuery) -> StoreResult<Vec<Session>>;

    /// A stored agent snapshot (immutable: a changed agent is a new snapshot).
    async fn agent_snapshot(&self, id: &str) -> StoreResult<Option<Value>>;

    /// Marks a session archived (idempotent).
    async fn archive_session(&self, workspace_id: &str, id: &str) -> StoreResult<Session>;

    /// Deletes a session with its threads, events and runs; `false` if it did not exist.
    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;

    // --- runs and fencing ----------------------------------------------------------

    /// Life of a turn, step 2, in one transaction: append the input events, make the
    /// thread's open run runnable (or create one, `pending`), and write the queue
    /// message to the outbox. Nothing is published here.
    async fn submit(&self, submission: Submission) -> StoreResult<Submitted>;

    /// Reads a run.
    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Run>>;

    /// Claims a run for `lease_ms` (see `queries/claim_run.sql`).
    async fn claim_run(&self, run_id: &str, owner: &str, lease_ms: i64) -> StoreResult<ClaimOutcome>;

    /// Extends the lease of `claim`; returns the new expiry. `Fenced` if it was lost.
    async fn renew_lease(&self, claim: &Claim, lease_ms: i64) -> StoreResult<i64>;

    /// Hands the run back as `pending` without spending retry budget. `Fenced` if the
    /// claim was already lost.
    async fn relinquish(&self, claim: &Claim) -> StoreResult<()>;

    /// Commits events under `claim`, atomically with the epoch check. `Fenced` (and
    /// nothing written) if the epoch is no longer current.
    async fn commit(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>>;

    /// Commits final events and settles the attempt in one fenced transaction.
    async fn settle(&self, claim: &Claim, events: Vec<NewEvent>, settlement: Settlement) -> StoreResult<Settled>;

    /// Runs `pending` since before `cutoff_ms`, or leased with a lease that expired
    /// before it: candidates for a republished submission (see `stranded_runs.sql`).
    async fn stranded_runs(&self, cutoff_ms: i64, limit: i64) -> StoreResult<Vec<StrandedRun>>;

    // --- outbox and idempotency ----------------------------------------------------

    /// Outbox rows written at or before `created_before_ms`, oldest first.
    async fn outbox_due(&self, created_before_ms: i64, limit: i64) -> StoreResult<Vec<OutboxMessage>>;

    /// Removes a published outbox row (idempotent).
    async fn outbox_delete(&self, id: i64) -> StoreResult<()>;

    /// Begins a request under an idempotency key, scoped to a workspace.
    async fn idempotency_begin(
        &self,
        workspace_id: &str,
        key: &str,
        request_hash: &str,
        ttl_ms: i64,
    ) -> StoreResult<IdempotencyBegin>;

    /// Records the response of a request begun with `idempotency_begin`.
    async fn idempotency_complete(
        &self,
        workspace_id: &str,
        key: &str,
        status_code: i64,
        response: &str,
    ) -> StoreResult<()>;

    // --- environment work (hands) ----------------------------------------------------

    /// Queues a work item for a session unless one is open; `Some` when created.
    async fn ensure_work_item(
        &self,
        workspace_id: &str,
        environment_id: &str,
        session_id: &str,
        hands: &str,
    ) -> StoreResult<Option<WorkItem>>;

    /// Offers the oldest queued item of `source` that is not offered, or whose offer is
    /// older than `reclaim_older_than_ms`, with a new sessions token (stored hashed).
    async fn poll_work(
        &self,
        source: &WorkSource,
        reclaim_older_than_ms: i64,
        token_hash: &str,
    ) -> StoreResult<Option<WorkItem>>;

    /// Records a poller of an environment (`workers_polling`).
    async fn note_work_poller(&self, environment_id: &str, worker_id: &str) -> StoreResult<()>;

    /// Reads a work item of an environment.
    async fn get_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Option<WorkItem>>;

    /// Lists an environment's work items by id, after the cursor.
    async fn list_work(&self, environment_id: &str, after_id: Option<&str>, limit: i64) -> StoreResult<Vec<WorkItem>>;

    /// `queued` → `starting`.
    async fn ack_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Result<WorkItem, WorkConflict>>;

    /// Records a heartbeat when `expected` matches (`NO_HEARTBEAT` for the first).
    async fn heartbeat_work(
        &self,
        environment_id: &str,
        work_id: &str,
        expected: &str,
        ttl_seconds: Option<i64>,
    ) -> StoreResult<Option<Heartbeat>>;

    /// Graceful (`stopping`) or forced (`stopped`) stop; a conflict when already stopped.
    async fn stop_work(
        &self,
        environment_id: &str,
        work_id: &str,
        force: bool,
    ) -> StoreResult<Option<Result<WorkItem, WorkConflict>>>;

    /// Merge-patches an item's metadata (a null value deletes the key).
    async fn update_work_metadata(
        &self,
        environment_id: &str,
        work_id: &str,
        patch: &Value,
    ) -> StoreResult<Option<WorkItem>>;

    /// Queue statistics.
    async fn work_stats(&self, environment_id: &str) -> StoreResult<WorkStats>;

    /// Resolves a sessions token of an item that has not stopped.
    async fn resolve_sessions_token(&self, token: &str) -> StoreResult<Option<SessionsToken>>;

    /// Expired leases: `stopping` items stop; acked items go back to the queue, and
    /// after `max_lost_leases` lost leases stop and are reported for a session error.
    async fn expire_work_leases(&self, max_lost_leases: i64) -> StoreResult<Vec<LostHands>>;

    // --- durable run control (operator) ----------------------------------------------

    /// A thread's runs in creation order.
    async fn thread_runs(&self, thread_id: &str) -> StoreResult<Vec<Run>>;

    /// Moves this thread's leased runs whose lease expired before `now_ms` and whose
    /// attempts reached `max_attempts` to dead letters; returns how many.
    async fn quarantine_expired(&self, thread_id: &str, max_attempts: i64, now_ms: i64) -> StoreResult<u64>;

    /// A dead letter of this thread back to pending with a fresh retry budget, and its
    /// queue message (to publish); `None` if it is not dead-lettered in this thread.
    async fn requeue_dead_letter(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<OutboxMessage>>;

    /// Deletes this thread's dead-lettered runs; returns how many.
    async fn purge_dead_letters(&self, thread_id: &str) -> StoreResult<u64>;

    /// Records a durable cancel intent; a leased run loses its lease (epoch + 1) and,
    /// like an awaiting one, becomes pending so a claim commits the cancelled outcome
    /// (its queue message is returned). `None` if the run is not of this thread.
    async fn cancel_run(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<(Run, Option<OutboxMessage>)>>;

    /// Records a pause intent on this thread's leased run (`run_id`, or whichever is
    /// leased); `None` when no such run is live.
    async fn request_pause(&self, thread_id: &str, run_id: Option<&str>) -> StoreResult<Option<Run>>;

    /// Clears the paused ticket of this thread (an awaiting run with a pause intent);
    /// `None` when there is none.
    async fn take_pause(&self, thread_id: &str) -> StoreResult<Option<Run>>;

    /// Supersedes this thread's pending and awaiting runs that carry no cancel intent
    /// (a leased run is left alone: cancel it); returns their ids.
    async fn supersede_runs(&self, thread_id: &str) -> StoreResult<Vec<String>>;

    /// Fresh queue messages for this thread's runnable runs (pending, or leased past
    /// their lease), for when a submission may have been lost.
    async fn republish_runnable(&self, thread_id: &str) -> StoreResult<Vec<OutboxMessage>>;

    // --- live inbox ---------------------------------------------------------------------

    /// A session's live inbox.
    async fn inbox(&self, session_id: &str) -> StoreResult<InboxSnapshot>;

    /// Changes a session's live inbox while one of its runs is live.
    async fn change_inbox(
        &self,
        session_id: &str,
        change: InboxChange,
    ) -> StoreResult<Result<InboxSnapshot, InboxRefusal>>;

    /// Whether the session's live inbox holds messages.
    async fn inbox_pending(&self, session_id: &str) -> StoreResult<bool>;

    /// Like [`Store::commit`], committing the session's live inbox (as `user.message`
    /// events, in order) ahead of `events`, in the same fenced transaction.
    async fn commit_with_inbox(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>>;

    /// Records a new A2A task (its creation time from the store's clock; `canceled` and
    /// `notified_state` start cleared).
    async fn a2a_create_task(&self, task: &A2aTask) -> StoreResult<()>;

    /// An A2A task of the workspace.
    async fn a2a_get_task(&self, workspace_id: &str, id: &str) -> StoreResult<Option<A2aTask>>;

    /// The workspace's A2A tasks (of one context if given), newest first, at most `limit`.
    async fn a2a_list_tasks(
        &self,
        workspace_id: &str,
        context_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<A2aTask>>;

    /// Takes the context's start lease for `holder` until now + `lease_ms`; false when
    /// another holder's lease has not expired.
    async fn a2a_lock_context(
        &self,
        workspace_id: &str,
        context_id: &str,
        holder: &str,
        lease_ms: i64,
    ) -> StoreResult<bool>;

    /// Releases the context's start lease if `holder` still has it.
    async fn a2a_unlock_context(&self, workspace_id: &str, context_id: &str, holder: &str) -> StoreResult<()>;

    /// Notes a further input of the task (it continues after input-required).
    async fn a2a_task_input(&self, id: &str, input_seq: i64) -> StoreResult<()>;

    /// Marks the task canceled.
    async fn a2a_cancel_task(&self, id: &str) -> StoreResult<()>;

    /// Creates or replaces a push config (by task and id).
    async fn a2a_put_push_config(&self, config: &A2aPushConfig) -> StoreResult<()>;

    /// One push config of a task.
    async fn a2a_get_push_config(&self, task_id: &str, id: &str) -> StoreResult<Option<A2aPushConfig>>;

    /// A task's push configs, oldest first.
    async fn a2a_list_push_configs(&self, task_id: &str) -> StoreResult<Vec<A2aPushConfig>>;

    /// Deletes a push config; false when there was none.
    async fn a2a_delete_push_config(&self, task_id: &str, id: &str) -> StoreResult<bool>;

    /// Up to `limit` tasks with push configs whose notified state is not terminal and
    /// whose session committed events past the sequence the watcher last looked at
    /// ([`Store::a2a_push_watched`]), least recently looked at first.
    async fn a2a_push_watch(&self, terminal: &[&str], limit: i64) -> StoreResult<Vec<A2aWatch>>;

    /// Records that the watcher looked at a task with its session at `session_seq`
    /// (never moving back) and sends it to the back of the watch order; a smaller
    /// `session_seq` (a failed look) only does the latter.
    async fn a2a_push_watched(&self, task_id: &str, session_seq: i64) -> StoreResult<()>;

    /// Moves the task's notified state from `expected` to `state` and enqueues
    /// `deliveries` in one transaction; false (nothing written) when another process
    /// moved it first.
    async fn a2a_enqueue_push(
        &self,
        task_id: &str,
        expected: Option<&str>,
        state: &str,
        deliveries: Vec<A2aDelivery>,
    ) -> StoreResult<bool>;

    /// Claims due deliveries under a lease (one process each), counting the attempt.
    async fn a2a_claim_deliveries(&self, lease_ms: i64, limit: i64) -> StoreResult<Vec<A2aDelivery>>;

    /// Removes a delivered (or abandoned) notification.
    async fn a2a_delivery_done(&self, id: &str) -> StoreResult<()>;

    /// Schedules another attempt of a notification.
    async fn a2a_delivery_retry(&self, id: &str, next_attempt_ms: i64) -> StoreResult<()>;

    /// Rows of `table` that may hold sealed secrets, in key order strictly after `after`
    /// (a previous row's `(id, sub_id)`), at most `limit`. A read; no lock is held.
    async fn sealed_page(
        &self,
        table: SealedTable,
        after: Option<(&str, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<SealedRow>>;

    /// Compare-and-swap of one row's sealed text: writes `replacement` only while the
    /// stored text is still exactly `row.text`, and bumps the row's version (resources)
    /// or resources revision (sessions) so a writer that read the old text fails its own
    /// compare-and-swap instead of writing it back. `false`: the row changed or is gone,
    /// nothing was written. One statement, durable when it returns.
    async fn replace_sealed(&self, row: &SealedRow, replacement: &str) -> StoreResult<bool>;
}

/// Where secrets sealed with the process's key live at rest (`agentd keys rotate-secret`
/// re-seals each under a new key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedTable {
    /// `resources` of kind `vault_credential`: the body's `_sealed`, for the credential id.
    VaultCredentials,
    /// `sessions`: each `body.resources[]._sealed`, for that resource's id.
    Sessions,
    /// `a2a_push_configs.auth_credentials`, for `a2a-push:{task_id}:{id}`.
    A2aPushConfigs,
}

impl SealedTable {
    /// Every table, in the order a rotation visits them.
    pub const ALL: [SealedTable; 3] =
        [SealedTable::VaultCredentials, SealedTable::Sessions, SealedTable::A2aPushConfigs];

    /// A name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SealedTable::VaultCredentials => "vault_credentials",
            SealedTable::Sessions => "sessions",
            SealedTable::A2aPushConfigs => "a2a_push_configs",
        }
    }
}

/// One row that may hold sealed secrets, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRow {
    /// Its table.
    pub table: SealedTable,
    /// The row id (the task id of an A2A push config).
    pub id: String,
    /// The second key column (the push config id), empty elsewhere.
    pub sub_id: String,
    /// The stored text holding the sealed values: the JSON body, or the sealed column.
    pub text: String,
}
