//! SQLite's WAL checkpoints, mostly off the commit path (ADR 0038).
//!
//! By default SQLite checkpoints inside the commit that grows the WAL past 1,000 pages:
//! the one writer connection (ADR 0014) copies the WAL back into the database file and
//! fsyncs it — the only fsync under `synchronous = NORMAL` — while every other write
//! queues behind it. The writer runs with `wal_autocheckpoint = 0` instead, and
//! [`Checkpoints`] does the copying in two steps:
//!
//! 1. a `PASSIVE` checkpoint on a **reader** connection copies what the WAL holds, beside
//!    the writer, which goes on committing meanwhile;
//! 2. when the WAL has grown past [`RESTART_AFTER`] pages, a `PASSIVE` checkpoint on the
//!    **writer** connection copies the few pages committed during step 1. Only a
//!    checkpoint that nothing is appended to while it runs can copy the whole WAL, and
//!    only a wholly copied WAL is started again from its beginning by the next commit:
//!    without this step a busy store's WAL never restarts and grows without bound.

use std::time::Duration;

use sqlx::Row;
use sqlx::any::AnyRow;
use tokio::task::JoinHandle;

use super::held::HeldPool;

/// The writer's settings on top of `SQLITE_PRAGMAS`: no checkpoint inside a commit; and
/// the savepoints of its groups (ADR 0040) journal the pages they change in memory
/// instead of spilling to a temporary file past 64 KiB.
pub(super) const WRITER_PRAGMAS: &str = "PRAGMA wal_autocheckpoint = 0; PRAGMA temp_store = MEMORY;";

/// How often to checkpoint while writes come in.
const WHILE_WRITING: Duration = Duration::from_millis(100);

/// The longest wait between checkpoints: the wait doubles from [`WHILE_WRITING`] up to
/// this while nothing is written, so an idle store wakes once a second.
const WHILE_IDLE: Duration = Duration::from_secs(1);

/// A WAL this long (pages of 4 KiB) is restarted: the size at which SQLite's own
/// automatic checkpoint would have run.
const RESTART_AFTER: i64 = 1_000;

/// The checkpoint task of a SQLite store; dropping it stops the task.
#[derive(Debug)]
pub(super) struct Checkpoints(JoinHandle<()>);

impl Checkpoints {
    /// Starts checkpointing: copies through `readers`, restarts through `writer`.
    pub(super) fn spawn(readers: HeldPool, writer: HeldPool) -> Self {
        Self(tokio::spawn(async move {
            let mut wait = WHILE_WRITING;
            let mut last = None;
            loop {
                tokio::time::sleep(wait).await;
                let state = match step(&readers, &writer).await {
                    Ok(state) => state,
                    Err(sqlx::Error::PoolClosed) => return,
                    Err(error) => {
                        // A store that keeps failing (a full disk, say) logs once a second,
                        // not at the pace of a busy WAL.
                        tracing::warn!(%error, "SQLite WAL checkpoint failed; retrying");
                        (wait, last) = (WHILE_IDLE, None);
                        continue;
                    }
                };
                // The WAL unchanged since the last look: nothing was written.
                wait = if last == Some(state) { (wait * 2).min(WHILE_IDLE) } else { WHILE_WRITING };
                last = Some(state);
            }
        }))
    }
}

impl Drop for Checkpoints {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The WAL's size in pages and how many of them are in the database file, after a
/// passive checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WalState {
    pages: i64,
    copied: i64,
}

/// Copies the WAL beside the writer, then lets the writer finish the copy if the WAL is
/// long enough to restart.
async fn step(readers: &HeldPool, writer: &HeldPool) -> Result<WalState, sqlx::Error> {
    let row = sqlx::query(CHECKPOINT).fetch_one(readers).await?;
    let mut state = WalState::of(&row)?;
    if state.pages >= RESTART_AFTER {
        // Outside the writer's group: SQLite checkpoints only outside a transaction.
        state = WalState::of(&writer.fetch_one_alone(CHECKPOINT).await?)?;
        metrics::counter!("agentd_sqlite_wal_writer_checkpoints_total").increment(1);
    }
    metrics::gauge!("agentd_sqlite_wal_pages").set(state.pages as f64);
    Ok(state)
}

/// One row: busy (always 0 for PASSIVE), the WAL's pages, the pages copied.
const CHECKPOINT: &str = "PRAGMA wal_checkpoint(PASSIVE)";

impl WalState {
    fn of(row: &AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self { pages: row.try_get(1)?, copied: row.try_get(2)? })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::SystemClock;
    use crate::sql::{ConnectOptions, SqlStore};

    /// Writes `pages` 4 KiB pages' worth of rows through the writer, in transactions of 50.
    async fn write(store: &SqlStore, pages: usize) {
        for _ in 0..pages / 50 {
            let mut tx = store.primary.begin().await.expect("begin");
            for _ in 0..50 {
                sqlx::query("INSERT INTO scratch (body) VALUES ($1)")
                    .bind("x".repeat(4_000))
                    .execute(&mut tx)
                    .await
                    .expect("insert");
            }
            tx.commit().await.expect("commit");
        }
    }

    // Two worker threads: the checkpoint task keeps its own pace beside the writing test,
    // as in a server, instead of running only when the test's task yields.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_restarted_while_the_writer_never_stops_writing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.db");
        let url = format!("sqlite://{}", path.display());
        let store = SqlStore::connect(ConnectOptions::new(&url), Arc::new(SystemClock)).await.expect("connect");
        let setting: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint").fetch_one(&store.primary).await.unwrap();
        assert_eq!(setting, 0, "the writer's commits do not checkpoint");
        sqlx::query("CREATE TABLE scratch (body TEXT NOT NULL)").execute(&store.primary).await.expect("create");
        // 60,000 pages (240 MiB) through the WAL with no pause between commits: a
        // checkpoint beside the writer alone never copies the whole WAL, so it would
        // never restart and its file would hold them all. Restarted, it holds what the
        // writer commits between two restarts (~20 MiB in a debug build on a busy
        // machine), however much is written in all.
        let written = 60_000;
        write(&store, written).await;
        let wal = std::fs::metadata(dir.path().join("store.db-wal")).expect("the WAL").len();
        assert!(wal < (written as u64 * 4_096) / 3, "the WAL file reached {wal} bytes");
        // Once nothing is written, everything in the WAL reaches the database file.
        tokio::time::sleep(WHILE_WRITING * 3).await;
        let row = sqlx::query(CHECKPOINT).fetch_one(&store.readers).await.expect("checkpoint");
        let state = WalState::of(&row).expect("its state");
        assert_eq!(state.pages, state.copied, "{state:?}");
        store.close().await;
    }

    #[tokio::test]
    async fn the_task_ends_when_the_store_closes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = SqlStore::connect(ConnectOptions::new(&url), Arc::new(SystemClock)).await.expect("connect");
        store.close().await;
        let task = &store._checkpoints.as_ref().expect("a SQLite store checkpoints").0;
        tokio::time::timeout(WHILE_IDLE * 2, async {
            while !task.is_finished() {
                tokio::time::sleep(WHILE_WRITING).await;
            }
        })
        .await
        .expect("the task ended");
    }
}
