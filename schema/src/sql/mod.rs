//! The store written once over `sqlx::Any`, for PostgreSQL and SQLite alike (ADR 0003).
//!
//! Queries are portable SQL: `$N` placeholders, `RETURNING`, `ON CONFLICT`, times as
//! epoch-millisecond BIGINTs, JSON as TEXT, flags as 0/1 BIGINTs. Only the migration
//! directories are per dialect. The claim and fencing statements live in named files
//! under `schema/queries/`.

mod a2a;
mod durable;
mod idempotency;
mod inbox;
mod outbox;
mod resources;
mod runs;
mod sealed;
mod sessions;
mod tenancy;
mod work;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor, Row};

use crate::clock::Clock;
use crate::error::{StoreError, StoreResult};
use crate::store::*;

/// Embedded migrations, one directory per dialect.
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// Connection settings for [`SqlStore::connect`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `postgres://…` or `sqlite://…`.
    pub url: String,
    /// Pool size.
    pub max_connections: u32,
    /// How long to wait for a connection before reporting the store unavailable.
    pub acquire_timeout: Duration,
}

impl ConnectOptions {
    /// Defaults suited to `url`'s backend.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), max_connections: 16, acquire_timeout: Duration::from_secs(3) }
    }
}

/// The SQL store over PostgreSQL or SQLite.
pub struct SqlStore {
    pool: AnyPool,
    backend: Backend,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore").field("backend", &self.backend).finish_non_exhaustive()
    }
}

/// The backend a database URL names, or an error naming the accepted schemes.
pub fn backend_of(url: &str) -> StoreResult<Backend> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else {
        Err(StoreError::Backend(format!(
            "unsupported database url scheme in {:?}: expected postgres://… or sqlite://…",
            redact_url(url)
        )))
    }
}

/// The URL with any password replaced, for logs and errors.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}://{user}:***{}", &url[..scheme_end], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl SqlStore {
    /// Connects (and for SQLite creates the file). Does not migrate.
    pub async fn connect(options: ConnectOptions, clock: Arc<dyn Clock>) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let backend = backend_of(&options.url)?;
        let mut pool =
            AnyPoolOptions::new().max_connections(options.max_connections).acquire_timeout(options.acquire_timeout);
        if backend == Backend::Sqlite {
            // WAL lets readers proceed while one writer commits; writers queue on the
            // busy timeout instead of failing.
            pool = pool.after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON;").await?;
                    Ok(())
                })
            });
        }
        let url = if backend == Backend::Sqlite && !options.url.contains("mode=") {
            let sep = if options.url.contains('?') { '&' } else { '?' };
            format!("{}{sep}mode=rwc", options.url)
        } else {
            options.url.clone()
        };
        let pool = pool.connect(&url).await?;
        Ok(Self { pool, backend, clock })
    }

    /// Applies pending migrations. On PostgreSQL an advisory lock serializes
    /// concurrent migrators, so several processes may start together.
    pub async fn migrate(&self) -> StoreResult<()> {
        let migrator = match self.backend {
            Backend::Postgres => &POSTGRES_MIGRATIONS,
            Backend::Sqlite => &SQLITE_MIGRATIONS,
        };
        migrator.run(&self.pool).await.map_err(|error| match error {
            sqlx::migrate::MigrateError::Execute(inner) => StoreError::from(inner),
            other => StoreError::Backend(other.to_string()),
        })
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }
}

/// Parses a JSON text column.
fn json(row: &AnyRow, column: &str) -> StoreResult<Value> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Backend(format!("corrupt json in {column}: {e}")))
}

/// A 0/1 flag column.
fn flag(row: &AnyRow, column: &str) -> StoreResult<bool> {
    Ok(row.try_get::<i64, _>(column)? != 0)
}

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> Backend {
        self.backend
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn ensure_workspace(&self, organization: &str, workspace: &str) -> StoreResult<Workspace> {
        tenancy::ensure_workspace(self, organization, workspace).await
    }

    async fn find_workspace(&self, id_or_name: &str) -> StoreResult<Option<Workspace>> {
        tenancy::find_workspace(self, id_or_name).await
    }

    async fn insert_api_key(
        &self,
        workspace_id: &str,
        name: &str,
        secret: &str,
        kind: &KeyKind,
    ) -> StoreResult<ApiKeyInfo> {
        tenancy::insert_api_key(self, workspace_id, name, secret, kind).await
    }

    async fn resolve_api_key(&self, secret: &str) -> StoreResult<Option<Scope>> {
        tenancy::resolve_api_key(self, secret).await
    }

    async fn list_api_keys(&self, workspace_id: Option<&str>) -> StoreResult<Vec<ApiKeyInfo>> {
        tenancy::list_api_keys(self, workspace_id).await
    }

    async fn revoke_api_key(&self, key_id: &str) -> StoreResult<bool> {
        tenancy::revoke_api_key(self, key_id).await
    }

    async fn create_resource(&self, new: NewResource) -> StoreResult<Resource> {
        resources::create(self, new).await
    }

    async fn get_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Option<Resource>> {
        resources::get(self, workspace_id, kind, id).await
    }

    async fn update_resource(
        &self,
        workspace_id: &str,
        kind: &str,
        id: &str,
        expected_version: i64,
        body: Value,
        versioned: bool,
    ) -> StoreResult<Resource> {
        resources::update(self, workspace_id, kind, id, expected_version, body, versioned).await
    }

    async fn archive_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<Resource> {
        resources::archive(self, workspace_id, kind, id).await
    }

    async fn delete_resource(&self, workspace_id: &str, kind: &str, id: &str) -> StoreResult<bool> {
        resources::delete(self, workspace_id, kind, id).await
    }

    async fn list_resources(&self, workspace_id: &str, kind: &str, query: &ListQuery) -> StoreResult<Vec<Resource>> {
        resources::list(self, workspace_id, kind, query).await
    }

    async fn get_resource_version(&self, resource_id: &str, version: i64) -> StoreResult<Option<Value>> {
        resources::get_version(self, resource_id, version).await
    }

    async fn list_resource_versions(
        &self,
        resource_id: &str,
        after_version: Option<i64>,
        limit: i64,
        descending: bool,
    ) -> StoreResult<Vec<(i64, Value)>> {
        resources::list_versions(self, resource_id, after_version, limit, descending).await
    }

    async fn create_session(&self, new: NewSession) -> StoreResult<Session> {
        sessions::create(self, new).await
    }

    async fn get_session(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Session>> {
        sessions::get(self, workspace_id, id).await
    }

    async fn load_session(&self, id: &str) -> StoreResult<Option<Session>> {
        sessions::load(self, id).await
    }

    async fn append_events(&self, session_id: &str, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>> {
        let mut tx = self.pool.begin().await?;
        let stored = sessions::append(&mut tx, session_id, events, self.now()).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn list_events(&self, session_id: &str, after_seq: i64, limit: i64) -> StoreResult<Vec<StoredEvent>> {
        sessions::list_events(self, session_id, after_seq, limit).await
    }

    async fn query_events(&self, session_id: &str, query: &EventQuery) -> StoreResult<Vec<StoredEvent>> {
        sessions::query_events(self, session_id, query).await
    }

    async fn update_session(
        &self,
        workspace_id: &str,
        id: &str,
        body: Value,
        events: Vec<NewEvent>,
    ) -> StoreResult<(Session, Vec<StoredEvent>)> {
        sessions::update(self, workspace_id, id, body, events).await
    }

    async fn list_sessions(&self, workspace_id: &str, query: &SessionQuery) -> StoreResult<Vec<Session>> {
        sessions::list(self, workspace_id, query).await
    }

    async fn agent_snapshot(&self, id: &str) -> StoreResult<Option<Value>> {
        sessions::agent_snapshot(self, id).await
    }

    async fn archive_session(&self, workspace_id: &str, id: &str) -> StoreResult<Session> {
        sessions::archive(self, workspace_id, id).await
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        sessions::delete(self, workspace_id, id).await
    }

    async fn submit(&self, submission: Submission) -> StoreResult<Submitted> {
        runs::submit(self, submission).await
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Run>> {
        runs::get(self, run_id).await
    }

    async fn claim_run(&self, run_id: &str, owner: &str, lease_ms: i64) -> StoreResult<ClaimOutcome> {
        runs::claim(self, run_id, owner, lease_ms).await
    }

    async fn renew_lease(&self, claim: &Claim, lease_ms: i64) -> StoreResult<i64> {
        runs::renew(self, claim, lease_ms).await
    }

    async fn relinquish(&self, claim: &Claim) -> StoreResult<()> {
        runs::relinquish(self, claim).await
    }

    async fn commit(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>> {
        Ok(runs::commit(self, claim, events, None).await?.events)
    }

    async fn settle(&self, claim: &Claim, events: Vec<NewEvent>, settlement: Settlement) -> StoreResult<Settled> {
        runs::commit(self, claim, events, Some(settlement)).await
    }

    async fn stranded_runs(&self, cutoff_ms: i64, limit: i64) -> StoreResult<Vec<StrandedRun>> {
        runs::stranded(self, cutoff_ms, limit).await
    }

    async fn outbox_due(&self, created_before_ms: i64, limit: i64) -> StoreResult<Vec<OutboxMessage>> {
        outbox::due(self, created_before_ms, limit).await
    }

    async fn outbox_delete(&self, id: i64) -> StoreResult<()> {
        outbox::delete(self, id).await
    }

    async fn idempotency_begin(
        &self,
        workspace_id: &str,
        key: &str,
        request_hash: &str,
        ttl_ms: i64,
    ) -> StoreResult<IdempotencyBegin> {
        idempotency::begin(self, workspace_id, key, request_hash, ttl_ms).await
    }

    async fn idempotency_complete(
        &self,
        workspace_id: &str,
        key: &str,
        status_code: i64,
        response: &str,
    ) -> StoreResult<()> {
        idempotency::complete(self, workspace_id, key, status_code, response).await
    }

    async fn ensure_work_item(
        &self,
        workspace_id: &str,
        environment_id: &str,
        session_id: &str,
        hands: &str,
    ) -> StoreResult<Option<WorkItem>> {
        work::ensure(self, workspace_id, environment_id, session_id, hands).await
    }

    async fn poll_work(
        &self,
        source: &WorkSource,
        reclaim_older_than_ms: i64,
        token_hash: &str,
    ) -> StoreResult<Option<WorkItem>> {
        work::poll(self, source, reclaim_older_than_ms, token_hash).await
    }

    async fn note_work_poller(&self, environment_id: &str, worker_id: &str) -> StoreResult<()> {
        work::note_poller(self, environment_id, worker_id).await
    }

    async fn get_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Option<WorkItem>> {
        work::get(self, environment_id, work_id).await
    }

    async fn list_work(&self, environment_id: &str, after_id: Option<&str>, limit: i64) -> StoreResult<Vec<WorkItem>> {
        work::list(self, environment_id, after_id, limit).await
    }

    async fn ack_work(&self, environment_id: &str, work_id: &str) -> StoreResult<Result<WorkItem, WorkConflict>> {
        match work::ack(self, environment_id, work_id).await? {
            Some(outcome) => Ok(outcome),
            None => Err(StoreError::NotFound { what: "work", id: work_id.to_owned() }),
        }
    }

    async fn heartbeat_work(
        &self,
        environment_id: &str,
        work_id: &str,
        expected: &str,
        ttl_seconds: Option<i64>,
    ) -> StoreResult<Option<Heartbeat>> {
        work::heartbeat(self, environment_id, work_id, expected, ttl_seconds).await
    }

    async fn stop_work(
        &self,
        environment_id: &str,
        work_id: &str,
        force: bool,
    ) -> StoreResult<Option<Result<WorkItem, WorkConflict>>> {
        work::stop(self, environment_id, work_id, force).await
    }

    async fn update_work_metadata(
        &self,
        environment_id: &str,
        work_id: &str,
        patch: &Value,
    ) -> StoreResult<Option<WorkItem>> {
        work::update_metadata(self, environment_id, work_id, patch).await
    }

    async fn work_stats(&self, environment_id: &str) -> StoreResult<WorkStats> {
        work::stats(self, environment_id).await
    }

    async fn resolve_sessions_token(&self, token: &str) -> StoreResult<Option<SessionsToken>> {
        work::resolve_token(self, token).await
    }

    async fn expire_work_leases(&self, max_lost_leases: i64) -> StoreResult<Vec<LostHands>> {
        work::expire_leases(self, max_lost_leases).await
    }

    async fn thread_runs(&self, thread_id: &str) -> StoreResult<Vec<Run>> {
        durable::thread_runs(self, thread_id).await
    }

    async fn quarantine_expired(&self, thread_id: &str, max_attempts: i64, now_ms: i64) -> StoreResult<u64> {
        durable::quarantine(self, thread_id, max_attempts, now_ms).await
    }

    async fn requeue_dead_letter(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<OutboxMessage>> {
        durable::requeue(self, thread_id, run_id).await
    }

    async fn purge_dead_letters(&self, thread_id: &str) -> StoreResult<u64> {
        durable::purge(self, thread_id).await
    }

    async fn cancel_run(&self, thread_id: &str, run_id: &str) -> StoreResult<Option<(Run, Option<OutboxMessage>)>> {
        durable::cancel(self, thread_id, run_id).await
    }

    async fn replace_session_resources(
        &self,
        workspace_id: &str,
        id: &str,
        expected: Option<i64>,
        body: Value,
        events: Vec<NewEvent>,
    ) -> StoreResult<Result<(Session, Vec<StoredEvent>), i64>> {
        sessions::replace_resources(self, workspace_id, id, expected, body, events).await
    }

    async fn thread_session(&self, workspace_id: &str, thread_key: &str) -> StoreResult<Option<String>> {
        sessions::thread_session(self, workspace_id, thread_key).await
    }

    async fn bind_thread(&self, workspace_id: &str, thread_key: &str, session_id: &str) -> StoreResult<String> {
        sessions::bind_thread(self, workspace_id, thread_key, session_id).await
    }

    async fn inbox(&self, session_id: &str) -> StoreResult<InboxSnapshot> {
        inbox::snapshot(self, session_id).await
    }

    async fn change_inbox(
        &self,
        session_id: &str,
        change: InboxChange,
    ) -> StoreResult<Result<InboxSnapshot, InboxRefusal>> {
        inbox::change(self, session_id, change).await
    }

    async fn inbox_pending(&self, session_id: &str) -> StoreResult<bool> {
        inbox::pending(self, session_id).await
    }

    async fn commit_with_inbox(&self, claim: &Claim, events: Vec<NewEvent>) -> StoreResult<Vec<StoredEvent>> {
        Ok(runs::commit_inner(self, claim, events, None, true).await?.events)
    }

    async fn request_pause(&self, thread_id: &str, run_id: Option<&str>) -> StoreResult<Option<Run>> {
        durable::request_pause(self, thread_id, run_id).await
    }

    async fn take_pause(&self, thread_id: &str) -> StoreResult<Option<Run>> {
        durable::take_pause(self, thread_id).await
    }

    async fn supersede_runs(&self, thread_id: &str) -> StoreResult<Vec<String>> {
        durable::supersede(self, thread_id).await
    }

    async fn republish_runnable(&self, thread_id: &str) -> StoreResult<Vec<OutboxMessage>> {
        durable::runnable(self, thread_id).await
    }

    async fn a2a_create_task(&self, task: &A2aTask) -> StoreResult<()> {
        a2a::create_task(self, task).await
    }

    async fn a2a_get_task(&self, workspace_id: &str, id: &str) -> StoreResult<Option<A2aTask>> {
        a2a::get_task(self, workspace_id, id).await
    }

    async fn a2a_list_tasks(
        &self,
        workspace_id: &str,
        context_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<A2aTask>> {
        a2a::list_tasks(self, workspace_id, context_id, limit).await
    }

    async fn a2a_lock_context(
        &self,
        workspace_id: &str,
        context_id: &str,
        holder: &str,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        a2a::lock_context(self, workspace_id, context_id, holder, lease_ms).await
    }

    async fn a2a_unlock_context(&self, workspace_id: &str, context_id: &str, holder: &str) -> StoreResult<()> {
        a2a::unlock_context(self, workspace_id, context_id, holder).await
    }

    async fn a2a_task_input(&self, id: &str, input_seq: i64) -> StoreResult<()> {
        a2a::task_input(self, id, input_seq).await
    }

    async fn a2a_cancel_task(&self, id: &str) -> StoreResult<()> {
        a2a::cancel_task(self, id).await
    }

    async fn a2a_put_push_config(&self, config: &A2aPushConfig) -> StoreResult<()> {
        a2a::put_config(self, config).await
    }

    async fn a2a_get_push_config(&self, task_id: &str, id: &str) -> StoreResult<Option<A2aPushConfig>> {
        a2a::get_config(self, task_id, id).await
    }

    async fn a2a_list_push_configs(&self, task_id: &str) -> StoreResult<Vec<A2aPushConfig>> {
        a2a::list_configs(self, task_id).await
    }

    async fn a2a_delete_push_config(&self, task_id: &str, id: &str) -> StoreResult<bool> {
        a2a::delete_config(self, task_id, id).await
    }

    async fn sealed_page(
        &self,
        table: SealedTable,
        after: Option<(&str, &str)>,
        limit: i64,
    ) -> StoreResult<Vec<SealedRow>> {
        sealed::page(self, table, after, limit).await
    }

    async fn replace_sealed(&self, row: &SealedRow, replacement: &str) -> StoreResult<bool> {
        sealed::replace(self, row, replacement).await
    }

    async fn a2a_push_watch(&self, terminal: &[&str], limit: i64) -> StoreResult<Vec<A2aWatch>> {
        a2a::push_watch(self, terminal, limit).await
    }

    async fn a2a_push_watched(&self, task_id: &str, session_seq: i64) -> StoreResult<()> {
        a2a::push_watched(self, task_id, session_seq).await
    }

    async fn a2a_enqueue_push(
        &self,
        task_id: &str,
        expected: Option<&str>,
        state: &str,
        deliveries: Vec<A2aDelivery>,
    ) -> StoreResult<bool> {
        a2a::enqueue_push(self, task_id, expected, state, deliveries).await
    }

    async fn a2a_claim_deliveries(&self, lease_ms: i64, limit: i64) -> StoreResult<Vec<A2aDelivery>> {
        a2a::claim_deliveries(self, lease_ms, limit).await
    }

    async fn a2a_delivery_done(&self, id: &str) -> StoreResult<()> {
        a2a::delivery_done(self, id).await
    }

    async fn a2a_delivery_retry(&self, id: &str, next_attempt_ms: i64) -> StoreResult<()> {
        a2a::delivery_retry(self, id, next_attempt_ms).await
    }
}
