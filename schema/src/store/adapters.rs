//! Adapter threads (ADR 0007) and the A2A server's tasks, push configs and leased push
//! deliveries (ADR 0010, migration 0010).

use async_trait::async_trait;

use crate::error::StoreResult;

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

/// Adapter threads and A2A. A thread key is bound to one session of its workspace by
/// the first binding (later ones read it back); task and push-config rows are single
/// statements; the push watcher moves a task's notified state by compare-and-swap and
/// enqueues its deliveries in the same transaction; deliveries are claimed under a
/// lease, so each is attempted by one process at a time.
#[async_trait]
pub trait AdapterStore: Send + Sync {
    /// The session an adapter thread is bound to.
    async fn thread_session(&self, workspace_id: &str, thread_key: &str) -> StoreResult<Option<String>>;

    /// Binds an adapter thread to `session_id` unless it is bound already; returns the
    /// session it is bound to (the first binding wins a race).
    async fn bind_thread(&self, workspace_id: &str, thread_key: &str, session_id: &str) -> StoreResult<String>;

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
    /// ([`AdapterStore::a2a_push_watched`]), least recently looked at first.
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
}
