//! Group commit on SQLite's one writer (ADR 0040).
//!
//! The writer's checkouts — transactions and single statements — that queue behind each
//! other share one SQLite transaction and one commit. The first opens it with
//! `BEGIN; SAVEPOINT agentd_group`. A checkout that ends while others queue for the
//! writer leaves its work in the open transaction and waits for the commit; the one
//! that ends with no one queued, or the one that makes the group [`GROUP_AT_MOST`]
//! long, commits it with `RELEASE agentd_group; COMMIT` and tells every member how it
//! went. No member hears "committed" before the commit.
//!
//! A transaction that joins an open group begins with `SAVEPOINT agentd_member`, so
//! its rollback (`ROLLBACK TO agentd_member`) undoes its own work only; one that opens
//! the group is alone in it and rolls back with `ROLLBACK`. A transaction dropped
//! while its first request may be on its way cannot know whether its savepoint exists,
//! and a `ROLLBACK TO` could then undo the member before it: the whole group is rolled
//! back instead and its members hear the failure.
//!
//! An error that makes SQLite roll back the whole transaction (a full disk, say) takes
//! the group's savepoint with it, so the group's `RELEASE` fails and every member hears
//! the failure: members are never told of a commit that did not happen.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Executor;
use tokio::sync::oneshot;

use super::{HeldPool, Lease};

/// Starts the group's transaction (before the first statement of its first checkout).
/// The `BEGIN` fails on a connection some cut-off checkout left inside a transaction,
/// so a group never opens within one: its commit would not be a commit.
pub(super) const OPEN: &str = "BEGIN; SAVEPOINT agentd_group; ";

/// Starts a transaction that joins an open group (before its first statement).
pub(super) const JOIN: &str = "SAVEPOINT agentd_member; ";

/// Commits the group. The `RELEASE` fails if the group's transaction was lost (and a
/// later savepoint began another), and then nothing is committed.
const COMMIT: &str = "RELEASE agentd_group; COMMIT";

/// Undoes a joined transaction's own work.
pub(super) const UNDO_MEMBER: &str = "ROLLBACK TO agentd_member";

/// The most checkouts one commit covers, so the first of them waits a bounded time.
const GROUP_AT_MOST: usize = 32;

/// How long a member waits for the commit before it takes the writer to commit the
/// group itself: the checkouts it left the group open for may have been cancelled
/// while they queued.
const STRAGGLING_AFTER: Duration = Duration::from_millis(50);

/// The writer's group: whether its transaction is open, and who waits for its commit.
#[derive(Debug, Default)]
pub(super) struct Group {
    open: bool,
    pub(super) members: Vec<oneshot::Sender<Result<(), Failure>>>,
    /// Commits so far (`agentd_sqlite_group_commits_total` counts them too).
    pub(super) commits: u64,
}

/// A group's failed commit, as each member hears it.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    message: Arc<str>,
    /// The database was unreachable rather than refusing (the store's 503).
    unavailable: bool,
}

impl Failure {
    fn of(error: &sqlx::Error) -> Self {
        Self { message: error.to_string().into(), unavailable: crate::error::unreachable_database(error) }
    }

    fn error(&self) -> sqlx::Error {
        let message = format!("the SQLite writer's group commit failed: {}", self.message);
        if self.unavailable { sqlx::Error::Io(std::io::Error::other(message)) } else { sqlx::Error::Protocol(message) }
    }
}

/// How a checkout ends its part in the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// Its work is in the group: it waits for the commit.
    Committed,
    /// Nothing of its own to commit (rolled back, failed, or did nothing).
    Nothing,
}

impl HeldPool {
    pub(super) fn group(&self) -> Option<std::sync::MutexGuard<'_, Group>> {
        let group = self.0.group.as_ref()?;
        Some(group.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Whether this pool commits in groups (SQLite's writer).
    pub(super) fn grouped(&self) -> bool {
        self.0.group.is_some()
    }

    /// Whether the writer's connection is inside the group's transaction.
    pub(super) fn group_open(&self) -> bool {
        self.group().is_some_and(|group| group.open)
    }

    /// Marks the group's transaction open: called as the request beginning with
    /// [`OPEN`] is sent.
    pub(super) fn opened_group(&self) {
        if let Some(mut group) = self.group() {
            group.open = true;
        }
    }

    /// Ends a checkout of the grouped writer: commits the group, or leaves it open for
    /// the checkouts queued behind this one and, if `part` is `Committed`, waits for
    /// the commit.
    pub(super) async fn end_part(&self, lease: Lease, part: Part) -> Result<(), sqlx::Error> {
        let waiting = {
            let Some(mut group) = self.group() else { return Ok(()) };
            if !group.open {
                return Ok(());
            }
            if self.queued() == 0 || group.members.len() >= GROUP_AT_MOST {
                None
            } else if part == Part::Committed {
                let (sender, receiver) = oneshot::channel();
                group.members.push(sender);
                Some(receiver)
            } else {
                // Those queued commit it.
                return Ok(());
            }
        };
        match waiting {
            None => {
                let (_, committed) = self.commit_group(lease).await;
                if part == Part::Committed { committed } else { Ok(()) }
            }
            Some(receiver) => {
                // The next checkout takes the connection, inside the open transaction.
                drop(lease);
                self.wait_for_commit(receiver).await
            }
        }
    }

    /// Commits the group on the writer `lease` holds, and tells its members. The commit
    /// runs in a task of its own, so that it ends, and the members hear of it, even if
    /// this checkout's caller goes away meanwhile: cut off, its request would stop
    /// after the `RELEASE`, leaving the transaction open, and a commit that happened
    /// would be reported to the members as failed. The lease comes back, unless that
    /// task was lost.
    pub(super) async fn commit_group(&self, mut lease: Lease) -> (Option<Lease>, Result<(), sqlx::Error>) {
        let owner = self.clone();
        let task = tokio::spawn(async move {
            let result = owner.commit_now(&mut lease).await;
            (lease, result)
        });
        match task.await {
            Ok((lease, result)) => (Some(lease), result),
            Err(lost) => {
                (None, Err(sqlx::Error::Protocol(format!("the SQLite writer's group commit was lost: {lost}"))))
            }
        }
    }

    async fn commit_now(&self, lease: &mut Lease) -> Result<(), sqlx::Error> {
        // Closed before the commit is sent: cut off after that, the next checkout opens
        // a group of its own, whose `BEGIN` fails if this one's transaction is still open.
        let members = {
            let Some(mut group) = self.group() else { return Ok(()) };
            group.open = false;
            group.commits += 1;
            std::mem::take(&mut group.members)
        };
        // The committing checkout and those that waited for it.
        metrics::counter!("agentd_sqlite_group_commits_total").increment(1);
        metrics::counter!("agentd_sqlite_group_checkouts_total").increment(members.len() as u64 + 1);
        let result = lease.conn().execute(COMMIT).await.map(drop);
        if result.is_err() {
            // The transaction may still be open (a savepoint lost with it, say).
            self.undo_transaction(lease).await;
        }
        tell(members, result.as_ref().map(drop).map_err(Failure::of));
        lease.settle(&result);
        result
    }

    /// Rolls the whole group back, its members told `why`.
    pub(super) async fn abandon_group(&self, lease: &mut Lease, why: &str) {
        tracing::warn!(why, "the SQLite writer's group is rolled back");
        self.undo_transaction(lease).await;
        self.tell_members(Err(Failure { message: why.into(), unavailable: false }));
    }

    /// `ROLLBACK` on the writer; a connection it fails on is closed, never handed on
    /// inside a transaction.
    pub(super) async fn undo_transaction(&self, lease: &mut Lease) {
        if lease.conn().execute("ROLLBACK").await.is_err() {
            lease.discard().await;
        }
        if let Some(mut group) = self.group() {
            group.open = false;
        }
    }

    fn tell_members(&self, outcome: Result<(), Failure>) {
        let members = {
            let Some(mut group) = self.group() else { return };
            group.open = false;
            std::mem::take(&mut group.members)
        };
        tell(members, outcome);
    }

    async fn wait_for_commit(&self, mut receiver: oneshot::Receiver<Result<(), Failure>>) -> Result<(), sqlx::Error> {
        loop {
            match tokio::time::timeout(STRAGGLING_AFTER, &mut receiver).await {
                Ok(Ok(outcome)) => return outcome.map_err(|failure| failure.error()),
                Ok(Err(_)) => return Err(sqlx::Error::Protocol("the SQLite writer's group ended untold".to_owned())),
                Err(_) => {
                    // No one came to commit after this checkout: take the writer and
                    // commit the group from here.
                    let lease = self.lease().await?;
                    if self.group_open() {
                        // Its outcome reaches this member through `receiver`.
                        let _ = self.commit_group(lease).await;
                    }
                }
            }
        }
    }

    /// A checkout of the writer outside any group: the open group is committed first.
    /// For statements SQLite refuses inside a transaction (a WAL checkpoint).
    pub(in crate::sql) async fn fetch_one_alone(&self, sql: &'static str) -> Result<sqlx::any::AnyRow, sqlx::Error> {
        let mut lease = self.lease().await?;
        if self.group_open() {
            let (kept, committed) = self.commit_group(lease).await;
            committed?;
            lease = match kept {
                Some(lease) => lease,
                None => self.lease().await?,
            };
        }
        let result = lease.conn().fetch_one(sql).await;
        lease.settle(&result);
        result
    }
}

fn tell(members: Vec<oneshot::Sender<Result<(), Failure>>>, outcome: Result<(), Failure>) {
    for member in members {
        // A member that stopped waiting (cancelled) has nothing to hear.
        member.send(outcome.clone()).ok();
    }
}
