//! [`Tx`], the store's one transaction type (ADR 0037, 0039, 0040).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sqlx::any::{AnyQueryResult, AnyRow};
use sqlx::{Any, AnyConnection, Database, Describe, Either, Execute, Executor, TransactionManager};

use super::group::{self, Part};
use super::{Lease, Results, first_row, prefixed, yield_all};

/// sqlx's name for the SQLite backend (`AnyConnection::backend_name`).
const SQLITE: &str = "SQLite";

/// A transaction on a checked-out connection (`HeldPool::begin`). Its statements run on
/// `&mut *tx` (an sqlx `Executor`). Ending it cleanly holds the connection for the
/// next checkout, with no ping.
///
/// On SQLite its beginning is not a request of its own: it is sent with the first
/// statement (`BEGIN; <statement>`, ADR 0039), and a transaction that ran no statement
/// ends without a request. On the grouped writer it opens or joins the writer's group
/// instead, and its commit is the group's (ADR 0040). sqlx does not track these
/// transactions, so this type rolls back itself when dropped open: a task that owns
/// the checkout rolls it back before anyone else gets the connection.
///
/// On PostgreSQL it begins, commits and rolls back through sqlx's transaction manager;
/// dropped open, it starts a rollback and leaves the connection to sqlx, whose ping
/// sends it, as sqlx's own `Transaction` does.
#[derive(Debug)]
pub(in crate::sql) struct Tx {
    /// Taken when it ends, or by the rollback of a transaction dropped open.
    lease: Option<Lease>,
    state: State,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// PostgreSQL: sqlx's transaction manager.
    Managed,
    /// SQLite on a connection of its own: `BEGIN` with the first statement.
    Plain,
    /// The grouped writer, its group closed: the first statement opens it.
    Opens,
    /// The grouped writer, its group open: the first statement joins it.
    Joins,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// SQLite: nothing sent yet.
    Deferred,
    /// The first statement's request is on its way (its future was polled) and has
    /// not answered: whether it began anything is not known.
    Sending,
    Open,
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Commit,
    Rollback,
}

impl Tx {
    pub(super) async fn begin(mut lease: Lease) -> Result<Self, sqlx::Error> {
        let kind = if lease.owner.grouped() {
            if lease.owner.group_open() { Kind::Joins } else { Kind::Opens }
        } else if lease.conn().backend_name() == SQLITE {
            Kind::Plain
        } else {
            <Any as Database>::TransactionManager::begin(lease.conn(), None).await?;
            return Ok(Self { lease: Some(lease), state: State::Open, kind: Kind::Managed });
        };
        Ok(Self { lease: Some(lease), state: State::Deferred, kind })
    }

    pub(in crate::sql) async fn commit(self) -> Result<(), sqlx::Error> {
        self.end(End::Commit).await
    }

    pub(in crate::sql) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.end(End::Rollback).await
    }

    async fn end(mut self, end: End) -> Result<(), sqlx::Error> {
        let lease = self.lease.take().expect("a transaction holds its lease until it ends");
        let state = std::mem::replace(&mut self.state, State::Ended);
        finish(lease, self.kind, state, end).await
    }

    fn conn(&mut self) -> &mut AnyConnection {
        self.lease.as_mut().expect("a transaction holds its lease until it ends").conn()
    }

    /// What goes before the first statement, in the same request.
    fn prefix(&self) -> &'static str {
        match self.kind {
            Kind::Plain => "BEGIN; ",
            Kind::Opens => group::OPEN,
            Kind::Joins => group::JOIN,
            Kind::Managed => unreachable!("sqlx's transaction manager began it"),
        }
    }
}

/// Ends a transaction on its lease: `end` it, or undo it as far as `state` says it got.
async fn finish(mut lease: Lease, kind: Kind, state: State, end: End) -> Result<(), sqlx::Error> {
    let owner = lease.owner.clone();
    match (kind, state, end) {
        (_, State::Ended, _) => Ok(()),
        (Kind::Managed, _, _) => {
            let result = match end {
                End::Commit => <Any as Database>::TransactionManager::commit(lease.conn()).await,
                End::Rollback => <Any as Database>::TransactionManager::rollback(lease.conn()).await,
            };
            if result.is_err() {
                // Unsettled, so sqlx takes the connection and its ping sends the rollback.
                <Any as Database>::TransactionManager::start_rollback(lease.conn());
            }
            lease.settle(&result);
            result
        }
        (Kind::Plain, State::Deferred, _) => {
            lease.settled = true;
            Ok(())
        }
        (Kind::Plain, _, _) => {
            let statement = if end == End::Commit { "COMMIT" } else { "ROLLBACK" };
            let result = lease.conn().execute(statement).await.map(drop);
            let out = match (&result, end) {
                (Ok(()), _) => true,
                // A failed commit (a deferred constraint) leaves the transaction open.
                (Err(_), End::Commit) => lease.conn().execute("ROLLBACK").await.is_ok(),
                // Its `BEGIN` may never have been sent: not known to be out of one.
                (Err(_), End::Rollback) => false,
            };
            if out {
                lease.settled = true;
            } else {
                lease.discard().await;
            }
            result
        }
        (Kind::Opens | Kind::Joins, State::Deferred, _) => {
            lease.settled = true;
            owner.end_part(lease, Part::Nothing).await.ok();
            Ok(())
        }
        (Kind::Opens | Kind::Joins, _, End::Commit) => {
            lease.settled = true;
            owner.end_part(lease, Part::Committed).await
        }
        (Kind::Opens, _, End::Rollback) => {
            // Alone in the group it opened: the whole transaction is its own.
            owner.undo_transaction(&mut lease).await;
            lease.settled = lease.conn.is_some();
            Ok(())
        }
        (Kind::Joins, State::Open, End::Rollback) => {
            if lease.conn().execute(group::UNDO_MEMBER).await.is_err() {
                owner.abandon_group(&mut lease, "a member's rollback failed").await;
            }
            lease.settled = lease.conn.is_some();
            owner.end_part(lease, Part::Nothing).await.ok();
            Ok(())
        }
        (Kind::Joins, _, End::Rollback) => {
            // Its savepoint may not exist, and `ROLLBACK TO` would then undo the member
            // before it.
            let why = "a transaction dropped while its first statement was on its way";
            owner.abandon_group(&mut lease, why).await;
            lease.settled = lease.conn.is_some();
            Ok(())
        }
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        let Some(mut lease) = self.lease.take() else { return };
        match (self.kind, self.state) {
            (_, State::Ended) => {}
            (Kind::Managed, _) => {
                // Unsettled, so sqlx takes the connection and its ping sends the rollback.
                <Any as Database>::TransactionManager::start_rollback(lease.conn());
            }
            (Kind::Plain, State::Deferred) => lease.settled = true,
            (kind, state) => match tokio::runtime::Handle::try_current() {
                // The rollback owns the checkout, so the next one waits for it.
                Ok(runtime) => drop(runtime.spawn(finish(lease, kind, state, End::Rollback))),
                // No runtime to roll back on: closing the connection rolls back.
                Err(_) => drop(lease.conn.take().map(|conn| conn.detach())),
            },
        }
    }
}

impl<'t> Executor<'t> for &'t mut Tx {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        't: 'e,
    {
        if self.state != State::Deferred {
            return self.conn().fetch_many(query);
        }
        yield_all(self.first(query))
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        E: 'q + Execute<'q, Any>,
        't: 'e,
    {
        if self.state != State::Deferred {
            return self.conn().fetch_optional(query);
        }
        let all = self.first(query);
        Box::pin(async move { all.await.map(first_row) })
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

impl Tx {
    /// The first statement, sent with what begins the transaction. The state says
    /// `Sending` from the moment the request goes (the future's first poll) until it
    /// answers; a group is marked open as its opening request goes.
    fn first<'e, 'q: 'e, E>(&'e mut self, query: E) -> impl Future<Output = Result<Results, sqlx::Error>> + Send + 'e
    where
        E: 'q + Execute<'q, Any>,
    {
        let prefix = self.prefix();
        let Self { lease, state, kind } = self;
        let lease = lease.as_mut().expect("a transaction holds its lease until it ends");
        async move {
            *state = State::Sending;
            if *kind == Kind::Opens {
                lease.owner.opened_group();
            }
            let results = prefixed(lease.conn(), prefix, query).await;
            *state = State::Open;
            results
        }
    }
}
