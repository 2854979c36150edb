use std::time::Duration;

use sqlx::any::AnyPoolOptions;

use sqlx::Row;

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
    // The acquire timeout only has to outlast `SLOW`, which takes over a second in a
    // debug build beside the other tests; the waiter's 1 s below is what would fail.
    let held = pool(2, Duration::from_secs(4)).await;
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
mod groups {
    use std::sync::Arc;

    use super::*;

    /// A grouped writer and a reader on one temporary database file.
    struct Writer {
        writer: HeldPool,
        reader: AnyPool,
        _dir: tempfile::TempDir,
    }

    async fn writer() -> Writer {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("store.db").display());
        let options = || AnyPoolOptions::new().acquire_timeout(Duration::from_secs(5)).test_before_acquire(false);
        let writer = options().max_connections(1).connect(&url).await.unwrap();
        sqlx::raw_sql("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER)").execute(&writer).await.unwrap();
        let reader = options().max_connections(1).connect(&url).await.unwrap();
        Writer { writer: HeldPool::grouped_writer(writer), reader, _dir: dir }
    }

    impl Writer {
        /// The rows committed, as another connection sees them.
        async fn committed(&self) -> Vec<i64> {
            sqlx::query_scalar("SELECT x FROM t ORDER BY x").fetch_all(&self.reader).await.unwrap()
        }

        fn commits(&self) -> u64 {
            self.writer.group().unwrap().commits
        }

        async fn insert_in_tx(&self, x: i64) -> Tx {
            let mut tx = self.writer.begin().await.unwrap();
            sqlx::query("INSERT INTO t VALUES ($1)").bind(x).execute(&mut tx).await.unwrap();
            tx
        }

        /// Waits until `n` checkouts queue for the writer.
        async fn until_queued(&self, n: usize) {
            while self.writer.queued() < n {
                tokio::task::yield_now().await;
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkouts_queued_behind_each_other_share_commits_and_each_hears_only_after_its_own() {
        let w = Arc::new(writer().await);
        let tasks: Vec<_> = (0..40)
            .map(|x| {
                let w = w.clone();
                tokio::spawn(async move {
                    if x % 2 == 0 {
                        w.insert_in_tx(x).await.commit().await.unwrap();
                    } else {
                        sqlx::query("INSERT INTO t VALUES ($1)").bind(x).execute(&w.writer).await.unwrap();
                    }
                    // Told committed: another connection sees it.
                    let seen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t WHERE x = $1")
                        .bind(x)
                        .fetch_one(&w.reader)
                        .await
                        .unwrap();
                    assert_eq!(seen, 1, "{x} was reported committed before its commit");
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(w.committed().await, (0..40).collect::<Vec<_>>());
        assert!(w.commits() < 40, "{} commits for 40 checkouts that queued together", w.commits());
        assert!(!w.writer.group_open());
    }

    #[tokio::test]
    async fn a_member_rolled_back_leaves_the_rest_of_its_group() {
        let w = Arc::new(writer().await);
        let first = w.insert_in_tx(1).await;
        let rolled_back = tokio::spawn({
            let w = w.clone();
            async move { w.insert_in_tx(2).await.rollback().await }
        });
        w.until_queued(1).await;
        let last = tokio::spawn({
            let w = w.clone();
            async move { w.insert_in_tx(3).await.commit().await }
        });
        w.until_queued(2).await;
        // Others queue: the first leaves its work in the open group and waits.
        first.commit().await.unwrap();
        rolled_back.await.unwrap().unwrap();
        last.await.unwrap().unwrap();
        assert_eq!(w.committed().await, vec![1, 3]);
        assert_eq!(w.commits(), 1, "one commit for the group");
    }

    #[tokio::test]
    async fn a_member_dropped_while_its_first_statement_is_on_its_way_fails_its_group() {
        let w = Arc::new(writer().await);
        let first = w.insert_in_tx(1).await;
        let dropped = tokio::spawn({
            let w = w.clone();
            async move {
                let mut tx = w.writer.begin().await.unwrap();
                let statement = SLOW.replace("3000000", "300000");
                let cut =
                    tokio::time::timeout(Duration::from_millis(5), sqlx::query(&statement).execute(&mut tx)).await;
                assert!(cut.is_err(), "the slow statement was cut off");
            }
        });
        w.until_queued(1).await;
        let error = first.commit().await.unwrap_err();
        assert!(error.to_string().contains("group commit failed"), "{error}");
        dropped.await.unwrap();
        // Nothing of the group, and the writer is out of its transaction and usable.
        assert_eq!(w.committed().await, Vec::<i64>::new());
        w.insert_in_tx(4).await.commit().await.unwrap();
        assert_eq!(w.committed().await, vec![4]);
    }

    #[tokio::test]
    async fn a_group_whose_transaction_was_lost_fails_every_member() {
        let w = Arc::new(writer().await);
        let first = w.insert_in_tx(1).await;
        let lost = tokio::spawn({
            let w = w.clone();
            async move {
                let mut tx = w.writer.begin().await.unwrap();
                sqlx::query("INSERT INTO t VALUES (2)").execute(&mut tx).await.unwrap();
                // What SQLite does to a transaction on a full disk, say.
                sqlx::query("ROLLBACK").execute(&mut tx).await.unwrap();
                sqlx::query("INSERT INTO t VALUES (3)").execute(&mut tx).await.unwrap();
                tx.commit().await
            }
        });
        w.until_queued(1).await;
        let error = first.commit().await.unwrap_err();
        assert!(error.to_string().contains("group commit failed"), "{error}");
        lost.await.unwrap().unwrap_err();
        // Neither the first member's row nor the lost one's own first. (3 ran outside
        // any transaction once SQLite had dropped it, and committed as it ran, as a
        // statement after a lost transaction does without groups.)
        assert_eq!(w.committed().await, vec![3]);
        assert!(!w.writer.group_open());
    }

    #[tokio::test]
    async fn a_member_commits_its_group_itself_when_those_it_waited_for_stop_queueing() {
        let w = Arc::new(writer().await);
        let first = w.insert_in_tx(1).await;
        let mut queued = Box::pin(w.writer.lease());
        assert!(futures::poll!(queued.as_mut()).is_pending());
        assert_eq!(w.writer.queued(), 1);
        let commit = tokio::spawn(first.commit());
        // The first leaves the group open for the queued checkout, which is cancelled
        // before it takes the writer.
        while !commit.is_finished() && w.writer.group().unwrap().members.is_empty() {
            tokio::task::yield_now().await;
        }
        drop(queued);
        let started = Instant::now();
        commit.await.unwrap().unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(w.committed().await, vec![1]);
    }

    #[tokio::test]
    async fn a_commit_others_wait_on_ends_even_when_its_caller_goes_away() {
        let w = Arc::new(writer().await);
        let first = w.insert_in_tx(1).await;
        let committer = tokio::spawn({
            let w = w.clone();
            async move {
                let tx = w.insert_in_tx(2).await;
                // Cut off right after its first poll, with the first member waiting on it.
                let mut commit = Box::pin(tx.commit());
                futures::poll!(commit.as_mut()).is_pending()
            }
        });
        w.until_queued(1).await;
        first.commit().await.unwrap();
        assert!(committer.await.unwrap(), "the commit was cut off");
        assert_eq!(w.committed().await, vec![1, 2]);
    }

    #[tokio::test]
    async fn a_commit_cut_off_after_it_was_sent_still_commits_and_the_next_checkout_opens_its_own_group() {
        let w = writer().await;
        let mut commit = Box::pin(w.insert_in_tx(1).await.commit());
        assert!(futures::poll!(commit.as_mut()).is_pending(), "the commit is on its way");
        drop(commit);
        // The commit ended without its caller; the next checkout is not a member of
        // the committed group but opens and commits its own.
        w.insert_in_tx(2).await.commit().await.unwrap();
        assert_eq!(w.committed().await, vec![1, 2]);
    }

    #[tokio::test]
    async fn a_group_never_opens_inside_a_transaction_left_open() {
        let w = Arc::new(writer().await);
        // A checkout cut off with its connection inside a transaction.
        let mut stale = w.writer.lease().await.unwrap();
        sqlx::raw_sql("BEGIN; INSERT INTO t VALUES (9)").execute(stale.conn()).await.unwrap();
        stale.settled = true;
        drop(stale);
        let mut tx = w.writer.begin().await.unwrap();
        let refused = sqlx::query("INSERT INTO t VALUES (1)").execute(&mut tx).await.unwrap_err();
        assert!(refused.to_string().contains("within a transaction"), "{refused}");
        // Its rollback ends the transaction left open; the next group commits.
        tx.rollback().await.unwrap();
        w.insert_in_tx(2).await.commit().await.unwrap();
        assert_eq!(w.committed().await, vec![2]);
    }

    #[tokio::test]
    async fn the_checkpoint_runs_outside_the_group() {
        let w = Arc::new(writer().await);
        let first = w.insert_in_tx(1).await;
        let checkpoint = tokio::spawn({
            let w = w.clone();
            async move { w.writer.fetch_one_alone("PRAGMA wal_checkpoint(PASSIVE)").await.map(|row| row.columns().len()) }
        });
        w.until_queued(1).await;
        first.commit().await.unwrap();
        assert_eq!(checkpoint.await.unwrap().unwrap(), 3);
        assert_eq!(w.committed().await, vec![1]);
        assert!(!w.writer.group_open());
    }
}
