//! The one error every domain service returns. Each surface maps it, variant by variant,
//! into its own wire shape (managed envelope, A2A codes, MCP results, AG-UI `RUN_ERROR`).

use agentd_schema::StoreError;

/// Why a domain operation did not happen. Every message is lowercase and names the
/// field or id at fault; `Internal` causes are logged by the surface, never sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// The resource does not exist for this tenant (or is out of its reach).
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed or names something unusable; the message names the field.
    #[error("{message}")]
    Invalid {
        /// Names the field at fault.
        message: String,
        /// Machine-readable detail the managed API sends as `error.details.error_code`.
        code: Option<&'static str>,
    },
    /// The session is archived and takes no input.
    #[error("{0}")]
    Archived(String),
    /// The session an adapter thread was bound to has been deleted.
    #[error("{0}")]
    Deleted(String),
    /// The session is terminated and takes no input.
    #[error("{0}")]
    Terminated(String),
    /// The session's budget (`max_list_cost`) is reached: no new turn.
    #[error("{0}")]
    BudgetReached(String),
    /// The session's agent is disabled now: no new turn.
    #[error("{0}")]
    AgentDisabled(String),
    /// The session's agent is archived (or gone) now: no new turn.
    #[error("{0}")]
    AgentArchived(String),
    /// The session's environment is archived now: no new turn.
    #[error("{0}")]
    EnvironmentArchived(String),
    /// The change collides with the current state; replaying it unchanged cannot succeed.
    #[error("{0}")]
    Conflict(String),
    /// The target no longer takes this change (e.g. the live inbox without a live run).
    #[error("{0}")]
    Gone(String),
    /// The resource existed and has expired (a file past its `expires_at`).
    #[error("{0}")]
    Expired(String),
    /// The body is larger than the operation accepts.
    #[error("{0}")]
    TooLarge(String),
    /// A name that must be unique in the workspace is taken (a skill's).
    #[error("{0}")]
    NameTaken(String),
    /// A memory's `content_sha256` precondition did not hold: it changed since it was read.
    #[error("{0}")]
    MemoryPreconditionFailed(String),
    /// Another memory of the store has the path.
    #[error("{0}")]
    MemoryPathConflict(String),
    /// A dependency (store, queue, bus) is down; retrying later may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an unexpected backend failure; the cause is for the log.
    #[error("internal error")]
    Internal(String),
}

impl DomainError {
    /// An invalid request naming the field at fault.
    pub fn invalid(message: impl Into<String>) -> Self {
        DomainError::Invalid { message: message.into(), code: None }
    }

    /// An invalid request with a machine-readable code.
    pub fn invalid_with_code(code: &'static str, message: impl Into<String>) -> Self {
        DomainError::Invalid { message: message.into(), code: Some(code) }
    }

    /// Whether the error refuses input because of the session's state (the rows of the
    /// parity matrix), as opposed to a malformed request or a failure.
    pub fn is_refusal(&self) -> bool {
        match self {
            DomainError::Archived(_)
            | DomainError::Deleted(_)
            | DomainError::Terminated(_)
            | DomainError::BudgetReached(_)
            | DomainError::AgentDisabled(_)
            | DomainError::AgentArchived(_)
            | DomainError::EnvironmentArchived(_) => true,
            DomainError::NotFound(_)
            | DomainError::Invalid { .. }
            | DomainError::Expired(_)
            | DomainError::TooLarge(_)
            | DomainError::NameTaken(_)
            | DomainError::MemoryPreconditionFailed(_)
            | DomainError::MemoryPathConflict(_)
            | DomainError::Conflict(_)
            | DomainError::Gone(_)
            | DomainError::Unavailable(_)
            | DomainError::Internal(_) => false,
        }
    }

    /// A stable snake_case name of the variant, for surfaces that carry a code string
    /// (AG-UI `RUN_ERROR.code`).
    pub fn code(&self) -> &'static str {
        match self {
            DomainError::NotFound(_) => "not_found",
            DomainError::Invalid { .. } => "invalid_request",
            DomainError::Archived(_) => "session_archived",
            DomainError::Deleted(_) => "session_deleted",
            DomainError::Terminated(_) => "session_terminated",
            DomainError::BudgetReached(_) => "budget_reached",
            DomainError::AgentDisabled(_) => "agent_disabled",
            DomainError::AgentArchived(_) => "agent_archived",
            DomainError::EnvironmentArchived(_) => "environment_archived",
            DomainError::Conflict(_) => "conflict",
            DomainError::Expired(_) => "expired",
            DomainError::TooLarge(_) => "too_large",
            DomainError::NameTaken(_) => "name_taken",
            DomainError::MemoryPreconditionFailed(_) => "memory_precondition_failed",
            DomainError::MemoryPathConflict(_) => "memory_path_conflict",
            DomainError::Gone(_) => "gone",
            DomainError::Unavailable(_) => "unavailable",
            DomainError::Internal(_) => "internal",
        }
    }
}

impl From<agentd_schema::catalogs::Unloaded> for DomainError {
    /// A workspace whose model configuration this gateway could not read: 503, never
    /// the bootstrap catalog in its place.
    fn from(error: agentd_schema::catalogs::Unloaded) -> Self {
        DomainError::Unavailable(error.to_string())
    }
}

impl From<StoreError> for DomainError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => {
                tracing::warn!(%cause, "store unavailable");
                DomainError::Unavailable("the store is unavailable; retry once it is back".to_owned())
            }
            StoreError::NotFound { what, id } => DomainError::NotFound(format!("{what} not found: {id}")),
            StoreError::Conflict(message) => DomainError::Conflict(message),
            StoreError::Fenced { .. } | StoreError::Backend(_) => DomainError::Internal(error.to_string()),
        }
    }
}

/// Result of a domain operation.
pub type DomainResult<T> = Result<T, DomainError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each variant, for the surfaces' mapping tests.
    fn every_variant() -> Vec<DomainError> {
        vec![
            DomainError::NotFound("session not found: sesn_x".into()),
            DomainError::invalid("events: at least one event is required"),
            DomainError::Archived("session sesn_x is archived and accepts no events".into()),
            DomainError::Deleted("thread \"t\": its session sesn_x was deleted; start a new thread".into()),
            DomainError::Terminated("session sesn_x is terminated and accepts no events".into()),
            DomainError::BudgetReached("session sesn_x: the session's budget (max_list_cost) is reached".into()),
            DomainError::AgentDisabled("session sesn_x: its agent agent_x is disabled".into()),
            DomainError::AgentArchived("session sesn_x: its agent agent_x is archived".into()),
            DomainError::EnvironmentArchived("session sesn_x: its environment env_x is archived".into()),
            DomainError::Conflict("run run_x already ended".into()),
            DomainError::Gone("session sesn_x has no live run".into()),
            DomainError::Expired("file file_x has expired".into()),
            DomainError::TooLarge("the file is larger than 500000000 bytes".into()),
            DomainError::NameTaken("a skill named \"x\" already exists".into()),
            DomainError::MemoryPreconditionFailed("memory mem_x: content_sha256 is not ab12…".into()),
            DomainError::MemoryPathConflict("memory store memstore_x already has a memory at /a".into()),
            DomainError::Unavailable("the store is unavailable; retry once it is back".into()),
            DomainError::Internal("db password in here".into()),
        ]
    }

    #[test]
    fn every_surface_maps_every_variant() {
        use crate::adapters::a2a::A2aError;
        use crate::error::ApiError;
        for error in every_variant() {
            let refusal = error.is_refusal();
            let managed = ApiError::from(error.clone());
            let a2a = A2aError::from(error.clone());
            let (status, wire) = (managed.code().http_status(), managed.wire_type());
            match &error {
                DomainError::Deleted(_) | DomainError::NotFound(_) | DomainError::Expired(_) => {
                    assert_eq!(status, 404, "{error:?}")
                }
                DomainError::Conflict(_) | DomainError::NameTaken(_) => assert_eq!(status, 409, "{error:?}"),
                DomainError::MemoryPreconditionFailed(_) => {
                    assert_eq!((status, wire), (409, "memory_precondition_failed_error"), "{error:?}")
                }
                DomainError::MemoryPathConflict(_) => {
                    assert_eq!((status, wire), (409, "memory_path_conflict_error"), "{error:?}")
                }
                DomainError::TooLarge(_) => assert_eq!(status, 413, "{error:?}"),
                DomainError::Gone(_) => assert_eq!(status, 410, "{error:?}"),
                DomainError::Unavailable(_) => assert_eq!(status, 503, "{error:?}"),
                DomainError::Internal(_) => {
                    assert_eq!(status, 500);
                    assert_eq!(managed.to_string(), "internal error", "the cause is not sent");
                    assert_eq!(a2a.message, "internal error", "the cause is not sent");
                }
                _ => assert_eq!((status, wire), (400, "invalid_request_error"), "{error:?}"),
            }
            // Every refusing state is one A2A decision on both bindings.
            if refusal {
                assert_eq!((a2a.code(), a2a.to_rest().0), (-32004, 400), "{error:?}");
                assert_eq!(a2a.to_rest().1["error"]["status"], "FAILED_PRECONDITION", "{error:?}");
                assert!(!error.code().is_empty());
            }
        }
        let budget = ApiError::from(DomainError::BudgetReached("x".into()));
        assert!(matches!(budget, ApiError::InvalidRequest { code: Some("budget_reached"), .. }));
    }
}
