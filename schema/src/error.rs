//! What can go wrong in the store, and whether a retry is safe.

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or timed out. For a write the outcome is
    /// unknown: the caller must not assume it was not committed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The addressed row does not exist (in the caller's scope).
    #[error("{what} not found: {id}")]
    NotFound {
        /// The kind of thing looked up.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// A compare-and-swap precondition (version, state) did not hold; nothing changed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The claim's epoch is no longer current: another worker owns the run. Nothing
    /// was written; the caller must abandon the run.
    #[error("fenced: run {run_id} is no longer held at epoch {epoch}")]
    Fenced {
        /// The run.
        run_id: String,
        /// The stale epoch that was presented.
        epoch: i64,
    },
    /// The database answered with an error we did not expect (a bug or a schema drift).
    #[error("store error: {0}")]
    Backend(String),
}

impl StoreError {
    /// True when the failed operation certainly wrote nothing, so it may be retried or
    /// reported as "not committed" without risk of a duplicate.
    pub fn is_certainly_not_committed(&self) -> bool {
        match self {
            StoreError::NotFound { .. } | StoreError::Conflict(_) | StoreError::Fenced { .. } => true,
            StoreError::Unavailable(_) | StoreError::Backend(_) => false,
        }
    }

    /// True when a dependency is down (maps to 503).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Whether `error` says the database is unreachable rather than refusing (a 503): the
/// one classification `StoreError::from` and the SQLite writer's group commit share.
pub(crate) fn unreachable_database(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // The server is going away or not taking connections (class 57: an
        // administrator's or a crash's shutdown, "cannot connect now"; class 08: the
        // connection failed): unavailable, like an I/O error, not a wrong statement.
        sqlx::Error::Database(db) => db.code().is_some_and(|code| code.starts_with("57P") || code.starts_with("08")),
        _ => false,
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        if unreachable_database(&error) {
            return StoreError::Unavailable(error.to_string());
        }
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict(db.message().to_owned()),
            _ => StoreError::Backend(error.to_string()),
        }
    }
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;
