//! Connections held between statements (ADR 0037).
//!
//! sqlx pings every connection it takes back into its pool, whatever the connection
//! just did: one more round trip per statement outside a transaction — to PostgreSQL,
//! or to the SQLite connection's worker thread, two thread hand-offs. [`HeldPool`]
//! keeps the connections a statement finished with cleanly in a list of its own and
//! hands them to the next statement without that ping. A connection whose statement
//! failed or was cancelled part way goes back through sqlx, which pings it (settling
//! whatever the cancellation left) or closes it. A transaction ([`Tx`]) keeps its
//! checkout to its end: committed or rolled back, its connection is held like a
//! statement's; dropped while open, it starts a rollback and goes back through sqlx,
//! as sqlx's own `Transaction` does.
//!
//! Every checkout, a transaction's included, takes one of `max_connections` permits
//! until it ends, so a permit holder finds a held connection, an idle one in sqlx, or
//! one on its way back to sqlx (after an error or a cancellation). While any checkout
//! waits on sqlx, checkouts that end give their connections back to sqlx instead of
//! holding them, so none sits unused while a checkout waits.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::any::{AnyArguments, AnyQueryResult, AnyRow};
use sqlx::pool::PoolConnection;
use sqlx::{
    Any, AnyConnection, AnyPool, Connection, Database, Describe, Either, Execute, Executor, TransactionManager,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::RECHECK_IDLE_AFTER;

/// A connection held this long goes back to sqlx, which applies its lifetime rules.
const HELD_AT_MOST: Duration = Duration::from_secs(600);

/// An sqlx pool whose connections are held between statements. Clones share it.
#[derive(Debug, Clone)]
pub(super) struct HeldPool(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    pool: AnyPool,
    held: Mutex<Holding>,
    permits: Arc<Semaphore>,
}

/// The held connections, and how many checkouts wait on sqlx for one: one lock for
/// both, so a connection is never held while a checkout waits on sqlx.
#[derive(Debug, Default)]
struct Holding {
    connections: Vec<Held>,
    waiting: usize,
}

#[derive(Debug)]
struct Held {
    conn: PoolConnection<Any>,
    /// When sqlx handed it out (see [`HELD_AT_MOST`]).
    taken: Instant,
    /// When its last statement ended.
    used: Instant,
}

/// One checkout: a connection for one statement or one transaction.
#[derive(Debug)]
struct Lease {
    owner: HeldPool,
    conn: Option<PoolConnection<Any>>,
    taken: Instant,
    /// Whether the connection may be held for the next statement without sqlx's ping.
    settled: bool,
    _permit: OwnedSemaphorePermit,
}

impl HeldPool {
    pub(super) fn new(pool: AnyPool) -> Self {
        let permits = Arc::new(Semaphore::new(pool.options().get_max_connections() as usize));
        Self(Arc::new(Shared { pool, held: Mutex::default(), permits }))
    }

    /// The sqlx pool itself (migrations take it).
    pub(super) fn inner(&self) -> &AnyPool {
        &self.0.pool
    }

    /// Starts a transaction, which keeps its checkout until it ends.
    pub(super) async fn begin(&self) -> Result<Tx, sqlx::Error> {
        let mut lease = self.lease().await?;
        if lease.conn().backend_name() == SQLITE {
            return Ok(Tx { lease: Some(lease), state: TxState::Deferred });
        }
        <Any as Database>::TransactionManager::begin(lease.conn(), None).await?;
        Ok(Tx { lease: Some(lease), state: TxState::Open })
    }

    /// Lets the held connections go, then closes the sqlx pool.
    pub(super) async fn close(&self) {
        self.0.permits.close();
        // Back to sqlx, whose close waits for every connection to come back.
        drop(std::mem::take(&mut self.held().connections));
        self.0.pool.close().await;
    }

    /// A connection within the pool's acquire timeout, as sqlx's own `acquire`.
    async fn lease(&self) -> Result<Lease, sqlx::Error> {
        let timeout = self.0.pool.options().get_acquire_timeout();
        tokio::time::timeout(timeout, self.lease_unbounded()).await.map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    async fn lease_unbounded(&self) -> Result<Lease, sqlx::Error> {
        let permit = self.0.permits.clone().acquire_owned().await.map_err(|_| sqlx::Error::PoolClosed)?;
        loop {
            let popped = {
                let mut holding = self.held();
                let popped = holding.connections.pop();
                if popped.is_none() {
                    holding.waiting += 1;
                }
                popped
            };
            let Some(mut held) = popped else {
                // Nothing held: sqlx has a connection idle, can open one, or is about to
                // get one back; a statement ending meanwhile gives its connection to sqlx.
                let waiting = Waiting(self);
                let conn = self.0.pool.acquire().await;
                drop(waiting);
                return Ok(self.leased(conn?, Instant::now(), permit));
            };
            // As sqlx's own check before use: a connection idle a while is pinged.
            if held.used.elapsed() >= RECHECK_IDLE_AFTER && held.conn.ping().await.is_err() {
                // sqlx takes it back, finds it broken and closes it.
                drop(held.conn);
                continue;
            }
            return Ok(self.leased(held.conn, held.taken, permit));
        }
    }

    fn leased(&self, conn: PoolConnection<Any>, taken: Instant, permit: OwnedSemaphorePermit) -> Lease {
        Lease { owner: self.clone(), conn: Some(conn), taken, settled: false, _permit: permit }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Holding> {
        self.0.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Holds `held` unless a checkout waits on sqlx, which then gets it from sqlx.
    fn hold(&self, held: Held) {
        let mut holding = self.held();
        if holding.waiting == 0 {
            holding.connections.push(held);
        }
        // Otherwise `held` drops here, after the lock: back to sqlx and its waiter.
    }
}

/// A checkout waiting on sqlx, counted (in [`Holding::waiting`], incremented under the
/// same lock that found nothing held) until it is dropped, cancelled or not.
struct Waiting<'a>(&'a HeldPool);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.held().waiting -= 1;
    }
}

impl Lease {
    fn conn(&mut self) -> &mut AnyConnection {
        self.conn.as_mut().expect("a lease holds its connection until dropped")
    }

    /// Records how the statement ended. Only a statement that succeeded leaves the
    /// connection known to be ready for the next one: even the database's own error
    /// may come with a connection it is closing (PostgreSQL's FATAL), so after any
    /// error sqlx checks the connection.
    fn settle<T>(&mut self, result: &Result<T, sqlx::Error>) {
        self.settled = result.is_ok();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if self.settled && self.taken.elapsed() < HELD_AT_MOST && !self.owner.0.permits.is_closed() {
            self.owner.hold(Held { conn, taken: self.taken, used: Instant::now() });
        }
        // Otherwise `conn` drops here and sqlx takes it back (ping, or close).
    }
}

/// A transaction on a checked-out connection (`HeldPool::begin`). Its statements run on
/// `&mut *tx`. Ending it cleanly holds the connection for the next checkout, with no
/// ping.
///
/// On SQLite its `BEGIN` is not a statement of its own: it is sent with the first
/// statement, as `BEGIN; <statement>` in one request to the connection's thread, and a
/// transaction that ran no statement ends without sending anything. Each request is a
/// hand-off to that thread and back while the one writer is held (ADR 0039); the
/// transaction's `BEGIN`, `COMMIT` and `ROLLBACK` are plain statements sqlx does not
/// track, so this type rolls back itself when dropped open.
///
/// On PostgreSQL it begins, commits and rolls back through sqlx's transaction manager;
/// dropped open, it starts a rollback and leaves the connection to sqlx, whose ping
/// sends it, as sqlx's own `Transaction` does.
#[derive(Debug)]
pub(super) struct Tx {
    /// Taken only when a transaction dropped open is rolled back in a task of its own.
    lease: Option<Lease>,
    state: TxState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    /// SQLite: `BEGIN` goes with the first statement.
    Deferred,
    /// Begun, or its `BEGIN` sent with a statement that may not have finished.
    Open,
    /// Committed or rolled back.
    Ended,
}

/// sqlx's name for the SQLite backend (`AnyConnection::backend_name`).
const SQLITE: &str = "SQLite";

impl Tx {
    fn conn(&mut self) -> &mut AnyConnection {
        self.lease.as_mut().expect("a transaction holds its lease until dropped").conn()
    }

    fn sqlite(&mut self) -> bool {
        self.conn().backend_name() == SQLITE
    }

    pub(super) async fn commit(self) -> Result<(), sqlx::Error> {
        self.end("COMMIT").await
    }

    pub(super) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.end("ROLLBACK").await
    }

    async fn end(mut self, statement: &'static str) -> Result<(), sqlx::Error> {
        let result = match (self.state, self.sqlite()) {
            (TxState::Deferred | TxState::Ended, _) => Ok(()),
            (TxState::Open, true) => self.conn().execute(statement).await.map(drop),
            (TxState::Open, false) if statement == "COMMIT" => {
                <Any as Database>::TransactionManager::commit(self.conn()).await
            }
            (TxState::Open, false) => <Any as Database>::TransactionManager::rollback(self.conn()).await,
        };
        // After an error the transaction may still be open: dropping it rolls it back.
        if result.is_ok() {
            self.state = TxState::Ended;
        }
        if let Some(lease) = self.lease.as_mut() {
            lease.settle(&result);
        }
        result
    }

    /// `query` as the deferred transaction's first statement: `BEGIN; <query>`, its
    /// arguments, and the connection to send it on. The transaction counts as open from
    /// here, whatever the statement's fate.
    fn begin_with<'e, 'q: 'e, E>(
        &'e mut self,
        mut query: E,
    ) -> (String, Result<Option<AnyArguments<'q>>, sqlx::Error>, bool, &'e mut AnyConnection)
    where
        E: 'q + Execute<'q, Any>,
    {
        self.state = TxState::Open;
        let sql = format!("BEGIN; {}", query.sql());
        let persistent = query.persistent();
        let arguments = query.take_arguments().map_err(sqlx::Error::Encode);
        (sql, arguments, persistent, self.conn())
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        match (self.state, self.lease.as_mut()) {
            // Nothing was sent: the connection is as it was checked out.
            (TxState::Deferred, Some(lease)) => lease.settled = true,
            (TxState::Open, Some(_)) => self.roll_back_in_the_background(),
            _ => {}
        }
    }
}

impl Tx {
    fn roll_back_in_the_background(&mut self) {
        let Some(mut lease) = self.lease.take() else { return };
        lease.settled = false;
        if lease.conn().backend_name() != SQLITE {
            // Unsettled, so sqlx takes the connection and its ping sends the rollback.
            <Any as Database>::TransactionManager::start_rollback(lease.conn());
            return;
        }
        // sqlx does not know of this transaction: roll it back before anyone else gets
        // the connection. The lease (and its permit) go with the rollback, so the next
        // checkout waits for it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to roll back on: closing the connection rolls back.
            if let Some(conn) = lease.conn.take() {
                drop(conn.detach());
            }
            return;
        };
        runtime.spawn(async move {
            let result = lease.conn().execute("ROLLBACK").await;
            lease.settle(&result);
            if result.is_err() {
                // Not known to be out of the transaction (its `BEGIN` may never have
                // been sent): closed, never handed on.
                if let Some(conn) = lease.conn.take() {
                    conn.close().await.ok();
                }
            }
        });
    }
}

/// Takes the `BEGIN`'s result off the front of `BEGIN; <statement>`'s results. It is
/// not passed on: its rows-affected count is SQLite's last change count, left by
/// whichever statement last changed rows.
async fn begun(
    results: &mut BoxStream<'_, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>,
) -> Result<(), sqlx::Error> {
    match results.try_next().await? {
        Some(Either::Left(_)) => Ok(()),
        _ => Err(sqlx::Error::Protocol("`BEGIN` answered with a row, or not at all".to_owned())),
    }
}

impl<'t> Executor<'t> for &'t mut Tx {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        't: 'e,
    {
        if self.state != TxState::Deferred {
            return self.conn().fetch_many(query);
        }
        let (sql, arguments, persistent, conn) = self.begin_with(query);
        // The statement text is owned here, so its results are collected before they
        // are yielded, as `HeldPool`'s own are; a transaction's first statement is small.
        let all = async move {
            let query = sqlx::query_with(&sql, arguments?.unwrap_or_default()).persistent(persistent);
            let mut results = conn.fetch_many(query);
            begun(&mut results).await?;
            results.try_collect::<Vec<_>>().await
        };
        futures::stream::once(all).map_ok(|all| futures::stream::iter(all.into_iter().map(Ok))).try_flatten().boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        't: 'e,
    {
        if self.state != TxState::Deferred {
            return self.conn().fetch_optional(query);
        }
        let (sql, arguments, persistent, conn) = self.begin_with(query);
        // Not the backend's `fetch_optional`: sqlx's SQLite one reads only the first
        // result, which here is the `BEGIN`'s.
        Box::pin(async move {
            let query = sqlx::query_with(&sql, arguments?.unwrap_or_default()).persistent(persistent);
            let mut results = conn.fetch_many(query);
            begun(&mut results).await?;
            while let Some(result) = results.try_next().await? {
                if let Either::Right(row) = result {
                    return Ok(Some(row));
                }
            }
            Ok(None)
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [<Any as Database>::TypeInfo],
    ) -> BoxFuture<'e, Result<<Any as Database>::Statement<'q>, sqlx::Error>>
    where
        't: 'e,
    {
        self.conn().prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        't: 'e,
    {
        self.conn().describe(sql)
    }
}

impl<'p> Executor<'p> for &'p HeldPool {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        'p: 'e,
    {
        // Collected before they are yielded: the connection is settled by the time the
        // caller sees the first result, and every read here is bounded.
        let all = async move {
            let mut lease = self.lease().await?;
            let result = lease.conn().fetch_many(query).try_collect::<Vec<_>>().await;
            lease.settle(&result);
            result
        };
        futures::stream::once(all).map_ok(|all| futures::stream::iter(all.into_iter().map(Ok))).try_flatten().boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        'p: 'e,
    {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let result = lease.conn().fetch_optional(query).await;
            lease.settle(&result);
            result
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [<Any as Database>::TypeInfo],
    ) -> BoxFuture<'e, Result<<Any as Database>::Statement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let result = lease.conn().prepare_with(sql, parameters).await;
            lease.settle(&result);
            result
        })
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        'p: 'e,
    {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let result = lease.conn().describe(sql).await;
            lease.settle(&result);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::any::AnyPoolOptions;

    use super::*;

    /// A pool of `max` connections to a fresh in-memory SQLite database each.
    async fn pool(max: u32, acquire_timeout: Duration) -> HeldPool {
        sqlx::any::install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(acquire_timeout)
            .test_before_acquire(false)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        HeldPool::new(pool)
    }

    /// A statement that keeps its connection busy for a while (SQLite has no sleep).
    const SLOW: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) \
                        SELECT COUNT(*) FROM n";

    #[tokio::test]
    async fn a_connection_is_held_for_the_next_statement_and_reused() {
        let held = pool(4, Duration::from_secs(2)).await;
        for _ in 0..20 {
            let one: i64 = sqlx::query_scalar("SELECT 1").fetch_one(&held).await.unwrap();
            assert_eq!(one, 1);
        }
        // One connection served them all, and it is held, not idle in sqlx.
        assert_eq!(held.0.pool.size(), 1);
        assert_eq!(held.0.pool.num_idle(), 0);
        assert_eq!(held.held().connections.len(), 1);
    }

    #[tokio::test]
    async fn a_failed_or_cancelled_statement_returns_its_connection_to_sqlx() {
        let held = pool(4, Duration::from_secs(2)).await;
        sqlx::query("SELECT * FROM no_such_table").execute(&held).await.unwrap_err();
        assert!(held.held().connections.is_empty(), "after an error, sqlx checks the connection");
        // Cancelled part way: sqlx takes it back (and settles it), none is held.
        let cancelled = tokio::time::timeout(Duration::from_millis(5), sqlx::query(SLOW).fetch_one(&held)).await;
        assert!(cancelled.is_err(), "the slow statement was cut off");
        assert!(held.held().connections.is_empty());
        let one: i64 = sqlx::query_scalar("SELECT 1").fetch_one(&held).await.unwrap();
        assert_eq!(one, 1);
    }

    /// A transaction that has inserted `x` into table `t` (created if missing).
    async fn inserting(held: &HeldPool, x: i64) -> Tx {
        sqlx::query("CREATE TABLE IF NOT EXISTS t (x INTEGER)").execute(held).await.unwrap();
        let mut tx = held.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES ($1)").bind(x).execute(&mut tx).await.unwrap();
        tx
    }

    async fn rows(held: &HeldPool) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM t").fetch_one(held).await.unwrap()
    }

    #[tokio::test]
    async fn a_transaction_that_ends_cleanly_holds_its_connection_for_the_next_checkout() {
        let held = pool(4, Duration::from_secs(2)).await;
        inserting(&held, 1).await.commit().await.unwrap();
        // Held, not given back to sqlx (which would ping it on its way to the idle list).
        assert_eq!(held.held().connections.len(), 1);
        assert_eq!(held.0.pool.num_idle(), 0);
        inserting(&held, 2).await.rollback().await.unwrap();
        assert_eq!(held.held().connections.len(), 1);
        // One connection served it all (each in-memory connection is its own database).
        assert_eq!(rows(&held).await, 1);
        assert_eq!(held.0.pool.size(), 1);
    }

    /// Whether the pool's next connection is inside a transaction: SQLite refuses a
    /// `BEGIN` there.
    async fn in_a_transaction(held: &HeldPool) -> bool {
        let mut conn = held.lease().await.unwrap();
        let inside = conn.conn().execute("BEGIN").await.is_err();
        if !inside {
            conn.conn().execute("ROLLBACK").await.unwrap();
        }
        conn.settled = true;
        inside
    }

    #[tokio::test]
    async fn a_transaction_dropped_open_is_rolled_back_before_its_connection_is_used_again() {
        let held = pool(1, Duration::from_secs(2)).await;
        drop(inserting(&held, 1).await);
        // The same (only) connection, out of the transaction, without the insert; it
        // was rolled back, not closed.
        assert!(!in_a_transaction(&held).await);
        assert_eq!(rows(&held).await, 0);
        assert_eq!(held.0.pool.size(), 1);
        inserting(&held, 2).await.commit().await.unwrap();
        assert_eq!(rows(&held).await, 1);
    }

    #[tokio::test]
    async fn a_transaction_begins_with_its_first_statement_even_when_that_statement_fails() {
        let held = pool(1, Duration::from_secs(2)).await;
        sqlx::query("CREATE TABLE t (x INTEGER)").execute(&held).await.unwrap();
        let mut tx = held.begin().await.unwrap();
        sqlx::query("INSERT INTO no_such_table VALUES (1)").execute(&mut tx).await.unwrap_err();
        sqlx::query("INSERT INTO t VALUES (1)").execute(&mut tx).await.unwrap();
        tx.rollback().await.unwrap();
        // The second insert was inside the transaction the failed statement began.
        assert_eq!(rows(&held).await, 0);
        assert!(!in_a_transaction(&held).await);
    }

    #[tokio::test]
    async fn a_transaction_s_first_statement_answers_for_itself() {
        let held = pool(1, Duration::from_secs(2)).await;
        inserting(&held, 1).await.commit().await.unwrap();
        let mut tx = held.begin().await.unwrap();
        // Nothing matches: 0 rows, not the insert's 1 left as SQLite's last change count.
        let updated = sqlx::query("UPDATE t SET x = 2 WHERE x = 5").execute(&mut tx).await.unwrap();
        assert_eq!(updated.rows_affected(), 0);
        let row: Option<i64> = sqlx::query_scalar("SELECT x FROM t").fetch_optional(&mut tx).await.unwrap();
        assert_eq!(row, Some(1));
        tx.commit().await.unwrap();
        let mut tx = held.begin().await.unwrap();
        let first: Option<i64> = sqlx::query_scalar("SELECT x FROM t").fetch_optional(&mut tx).await.unwrap();
        assert_eq!(first, Some(1), "a first statement's row, not the BEGIN's empty answer");
        tx.rollback().await.unwrap();
    }

    #[tokio::test]
    async fn a_transaction_cancelled_in_its_first_statement_leaves_no_transaction_behind() {
        let held = pool(1, Duration::from_secs(2)).await;
        let mut tx = held.begin().await.unwrap();
        // A tenth of `SLOW`: the tests run side by side, and `SLOW`'s users time it.
        let statement = SLOW.replace("3000000", "300000");
        let cancelled = tokio::time::timeout(Duration::from_millis(5), sqlx::query(&statement).execute(&mut tx)).await;
        assert!(cancelled.is_err(), "the slow statement was cut off: {cancelled:?}");
        drop(tx);
        assert!(!in_a_transaction(&held).await);
        inserting(&held, 1).await.commit().await.unwrap();
        assert_eq!(rows(&held).await, 1);
    }

    #[tokio::test]
    async fn a_failed_commit_is_rolled_back_when_its_transaction_is_dropped() {
        let held = pool(1, Duration::from_secs(2)).await;
        let setup = "PRAGMA foreign_keys = ON; CREATE TABLE p (id INTEGER PRIMARY KEY); \
                     CREATE TABLE c (p INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED)";
        sqlx::raw_sql(setup).execute(&held).await.unwrap();
        let mut tx = held.begin().await.unwrap();
        sqlx::query("INSERT INTO c VALUES (1)").execute(&mut tx).await.unwrap();
        // The deferred foreign key fails the commit and leaves the transaction open.
        tx.commit().await.unwrap_err();
        assert!(!in_a_transaction(&held).await);
        let orphans: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM c").fetch_one(&held).await.unwrap();
        assert_eq!(orphans, 0);
    }

    #[tokio::test]
    async fn a_transaction_that_ran_no_statement_ends_without_one() {
        let held = pool(1, Duration::from_secs(2)).await;
        held.begin().await.unwrap().commit().await.unwrap();
        held.begin().await.unwrap().rollback().await.unwrap();
        drop(held.begin().await.unwrap());
        assert!(!in_a_transaction(&held).await);
        assert_eq!(held.held().connections.len(), 1, "held after each, never given back to sqlx");
    }

    #[tokio::test]
    async fn an_open_transaction_keeps_its_checkout() {
        let held = pool(1, Duration::from_millis(200)).await;
        let tx = held.begin().await.unwrap();
        let error = sqlx::query("SELECT 1").execute(&held).await.unwrap_err();
        assert!(matches!(error, sqlx::Error::PoolTimedOut), "{error:?}");
        tx.commit().await.unwrap();
        sqlx::query("SELECT 1").execute(&held).await.unwrap();
    }

    #[tokio::test]
    async fn a_waiter_takes_a_connection_held_back_while_it_waits() {
        // Two connections: a transaction keeps one past the acquire timeout, a slow
        // statement the other. A third statement waits; it must get the slow
        // statement's connection when that is held back, not time out waiting on sqlx.
        let held = pool(2, Duration::from_millis(1500)).await;
        let mut tx = held.begin().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut tx).await.unwrap();
        let slow = tokio::spawn({
            let held = held.clone();
            async move { sqlx::query_scalar::<_, i64>(SLOW).fetch_one(&held).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let waiter = tokio::spawn({
            let held = held.clone();
            async move { sqlx::query_scalar::<_, i64>("SELECT 2").fetch_one(&held).await }
        });
        assert_eq!(slow.await.unwrap().unwrap(), 3_000_000);
        let answer = tokio::time::timeout(Duration::from_secs(1), waiter).await.expect("the waiter was served");
        assert_eq!(answer.unwrap().unwrap(), 2);
        tx.commit().await.unwrap();
    }

    #[tokio::test]
    async fn checkouts_beyond_the_pool_wait_at_most_the_acquire_timeout() {
        let held = pool(1, Duration::from_millis(200)).await;
        let _tx = held.begin().await.unwrap();
        let started = Instant::now();
        let error = sqlx::query("SELECT 1").execute(&held).await.unwrap_err();
        assert!(matches!(error, sqlx::Error::PoolTimedOut), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
