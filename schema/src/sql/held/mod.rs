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
//!
//! SQLite's one writer is a grouped pool ([`HeldPool::grouped_writer`]): its checkouts
//! that queue behind each other share a transaction and its commit (`group.rs`,
//! ADR 0040).

mod group;
#[cfg(test)]
mod tests;
mod tx;

pub(super) use self::tx::Tx;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::any::{AnyQueryResult, AnyRow};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection, Database, Describe, Either, Execute, Executor};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use self::group::{Group, Part};
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
    /// Checkouts waiting for a permit.
    queued: AtomicUsize,
    /// SQLite's writer only: its group of checkouts sharing a commit.
    group: Option<Mutex<Group>>,
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
        Self::with_group(pool, None)
    }

    /// SQLite's one writer connection, whose checkouts commit in groups (ADR 0040).
    pub(super) fn grouped_writer(pool: AnyPool) -> Self {
        assert_eq!(pool.options().get_max_connections(), 1, "a group shares one connection");
        Self::with_group(pool, Some(Mutex::default()))
    }

    fn with_group(pool: AnyPool, group: Option<Mutex<Group>>) -> Self {
        let permits = Arc::new(Semaphore::new(pool.options().get_max_connections() as usize));
        Self(Arc::new(Shared { pool, held: Mutex::default(), permits, queued: AtomicUsize::new(0), group }))
    }

    /// The sqlx pool itself (migrations take it).
    pub(super) fn inner(&self) -> &AnyPool {
        &self.0.pool
    }

    /// Starts a transaction, which keeps its checkout until it ends.
    pub(super) async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Tx::begin(self.lease().await?).await
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

    /// How many checkouts wait for a permit.
    fn queued(&self) -> usize {
        self.0.queued.load(Ordering::Acquire)
    }

    async fn lease_unbounded(&self) -> Result<Lease, sqlx::Error> {
        let permit = {
            let _queued = Queued::new(&self.0.queued);
            self.0.permits.clone().acquire_owned().await.map_err(|_| sqlx::Error::PoolClosed)?
        };
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

/// A checkout waiting for a permit, counted in `Shared::queued` until it has one or is
/// cancelled.
struct Queued<'a>(&'a AtomicUsize);

impl<'a> Queued<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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

    /// Closes the connection: for one whose state is not known.
    async fn discard(&mut self) {
        self.settled = false;
        if let Some(conn) = self.conn.take() {
            conn.close().await.ok();
        }
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

impl HeldPool {
    /// A statement on the grouped writer: alone when nothing else is open or queued,
    /// otherwise in the group, waiting for its commit.
    async fn grouped_statement<'q, E>(&self, mut lease: Lease, query: E, optional: bool) -> Result<Results, sqlx::Error>
    where
        E: 'q + Execute<'q, Any>,
    {
        let open = self.group_open();
        let result = if !open && self.queued() == 0 {
            // Alone: committed by SQLite as it ends.
            let result = run(lease.conn(), query, optional).await;
            lease.settle(&result);
            return result;
        } else if open {
            run(lease.conn(), query, optional).await
        } else {
            self.opened_group();
            prefixed(lease.conn(), group::OPEN, query).await
        };
        lease.settle(&result);
        let part = if result.is_ok() { Part::Committed } else { Part::Nothing };
        let ended = self.end_part(lease, part).await;
        let results = result?;
        ended?;
        Ok(results)
    }
}

/// `query`'s results, or with `optional` its first row only (as `fetch_optional`).
async fn run<'q, E>(conn: &mut AnyConnection, query: E, optional: bool) -> Result<Results, sqlx::Error>
where
    E: 'q + Execute<'q, Any>,
{
    if optional {
        Ok(conn.fetch_optional(query).await?.map(Either::Right).into_iter().collect())
    } else {
        conn.fetch_many(query).try_collect().await
    }
}

/// `query` sent with `prefix` — statements without parameters, each ending in `;` —
/// before it, as one request; `prefix`'s results are taken off. They are not passed
/// on: a rows-affected count there is SQLite's last change count, left by whichever
/// statement last changed rows. (sqlx's SQLite `fetch_optional` would look only at the
/// first result.)
async fn prefixed<'q, E>(conn: &mut AnyConnection, prefix: &str, mut query: E) -> Result<Results, sqlx::Error>
where
    E: 'q + Execute<'q, Any>,
{
    let sql = format!("{prefix}{}", query.sql());
    let persistent = query.persistent();
    let arguments = query.take_arguments().map_err(sqlx::Error::Encode)?.unwrap_or_default();
    let mut results = conn.fetch_many(sqlx::query_with(&sql, arguments).persistent(persistent));
    for _ in 0..prefix.matches(';').count() {
        if !matches!(results.try_next().await?, Some(Either::Left(_))) {
            return Err(sqlx::Error::Protocol(format!("`{}` answered with a row, or not at all", prefix.trim())));
        }
    }
    results.try_collect().await
}

/// A request's results, collected.
type Results = Vec<Either<AnyQueryResult, AnyRow>>;

fn first_row(results: Results) -> Option<AnyRow> {
    results.into_iter().find_map(Either::right)
}

/// The results `all` collects, yielded one by one once it has them.
fn yield_all<'e>(
    all: impl Future<Output = Result<Results, sqlx::Error>> + Send + 'e,
) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>> {
    futures::stream::once(all).map_ok(|all| futures::stream::iter(all.into_iter().map(Ok))).try_flatten().boxed()
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
            if self.grouped() {
                return self.grouped_statement(lease, query, false).await;
            }
            let result = lease.conn().fetch_many(query).try_collect::<Vec<_>>().await;
            lease.settle(&result);
            result
        };
        yield_all(all)
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        'p: 'e,
    {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            if self.grouped() {
                return self.grouped_statement(lease, query, true).await.map(first_row);
            }
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
